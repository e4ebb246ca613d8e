// Misuse over local_group (docs/semantics.md, "The agreement check", "Call order" and
// "Errors"): the conformance suite (tests/conformance/misuse.hpp: ranks that disagree on count,
// layout, type, policy, algorithm or tag, bad layer sizes or pipeline options, calls out of
// order through shared memory) on 5 ranks, and what only threads of one process show:
// reducers called out of order by messages, or through shared memory and messages mixed up,
// or a peer a call ahead, end in a mismatch_error naming both without a deadline; a
// wrong-size buffer is a usage_error on its rank and releases the others; a group of no
// ranks is refused. A hang fails by the CTest timeout.
//
// Rank code records (kind, message, buffer untouched?) per rank; CHECKs run on the main thread.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <gradsync/gradsync.hpp>

#include "conformance/local_harness.hpp"
#include "outcome.hpp"
#include "reference.hpp"

#include "conformance/misuse.hpp"

namespace {

using gradsync::local_communicator;
using gradsync::local_group;
using Catch::Matchers::Contains;

constexpr int ranks = 5;      // not a power of two: folding is in play
constexpr int odd_rank = 3;   // the rank that disagrees
constexpr std::size_t count = 1000;

using conformance::misuse_suite::unchanged;
using gradsync_test::kind;
using gradsync_test::kind_name;
using gradsync_test::outcome;
using gradsync_test::record;

struct result {
    std::vector<outcome> rank;
};

// body(comm, outcome&) runs on every rank of a fresh group of n; a gradsync::error that a
// rank rethrows (to release the others) does not escape.
template <class Body>
result run_group(int n, Body body)
{
    result res{std::vector<outcome>(std::size_t(n))};
    local_group group(n);
    try {
        group.run([&](local_communicator& comm) { body(comm, res.rank[std::size_t(comm.rank())]); });
    } catch (const gradsync::error&) { // a rank's rethrown error released the others; each recorded its own
    }
    return res;
}

// On every rank but the last a(x) then b(y), on the last b(y) then a(x): what it ended in.
template <class A, class B>
void swapped_by_the_last(local_communicator& comm, A& a, B& b, outcome& o, bool rethrow)
{
    std::vector<float> x(a.count(), 1.0f), y(b.count(), 10.0f);
    record(o, rethrow, [&] {
        if (comm.rank() == comm.size() - 1) {
            b(std::span<float>(y));
            a(std::span<float>(x));
        } else {
            a(std::span<float>(x));
            b(std::span<float>(y));
        }
    });
}

} // namespace

// Two reducers called in different orders: over local_group the receive that waits for the
// other reducer's message sees it queued from its peer and says so, without a deadline; the
// group is then released, so no rank returns (wrong) data.
TEST_CASE("reducers called in different orders: a mismatch_error naming both, never wrong data", "[misuse][order]")
{
    for (int n : {2, 3, 4}) {
        INFO(n << " ranks");
        std::vector<std::uint64_t> identity(static_cast<std::size_t>(n) * 2);
        const result res = run_group(n, [&](local_communicator& comm, outcome& o) {
            gradsync::reducer<float, local_communicator, gradsync::sum, gradsync::ring> a(comm, 64), b(comm, 64);
            identity[std::size_t(comm.rank()) * 2] = a.identity();
            identity[std::size_t(comm.rank()) * 2 + 1] = b.identity();
            swapped_by_the_last(comm, a, b, o, true);
        });
        for (int r = 1; r < n; ++r) { // every rank's a (b) is rank 0's
            CHECK(identity[std::size_t(r) * 2] == identity[0]);
            CHECK(identity[std::size_t(r) * 2 + 1] == identity[1]);
        }
        CHECK(identity[0] != identity[1]);
        std::size_t named = 0;
        for (std::size_t r = 0; r < res.rank.size(); ++r) {
            const outcome& o = res.rank[r];
            INFO("rank " << r << ": " << kind_name(o.k) << ": " << o.what);
            CHECK(o.k != kind::ok);
            if (o.k == kind::mismatch) {
                ++named;
                CHECK_THAT(o.what, Contains("same order") && Contains("reducer #" + std::to_string(identity[0])) &&
                                       Contains("reducer #" + std::to_string(identity[1])));
            } else {
                CHECK(kind_name(o.k) == std::string(kind_name(kind::aborted)));
            }
        }
        CHECK(named >= 1);
    }
}

