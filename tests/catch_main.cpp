// main for the test programs that need no set-up of their own: run the selected tests.
#include "catch_session.hpp"

int main(int argc, char** argv) { return gradsync_test::run_catch(argc, argv); }
