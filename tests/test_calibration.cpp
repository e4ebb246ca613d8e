// planner::calibrate over local_group: every rank returns the identical fit, the fit is a
// plausible measurement (times are real, so only sanity bounds), and bad or disagreeing
// arguments end in an exception on every rank instead of a hang.
//
// Rank code only records; CHECKs run on the main thread after run() returns.
#include <catch2/catch.hpp>

#include <cstddef>
#include <string>
#include <vector>

#include <gradsync/gradsync.hpp>
#include <gradsync/runtime/calibration.hpp>

#include "outcome.hpp"

namespace {

namespace gp = gradsync::planner;
using gradsync::local_communicator;
using gradsync::local_group;
using gradsync_test::kind;
using gradsync_test::outcome;
using gradsync_test::record;
using Catch::Matchers::Contains;

struct rank_result {
    outcome o;
    gp::fit_result fit;
};

// body(comm) -> fit_result runs on every rank of a group of n; nothing escapes a rank.
template <class Body>
std::vector<rank_result> run_ranks(int n, Body body)
{
    std::vector<rank_result> results(static_cast<std::size_t>(n));
    local_group group(n);
    group.run([&](local_communicator& comm) {
        rank_result& mine = results[static_cast<std::size_t>(comm.rank())];
        record(mine.o, false, [&] { mine.fit = body(comm); });
    });
    return results;
}

} // namespace

TEST_CASE("calibrate returns the same plausible fit on every rank", "[calibration]")
{
    // The 16 MiB point (fp32) takes milliseconds, so a scheduler stall of a few on a small
    // point of a loaded machine cannot turn the slope negative; 1024 twice: repeats allowed.
    const std::vector<std::size_t> counts{1024, 16384, 262144, 4194304, 1024};
    for (int n : {2, 4}) {
        INFO(n << " ranks");
        const auto fp32 = run_ranks(n, [&](local_communicator& comm) { return gp::calibrate<float>(comm, counts, 5); });
        const auto fp64 = run_ranks(n, [&](local_communicator& comm) {
            return gp::calibrate<double>(comm, counts, 3, gradsync::average{}, gradsync::ring{});
        });
        for (const auto* results : {&fp32, &fp64}) {
            const double largest_bytes = double(counts[3]) * (results == &fp32 ? sizeof(float) : sizeof(double));
            for (const rank_result& r : *results) {
                INFO(r.o.what);
                REQUIRE(r.o.k == kind::ok);
                CHECK(r.fit.cost.a == (*results)[0].fit.cost.a);
                CHECK(r.fit.cost.b == (*results)[0].fit.cost.b);
                CHECK(r.fit.residual_rms_s == (*results)[0].fit.residual_rms_s);
            }
            const gp::fit_result& f = (*results)[0].fit;
            CHECK(f.cost.b > 0);          // 1 MiB takes longer than 4 KiB
            CHECK(f.cost.b < 1e-6);       // faster than 1 MB/s between threads
            // An intercept near zero, never far below it: a loaded machine that slows the
            // largest point (memory shared with other work) tilts the line by a few ms.
            CHECK(f.cost.a > -0.25 * (f.cost.a + f.cost.b * largest_bytes));
            CHECK(f.cost.a < 0.1);
            CHECK(f.residual_rms_s >= 0);
        }
    }
}

TEST_CASE("calibrate refuses bad arguments on every rank", "[calibration]")
{
    const std::vector<std::size_t> good{256, 4096};
    struct bad {
        const char* what;
        std::vector<std::size_t> counts;
        int repetitions;
        const char* says;
    };
    const std::vector<bad> cases{
        {"no repetitions", good, 0, "repetitions must be at least 1"},
        {"one size", {4096, 4096}, 3, "2 distinct element counts"},
        {"no sizes", {}, 3, "2 distinct element counts"},
        {"an empty size", {0, 4096}, 3, "must be positive"},
    };
    for (const bad& c : cases) {
        INFO(c.what);
        const auto all = run_ranks(3, [&](local_communicator& comm) {
            return gp::calibrate<float>(comm, c.counts, c.repetitions);
        });
        for (const rank_result& r : all) {
            CHECK(r.o.k == kind::usage);
            CHECK_THAT(r.o.what, Contains(c.says));
        }
        // Only rank 1 is wrong: it says why, the others name it.
        const auto one = run_ranks(3, [&](local_communicator& comm) {
            return comm.rank() == 1 ? gp::calibrate<float>(comm, c.counts, c.repetitions)
                                    : gp::calibrate<float>(comm, good, 2);
        });
        for (std::size_t rank = 0; rank < one.size(); ++rank) {
            CHECK(one[rank].o.k == kind::usage);
            CHECK_THAT(one[rank].o.what, Contains(rank == 1 ? c.says : "rank 1 passed invalid arguments"));
        }
    }
}

TEST_CASE("calibrate: ranks that disagree get a mismatch_error on every rank", "[calibration]")
{
    const auto repetitions = run_ranks(3, [](local_communicator& comm) {
        return gp::calibrate<float>(comm, std::vector<std::size_t>{256, 4096}, comm.rank() == 2 ? 4 : 2);
    });
    for (const rank_result& r : repetitions) {
        CHECK(r.o.k == kind::mismatch);
        CHECK_THAT(r.o.what, Contains("repetitions"));
    }
    const auto sizes = run_ranks(3, [](local_communicator& comm) {
        return gp::calibrate<float>(comm, std::vector<std::size_t>{256, comm.rank() == 0 ? 4096u : 8192u}, 2);
    });
    for (const rank_result& r : sizes) {
        CHECK(r.o.k == kind::mismatch);
        CHECK_THAT(r.o.what, Contains("element count"));
    }
    const auto how_many = run_ranks(2, [](local_communicator& comm) {
        return comm.rank() == 0 ? gp::calibrate<float>(comm, std::vector<std::size_t>{256, 4096, 8192}, 2)
                                : gp::calibrate<float>(comm, std::vector<std::size_t>{256, 4096}, 2);
    });
    for (const rank_result& r : how_many) {
        CHECK(r.o.k == kind::mismatch);
        CHECK_THAT(r.o.what, Contains("number of sizes"));
    }
}
