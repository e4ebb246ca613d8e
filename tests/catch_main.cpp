// Catch2's main for the local (non-MPI) tests, compiled once and shared by every executable.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
