// Misuse over local_group (docs/semantics.md, "The agreement check", "Call order" and
// "Errors"): ranks that disagree on count, layout, type, policy, algorithm or tag all get a
// gradsync::mismatch_error naming the field (the first differing layer for the sizes) and the
// ranks, before any user data is touched; bad layer sizes are a usage_error on every rank; a
// wrong-size buffer is a usage_error on its rank and releases the others; reducers called out
// of order, or a peer a call ahead, end in a mismatch_error naming both. A hang fails by the
// CTest timeout.
//
// Rank code records (kind, message, buffer untouched?) per rank; CHECKs run on the main thread.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <gradsync/gradsync.hpp>

#include "outcome.hpp"
#include "reference.hpp"

namespace {

using gradsync::local_communicator;
using gradsync::local_group;
using Catch::Matchers::Contains;

constexpr int ranks = 5;      // not a power of two: folding is in play
constexpr int odd_rank = 3;   // the rank that disagrees
constexpr std::size_t count = 1000;

using gradsync_test::kind;
using gradsync_test::kind_name;
using gradsync_test::outcome;
using gradsync_test::record;

template <class T>
bool unchanged(const std::vector<T>& now, const std::vector<T>& before)
{
    return now.size() == before.size() && ref::same_bits(now.data(), before.data(), now.size() * sizeof(T));
}

struct result {
    std::vector<outcome> rank;
};

// body(comm, outcome&) runs on every rank of a fresh group of `ranks`; a gradsync::error that
// a rank rethrows (to release the others) does not escape.
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

// The common expectation: every rank gets a mismatch_error that names `field` (one of the
// given words) and, on the ranks that agree, the odd rank; no buffer was touched; fast.
void expect_mismatch_everywhere(const result& res, const std::vector<std::string>& field_words)
{
    for (std::size_t r = 0; r < res.rank.size(); ++r) {
        const outcome& o = res.rank[r];
        INFO("rank " << r << ": " << kind_name(o.k) << ": " << o.what);
        CHECK(kind_name(o.k) == std::string(kind_name(kind::mismatch)));
        CHECK(o.untouched);
        bool named = false;
        for (const std::string& w : field_words)
            named = named || Contains(w, Catch::CaseSensitive::No).match(o.what);
        CHECK(named);
        if (int(r) != odd_rank) // its own "rank 3" prefix would make this trivial on rank 3
            CHECK_THAT(o.what, Contains("rank " + std::to_string(odd_rank)));
    }
}

// One-shot allreduce of float data where rank odd_rank may use other arguments.
template <class Policy, class Algo>
void oneshot(local_communicator& comm, outcome& o, std::size_t n, const std::vector<std::size_t>& layers)
{
    std::vector<float> data = ref::int_data<float>(1, comm.rank(), n);
    const std::vector<float> before = data;
    record(o, false, [&] {
        gradsync::allreduce(comm, std::span<float>(data), Policy{}, Algo{}, std::span<const std::size_t>(layers));
    });
    o.untouched = unchanged(data, before);
}

} // namespace

TEST_CASE("ranks that disagree on the count", "[misuse]")
{
    const result res = run_group(ranks, [](local_communicator& comm, outcome& o) {
        const std::size_t n = comm.rank() == odd_rank ? count + 1 : count;
        oneshot<gradsync::sum, gradsync::recursive_halving>(comm, o, n, {});
    });
    expect_mismatch_everywhere(res, {"count"});
    for (const outcome& o : res.rank)
        CHECK_THAT(o.what, Contains("1001")); // the odd value is shown
}

TEST_CASE("ranks that disagree on the layer sizes (same count, same number of layers)", "[misuse]")
{
    const result res = run_group(ranks, [](local_communicator& comm, outcome& o) {
        const std::vector<std::size_t> layers =
            comm.rank() == odd_rank ? std::vector<std::size_t>{400, 600} : std::vector<std::size_t>{600, 400};
        oneshot<gradsync::sum, gradsync::ring>(comm, o, count, layers);
    });
    expect_mismatch_everywhere(res, {"layer"});
    for (const outcome& o : res.rank) {
        CHECK_THAT(o.what, Contains("ranks disagree on the layer sizes: layer 0 has 600 elements on rank 0 and 400 "
                                    "on rank 3"));
        CHECK_THAT(o.what, !Contains("fingerprint"));
    }
}

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
            std::vector<float> x(64, 1.0f), y(64, 10.0f);
            record(o, true, [&] {
                if (comm.rank() == n - 1) {
                    b(std::span<float>(y));
                    a(std::span<float>(x));
                } else {
                    a(std::span<float>(x));
                    b(std::span<float>(y));
                }
            });
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

TEST_CASE("ranks that disagree on the number of layers", "[misuse]")
{
    const result res = run_group(ranks, [](local_communicator& comm, outcome& o) {
        const std::vector<std::size_t> layers =
            comm.rank() == odd_rank ? std::vector<std::size_t>{500, 500} : std::vector<std::size_t>{count};
        oneshot<gradsync::average, gradsync::recursive_doubling>(comm, o, count, layers);
    });
    expect_mismatch_everywhere(res, {"layer"});
}

TEST_CASE("ranks that disagree on the element type", "[misuse]")
{
    const result res = run_group(ranks, [](local_communicator& comm, outcome& o) {
        if (comm.rank() == odd_rank) {
            std::vector<double> data = ref::int_data<double>(1, comm.rank(), count);
            const std::vector<double> before = data;
            record(o, false, [&] {
                gradsync::reducer<double, local_communicator, gradsync::sum, gradsync::ring> r(comm, count);
                r(std::span<double>(data));
            });
            o.untouched = unchanged(data, before);
        } else {
            std::vector<float> data = ref::int_data<float>(1, comm.rank(), count);
            const std::vector<float> before = data;
            record(o, false, [&] {
                gradsync::reducer<float, local_communicator, gradsync::sum, gradsync::ring> r(comm, count);
                r(std::span<float>(data));
            });
            o.untouched = unchanged(data, before);
        }
    });
    expect_mismatch_everywhere(res, {"type"});
}

