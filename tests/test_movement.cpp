// The data-movement collectives over local_group (docs/semantics.md, "Allgather, gather,
// scatter and all-to-all"): the conformance suite (tests/conformance/movement.hpp) on 1 to 5
// ranks, and what threads of one process show cheaply: every collective on 1 to 9 ranks over
// a transport with a small eager limit (messages cut as MPI's and Gloo's are); a buffer of
// the wrong size refused by name before any message; an allgatherer or exchanger and a
// reducer called out of order, named on every rank with no deadline; automatic_allgather's
// rule; the allgather rows. Rank code only records; CHECKs run on the main thread.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <gradsync/gradsync.hpp>

#include "conformance/local_harness.hpp"
#include "eager_communicator.hpp"
#include "outcome.hpp"
#include "sanitized.hpp"

#include "conformance/movement.hpp"

namespace {

using gradsync::local_communicator;
using gradsync::local_group;
using gradsync_test::eager_communicator;
using gradsync_test::kind;
using gradsync_test::kind_name;
using gradsync_test::outcome;
using gradsync_test::record;
using Catch::Matchers::Contains;
using H = conformance::harness;

} // namespace

TEST_CASE("every collective over a transport with an eager limit of 256 bytes, 1 to 9 ranks", "[movement]")
{
    // Under the sanitizers the shorter blocks (AddressSanitizer: 29 s of its tier otherwise,
    // run alone).
    const std::vector<std::size_t>& sizes = gradsync_test::sanitized ? conformance::movement_suite::short_block_sizes
                                                                     : conformance::movement_suite::block_sizes;
    for (const int n : gradsync_test::group_sizes(9)) {
        INFO(n << " ranks");
        std::vector<std::string> failed(static_cast<std::size_t>(n));
        local_group group(n);
        const std::string escaped = gradsync_test::run_ranks(group, [&](local_communicator& comm) {
            eager_communicator eager(comm);
            failed[std::size_t(comm.rank())] = conformance::movement_suite::every_collective(eager, sizes);
        });
        CHECK(escaped == "");
        for (int r = 0; r < n; ++r) {
            INFO("rank " << r);
            CHECK(failed[std::size_t(r)] == "");
        }
    }
}

TEST_CASE("a buffer of the wrong size is refused by name on its rank, before any message", "[movement][misuse]")
{
    // Every rank's buffer is one byte short, so no rank sends and none is left waiting.
    using namespace conformance::movement_suite;
    constexpr int n = 5, root = 2;
    constexpr std::size_t b = 100;
    for (const movement m : movements) {
        CAPTURE(who(m));
        const auto res = conformance::misuse_suite::run_recorded<H>(n, [&](local_communicator& comm, outcome& o) {
            const bool all_blocks = m == movement::allgather || m == movement::all_to_all || comm.rank() == root;
            std::vector<std::byte> data((all_blocks ? n * b : b) - 1);
            record(o, false, [&] {
                const std::span<std::byte> d(data);
                switch (m) {
                case movement::allgather: gradsync::allgatherer<local_communicator>(comm, b)(d); break;
                case movement::gather: gradsync::gatherer<local_communicator>(comm, b, root)(d); break;
                case movement::scatter: gradsync::scatterer<local_communicator>(comm, b, root)(d); break;
                case movement::all_to_all: gradsync::exchanger<local_communicator>(comm, b)(d); break;
                }
            });
        });
        for (int r = 0; r < n; ++r) {
            const outcome& o = res[std::size_t(r)];
            INFO("rank " << r << ": " << kind_name(o.k) << ": " << o.what);
            const std::size_t planned = m == movement::allgather || m == movement::all_to_all || r == root ? n * b : b;
            const std::string what = std::string(who(m)).substr(std::string("gradsync::").size());
            CHECK(kind_name(o.k) == std::string(kind_name(kind::usage)));
            CHECK_THAT(o.what, Contains(std::string(who(m)) + " (rank " + std::to_string(r) + " of 5): buffer holds " +
                                        std::to_string(planned - 1) + " elements, the " + what +
                                        " was planned for " + std::to_string(planned)));
        }
    }
}

namespace {

// How the odd rank gets out of order: the last rank (or rank 0) calls the data-movement
// collective first where the others call the reducer first, or the last rank skips the
// reducer.
enum class disorder { last_swaps, first_swaps, last_skips };

const char* disorder_name(disorder d)
{
    return d == disorder::last_swaps ? "the last rank swaps" : d == disorder::first_swaps ? "rank 0 swaps"
                                                                                          : "the last rank skips";
}

// A Sum reducer of 1000 floats with ReducerAlgorithm and a Movement of 64-byte blocks, called
// out of order by one rank: every rank's outcome, and the two identities.
template <class ReducerAlgorithm, class Movement>
std::vector<outcome> out_of_order(int n, disorder d, std::uint64_t& reducer_id, std::uint64_t& movement_id)
{
    const int odd = d == disorder::first_swaps ? 0 : n - 1;
    return conformance::misuse_suite::run_recorded<H>(n, [&](local_communicator& comm, outcome& o) {
        gradsync::reducer<float, local_communicator, gradsync::sum, ReducerAlgorithm> reduce(comm, 1000);
        Movement move(comm, 64);
        if (comm.rank() == 0) { // every rank's identities are rank 0's
            reducer_id = reduce.identity();
            movement_id = move.identity();
        }
        std::vector<float> x(1000, 1.0f);
        std::vector<std::byte> y(move.count());
        record(o, false, [&] {
            if (comm.rank() != odd) {
                reduce(std::span<float>(x));
                move(std::span<std::byte>(y));
            } else {
                move(std::span<std::byte>(y));
                if (d != disorder::last_skips)
                    reduce(std::span<float>(x));
            }
        });
    });
}

// Every rank ended in a mismatch_error naming the reducer and the collective called `what`.
template <class ReducerAlgorithm, class Movement>
void check_named_everywhere(const std::vector<int>& sizes, const char* what)
{
    for (const int n : sizes)
        for (const disorder d : {disorder::last_swaps, disorder::first_swaps, disorder::last_skips}) {
            CAPTURE(n, disorder_name(d), what, ReducerAlgorithm::name);
            std::uint64_t reducer_id = 0, movement_id = 0;
            const auto res = out_of_order<ReducerAlgorithm, Movement>(n, d, reducer_id, movement_id);
            CHECK(reducer_id != movement_id);
            for (int r = 0; r < n; ++r) {
                const outcome& o = res[std::size_t(r)];
                INFO("rank " << r << ": " << kind_name(o.k) << ": " << o.what);
                CHECK(kind_name(o.k) == std::string(kind_name(kind::mismatch)));
                CHECK_THAT(o.what, Contains("reducer #" + std::to_string(reducer_id)) &&
                                       Contains(std::string(what) + " #" + std::to_string(movement_id)) &&
                                       Contains("same order"));
            }
        }
}

} // namespace

