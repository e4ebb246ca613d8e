// The reductions conformance suite (tests/conformance/reductions.hpp) over local_group: ranks
// as threads of this process, every N the suite asks for.
#include <catch2/catch.hpp>

#include <gradsync/gradsync.hpp>

#include "conformance/local_harness.hpp"

#include "conformance/reductions.hpp"