TEST_CASE("ranks that disagree on the policy", "[misuse]")
{
    const result res = run_group(ranks, [](local_communicator& comm, outcome& o) {
        if (comm.rank() == odd_rank)
            oneshot<gradsync::average, gradsync::ring>(comm, o, count, {});
        else
            oneshot<gradsync::sum, gradsync::ring>(comm, o, count, {});
    });
    expect_mismatch_everywhere(res, {"policy"});
}

TEST_CASE("ranks that disagree on the algorithm", "[misuse]")
{
    const result res = run_group(ranks, [](local_communicator& comm, outcome& o) {
        if (comm.rank() == odd_rank)
            oneshot<gradsync::sum, gradsync::ring>(comm, o, count, {});
        else
            oneshot<gradsync::sum, gradsync::recursive_halving>(comm, o, count, {});
    });
    expect_mismatch_everywhere(res, {"algorithm"});
}

TEST_CASE("ranks that disagree on the message tag", "[misuse]")
{
    const result res = run_group(ranks, [](local_communicator& comm, outcome& o) {
        gradsync::reducer_options options;
        options.tag = comm.rank() == odd_rank ? 77 : 78;
        std::vector<float> data = ref::int_data<float>(1, comm.rank(), count);
        const std::vector<float> before = data;
        record(o, false, [&] {
            gradsync::reducer<float, local_communicator, gradsync::sum, gradsync::recursive_halving> r(
                comm, count, gradsync::recursive_halving{}, options);
            r(std::span<float>(data));
        });
        o.untouched = unchanged(data, before);
    });
    expect_mismatch_everywhere(res, {"tag"});
}

TEST_CASE("ranks whose automatic rules differ (different thresholds) disagree on the algorithm", "[misuse]")
{
    // automatic{} picks recursive doubling for one float; automatic{.small_bytes = 0} picks
    // recursive halving on 2 ranks. If the rule's parameters are not part of the agreement
    // check, the two plans exchange messages that happen to fit, and the ranks end with
    // different results (rank 0 adds rank 1's already reduced value to its own) and no error.
    const result res = run_group(2, [](local_communicator& comm, outcome& o) {
        gradsync::automatic rule;
        if (comm.rank() == 1)
            rule.small_bytes = 0;
        std::vector<float> data{float(comm.rank() + 1)};
        const std::vector<float> before = data;
        record(o, false, [&] {
            gradsync::allreduce(comm, std::span<float>(data), gradsync::sum{}, rule, std::span<const std::size_t>());
        });
        o.untouched = unchanged(data, before);
        if (o.k == kind::ok)
            o.what = "no error; result " + std::to_string(data[0]);
    });
    for (std::size_t r = 0; r < 2; ++r) {
        const outcome& o = res.rank[r];
        INFO("rank " << r << ": " << kind_name(o.k) << ": " << o.what);
        CHECK(kind_name(o.k) == std::string(kind_name(kind::mismatch)));
        CHECK(o.untouched);
    }
}

TEST_CASE("layer sizes that do not add up to the buffer: usage_error on every rank", "[misuse]")
{
    for (bool everyone : {false, true}) {
        CAPTURE(everyone);
        const result res = run_group(ranks, [&](local_communicator& comm, outcome& o) {
            const bool bad = everyone || comm.rank() == odd_rank;
            const std::vector<std::size_t> layers =
                bad ? std::vector<std::size_t>{600, 399} : std::vector<std::size_t>{600, 400};
            oneshot<gradsync::sum, gradsync::ring>(comm, o, count, layers);
        });
        const int named = everyone ? 0 : odd_rank; // the first bad rank
        for (std::size_t r = 0; r < res.rank.size(); ++r) {
            const outcome& o = res.rank[r];
            INFO("rank " << r << ": " << kind_name(o.k) << ": " << o.what);
            CHECK(kind_name(o.k) == std::string(kind_name(kind::usage)));
            CHECK(o.untouched);
            if (int(r) != named)
                CHECK_THAT(o.what, Contains("rank " + std::to_string(named)));
        }
    }
}

TEST_CASE("invalid pipeline options on one rank: usage_error on every rank", "[misuse]")
{
    for (bool zero_window : {true, false}) {
        CAPTURE(zero_window);
        const result res = run_group(ranks, [&](local_communicator& comm, outcome& o) {
            gradsync::reducer_options options;
            if (comm.rank() == odd_rank) {
                if (zero_window)
                    options.pipeline.window = 0;
                else
                    options.pipeline.segment_bytes = 0;
            }
            std::vector<float> data = ref::int_data<float>(1, comm.rank(), count);
            const std::vector<float> before = data;
            record(o, false, [&] {
                gradsync::reducer<float, local_communicator, gradsync::sum, gradsync::ring> r(comm, count,
                                                                                             gradsync::ring{}, options);
                r(std::span<float>(data));
            });
            o.untouched = unchanged(data, before);
        });
        for (std::size_t r = 0; r < res.rank.size(); ++r) {
            const outcome& o = res.rank[r];
            INFO("rank " << r << ": " << kind_name(o.k) << ": " << o.what);
            CHECK(kind_name(o.k) == std::string(kind_name(kind::usage)));
            CHECK(o.untouched);
            if (int(r) != odd_rank)
                CHECK_THAT(o.what, Contains("rank " + std::to_string(odd_rank)));
        }
    }
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