// The reducer through shared memory waits on every peer and sees the odd rank's position on
// the board; the odd rank's receive waits on a peer in the reducer and sees its position: so
// every rank names both, with no deadline, before any rank is released (docs/semantics.md,
// "Call order"). With two ranks, a reducer by messages does the same.
TEST_CASE("an allgatherer and a reducer called out of order: a mismatch_error naming both on every rank",
          "[movement][misuse][order]")
{
    using comm = local_communicator;
    check_named_everywhere<gradsync::shared_memory, gradsync::allgatherer<comm, gradsync::ring_allgather>>(
        {2, 3, 5}, "allgatherer");
    check_named_everywhere<gradsync::shared_memory, gradsync::allgatherer<comm, gradsync::bruck_allgather>>(
        {2, 3, 5}, "allgatherer");
    check_named_everywhere<gradsync::shared_memory, gradsync::allgatherer<comm>>({2, 3, 5}, "allgatherer");
    check_named_everywhere<gradsync::ring, gradsync::allgatherer<comm>>({2}, "allgatherer");
}

TEST_CASE("an exchanger and a reducer called out of order: a mismatch_error naming both on every rank",
          "[movement][misuse][order]")
{
    using comm = local_communicator;
    check_named_everywhere<gradsync::shared_memory, gradsync::exchanger<comm>>({2, 3, 5}, "exchanger");
    check_named_everywhere<gradsync::ring, gradsync::exchanger<comm>>({2}, "exchanger");
}

TEST_CASE("automatic_allgather takes Bruck's for less than bruck_bytes on three ranks or more, else the ring",
          "[movement]")
{
    const gradsync::automatic_allgather a;
    constexpr std::uint32_t bruck = gradsync::bruck_allgather::code, ring = gradsync::ring_allgather::code;
    const std::size_t limit = a.bruck_bytes;
    for (const int n : {3, 4, 7}) {
        const auto k = std::size_t(n);
        const std::size_t largest = (limit - 1) / k; // the largest block with n blocks below the limit
        CAPTURE(n, largest);
        CHECK(largest * k < limit);
        CHECK((largest + 1) * k >= limit);
        CHECK(a.choose(0, n) == bruck);
        CHECK(a.choose(largest, n) == bruck);
        CHECK(a.choose(largest + 1, n) == ring);
        CHECK(a.choose(~std::size_t(0), n) == ring); // the product would overflow
    }
    CHECK(a.choose(0, 1) == ring);
    CHECK(a.choose(1, 2) == ring);
    CHECK(gradsync::automatic_allgather{.bruck_bytes = 0}.choose(0, 8) == ring);

    local_group group(4);
    std::vector<std::uint32_t> chosen(4);
    CHECK(gradsync_test::run_ranks(group, [&](local_communicator& comm) {
              gradsync::allgatherer<local_communicator> small(comm, 64), large(comm, limit);
              chosen[std::size_t(comm.rank())] = small.plan().chosen() * 100 + large.plan().chosen();
          }) == "");
    for (const std::uint32_t c : chosen)
        CHECK(c == bruck * 100 + ring);
}

TEST_CASE("the allgather rows name their plans, which model allgather_plan", "[movement]")
{
    using comm = local_communicator;
    using gradsync::allgather_plan_of;
    STATIC_REQUIRE(
        std::is_same_v<allgather_plan_of<comm, gradsync::ring_allgather>, gradsync::ring_allgather_plan<comm>>);
    STATIC_REQUIRE(
        std::is_same_v<allgather_plan_of<comm, gradsync::bruck_allgather>, gradsync::bruck_allgather_plan<comm>>);
    STATIC_REQUIRE(std::is_same_v<allgather_plan_of<comm, gradsync::automatic_allgather>,
                                  gradsync::automatic_allgather_plan<comm>>);
    STATIC_REQUIRE(gradsync::allgather_plan<allgather_plan_of<comm, gradsync::ring_allgather>>);
    STATIC_REQUIRE(gradsync::allgather_plan<allgather_plan_of<comm, gradsync::bruck_allgather>>);
    STATIC_REQUIRE(gradsync::allgather_plan<allgather_plan_of<comm, gradsync::automatic_allgather>>);
    STATIC_REQUIRE(gradsync::allgather_algorithm<gradsync::automatic_allgather>);
    STATIC_REQUIRE(!gradsync::allgather_algorithm<gradsync::ring>); // an allreduce algorithm has no allgather row
    STATIC_REQUIRE(!gradsync::allgather_algorithm<gradsync::linear_gather>);
}
