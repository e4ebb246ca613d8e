// Catch2's implementation and the session behind run_catch (catch_session.hpp).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "catch_session.hpp"

int gradsync_test::run_catch(int argc, char** argv, const char* report)
{
    Catch::Session session;
    if (const int bad = session.applyCommandLine(argc, argv))
        return bad;
    if (report && session.configData().outputFilename.empty())
        session.configData().outputFilename = report;
    return session.run();
}
