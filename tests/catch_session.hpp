// Catch2's session for every test program, compiled once per build (catch_session.cpp)
// instead of once per program. Programs that need set-up around the tests (MPI, a GPU
// check) define main and call run_catch; the others get catch_main.cpp's main.
#pragma once

namespace gradsync_test {

// Runs the tests the command line selects and returns Catch's exit code (0: all passed). The
// report goes to the file `report` unless the command line names one (-o); null: the
// standard output.
int run_catch(int argc, char** argv, const char* report = nullptr);

} // namespace gradsync_test