// A reducer through shared memory (automatic) and one by messages (ring) mixed up: the ranks in
// the shared one see the odd rank's position on the board, and the odd rank's receive sees its
// peer's, so every rank names both, with no deadline and before any rank is released.
TEST_CASE("shared memory and messages mixed up: a mismatch_error naming both on every rank", "[misuse][order]")
{
    for (int n : {2, 3, 4}) {
        INFO(n << " ranks");
        std::uint64_t a_id = 0, b_id = 0;
        const result res = run_group(n, [&](local_communicator& comm, outcome& o) {
            gradsync::reducer<float, local_communicator, gradsync::sum> a(comm, 1000);
            gradsync::reducer<float, local_communicator, gradsync::sum, gradsync::ring> b(comm, 1000);
            if (comm.rank() == 0) {
                a_id = a.identity();
                b_id = b.identity();
            }
            swapped_by_the_last(comm, a, b, o, false);
        });
        for (std::size_t r = 0; r < res.rank.size(); ++r) {
            const outcome& o = res.rank[r];
            INFO("rank " << r << ": " << kind_name(o.k) << ": " << o.what);
            CHECK(kind_name(o.k) == std::string(kind_name(kind::mismatch)));
            CHECK_THAT(o.what, Contains("reducer #" + std::to_string(a_id)) &&
                                   Contains("reducer #" + std::to_string(b_id)) && Contains("same order"));
        }
    }
}

// A message stamped for the reducer's next call, queued before this call's: the rank that
// waits names the call it belongs to.
TEST_CASE("a peer one call ahead: a mismatch_error naming both calls", "[misuse][order]")
{
    const result res = run_group(2, [&](local_communicator& comm, outcome& o) {
        gradsync::reducer<float, local_communicator, gradsync::sum, gradsync::ring> a(comm, 64);
        std::vector<float> x(64, 1.0f);
        if (comm.rank() == 1) {
            const int bits = gradsync::tags::stamp_bits(comm.tag_limit());
            const int next = gradsync::tags::stamped(gradsync::tags::reducer, a.identity(), 2, bits);
            auto s = comm.isend(std::as_bytes(std::span<const float>(x)), 0, next);
            record(o, true, [&] { comm.wait(s); });
            return;
        }
        record(o, true, [&] { a(std::span<float>(x)); });
    });
    INFO(res.rank[0].what);
    CHECK(kind_name(res.rank[0].k) == std::string(kind_name(kind::mismatch)));
    CHECK_THAT(res.rank[0].what, Contains("call 1: ") && Contains("belongs to this reducer's call 2") &&
                                     Contains("rank 1 is one call ahead of this rank"));
    CHECK(kind_name(res.rank[1].k) == std::string(kind_name(kind::aborted)));
}

TEST_CASE("a wrong-size buffer: usage_error on its rank, the others are released", "[misuse]")
{
    for (int thrower : {odd_rank, 0}) {
        CAPTURE(thrower);
        std::vector<outcome> rank(ranks);
        local_group group(ranks);
        bool rethrown_usage = false;
        std::string rethrown;
        try {
            group.run([&](local_communicator& comm) {
                outcome& o = rank[std::size_t(comm.rank())];
                std::vector<float> data =
                    ref::int_data<float>(1, comm.rank(), comm.rank() == thrower ? count - 1 : count);
                const std::vector<float> before = data;
                // Released ranks' buffers may be half reduced; only the thrower's must be intact.
                // A rank may be released while still planning (the thrower can finish the
                // agreement exchange and fail before the others do), so planning is inside too.
                try {
                    record(o, true, [&] {
                        gradsync::reducer<float, local_communicator, gradsync::sum, gradsync::ring> reduce(comm, count);
                        reduce(std::span<float>(data));
                    });
                } catch (...) {
                    o.untouched = unchanged(data, before);
                    throw;
                }
                o.untouched = unchanged(data, before);
            });
        } catch (const gradsync::usage_error& e) {
            rethrown_usage = true;
            rethrown = e.what();
        } catch (const std::exception& e) {
            rethrown = e.what();
        }
        INFO("run() threw: " << rethrown);
        CHECK(rethrown_usage);
        for (std::size_t r = 0; r < rank.size(); ++r) {
            const outcome& o = rank[r];
            INFO("rank " << r << ": " << kind_name(o.k) << ": " << o.what);
            if (int(r) == thrower) {
                CHECK(kind_name(o.k) == std::string(kind_name(kind::usage)));
                CHECK(o.untouched);
                CHECK_THAT(o.what, Contains(std::to_string(count - 1)));
            } else {
                CHECK(kind_name(o.k) == std::string(kind_name(kind::aborted)));
            }
        }
    }
}

TEST_CASE("local_group of no ranks is a usage_error", "[misuse]")
{
    CHECK_THROWS_AS(local_group(0), gradsync::usage_error);
}
