// The misuse conformance suite (docs/semantics.md, "The agreement check" and "Errors"), once
// for every transport: a driver declares `conformance::harness` (harness.hpp) and includes
// this file, which registers the TEST_CASEs. Ranks that disagree on count, layout, type
// (int8 and uint8 among them), policy (minimum and maximum among them), algorithm
// (automatic's rule and shared memory included) or tag all get a
// gradsync::mismatch_error naming the field (the first differing layer for the sizes) and, on
// the ranks that agree, the rank that does not, before any user data is touched; bad layer sizes or pipeline options on
// one rank are a usage_error on every rank. Every rank ends in the same kind of error. N = 5
// over local_group (not a power of two: folding is in play), rank 3 the one that disagrees; a
// launched job: its N, rank min(3, N - 1) (one rank has no one to disagree with). Two reducers
// through shared memory (shared_memory, automatic) called out of order by one rank (swapped,
// mirrored, a call skipped) end in a mismatch_error naming both on every rank, with no
// deadline. A hang fails by the CTest timeout.
//
// Rank code records (kind, message, buffer untouched?) per rank; CHECKs run after H::run.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <gradsync/gradsync.hpp>

#include "../outcome.hpp"
#include "../reference.hpp"
#include "harness.hpp"
#include "misuse_outcomes.hpp"

namespace conformance::misuse_suite {

constexpr std::size_t count = 1000;

// A reducer of T called once on integer data; whether the buffer is intact is recorded.
template <class T, class Comm, class Policy, class Algo, class... Args>
void reduce_once(Comm& comm, outcome& o, std::size_t n, Args&&... plan_args)
{
    std::vector<T> data = ref::int_data<T>(1, comm.rank(), n);
    const std::vector<T> before = data;
    record(o, false, [&] {
        gradsync::reducer<T, Comm, Policy, Algo> r(comm, n, std::forward<Args>(plan_args)...);
        r(std::span<T>(data));
    });
    o.untouched = unchanged(data, before);
}

// One-shot allreduce of float data where the odd rank may use other arguments.
template <class Policy, class Algo, class Comm>
void oneshot(Comm& comm, outcome& o, std::size_t n, const std::vector<std::size_t>& layers, const Algo& algo = {})
{
    std::vector<float> data = ref::int_data<float>(1, comm.rank(), n);
    const std::vector<float> before = data;
    record(o, false, [&] {
        gradsync::allreduce(comm, std::span<float>(data), Policy{}, algo, std::span<const std::size_t>(layers));
    });
    o.untouched = unchanged(data, before);
}

} // namespace conformance::misuse_suite

TEST_CASE("ranks that disagree on the count", "[misuse]")
{
    using namespace conformance::misuse_suite;
    using H = conformance::harness;
    for_each_size<H>({5}, [](int n, int odd) {
        const auto res = run_recorded<H>(n, [&](H::comm_type& comm, outcome& o) {
            oneshot<gradsync::sum, gradsync::recursive_halving>(comm, o, comm.rank() == odd ? count + 1 : count, {});
        });
        expect_mismatch_everywhere<H>(res, odd, {"count"});
        for (int r : H::checked_ranks(n))
            CHECK_THAT(res[std::size_t(r)].what, Contains("1001")); // the odd value is shown
    });
}

TEST_CASE("ranks that disagree on the layer sizes (same count, same number of layers)", "[misuse]")
{
    using namespace conformance::misuse_suite;
    using H = conformance::harness;
    for_each_size<H>({5}, [](int n, int odd) {
        const auto res = run_recorded<H>(n, [&](H::comm_type& comm, outcome& o) {
            const std::vector<std::size_t> layers =
                comm.rank() == odd ? std::vector<std::size_t>{400, 600} : std::vector<std::size_t>{600, 400};
            oneshot<gradsync::sum, gradsync::ring>(comm, o, count, layers);
        });
        expect_mismatch_everywhere<H>(res, odd, {"layer"});
        for (int r : H::checked_ranks(n)) {
            const std::string& what = res[std::size_t(r)].what;
            CHECK_THAT(what, Contains("ranks disagree on the layer sizes: layer 0 has 600 elements on rank 0 and 400 "
                                      "on rank " + std::to_string(odd)));
            CHECK_THAT(what, !Contains("fingerprint"));
        }
    });
}

TEST_CASE("ranks that disagree on the number of layers", "[misuse]")
{
    using namespace conformance::misuse_suite;
    using H = conformance::harness;
    for_each_size<H>({5}, [](int n, int odd) {
        const auto res = run_recorded<H>(n, [&](H::comm_type& comm, outcome& o) {
            const std::vector<std::size_t> layers =
                comm.rank() == odd ? std::vector<std::size_t>{500, 500} : std::vector<std::size_t>{count};
            oneshot<gradsync::average, gradsync::recursive_doubling>(comm, o, count, layers);
        });
        expect_mismatch_everywhere<H>(res, odd, {"layer"});
    });
}

TEST_CASE("ranks that disagree on the element type", "[misuse]")
{
    using namespace conformance::misuse_suite;
    using H = conformance::harness;
    for_each_size<H>({5}, [](int n, int odd) {
        const auto res = run_recorded<H>(n, [&](H::comm_type& comm, outcome& o) {
            if (comm.rank() == odd)
                reduce_once<double, H::comm_type, gradsync::sum, gradsync::ring>(comm, o, count);
            else
                reduce_once<float, H::comm_type, gradsync::sum, gradsync::ring>(comm, o, count);
        });
        expect_mismatch_everywhere<H>(res, odd, {"type"});
    });
}

TEST_CASE("ranks that disagree on the policy", "[misuse]")
{
    using namespace conformance::misuse_suite;
    using H = conformance::harness;
    for_each_size<H>({5}, [](int n, int odd) {
        const auto res = run_recorded<H>(n, [&](H::comm_type& comm, outcome& o) {
            if (comm.rank() == odd)
                oneshot<gradsync::average, gradsync::ring>(comm, o, count, {});
            else
                oneshot<gradsync::sum, gradsync::ring>(comm, o, count, {});
        });
        expect_mismatch_everywhere<H>(res, odd, {"policy"});
    });
}

TEST_CASE("ranks that disagree on the policy: minimum and maximum of int32", "[misuse]")
{
    using namespace conformance::misuse_suite;
    using H = conformance::harness;
    for_each_size<H>({5}, [](int n, int odd) {
        const auto res = run_recorded<H>(n, [&](H::comm_type& comm, outcome& o) {
            if (comm.rank() == odd)
                reduce_once<std::int32_t, H::comm_type, gradsync::maximum, gradsync::ring>(comm, o, count);
            else
                reduce_once<std::int32_t, H::comm_type, gradsync::minimum, gradsync::ring>(comm, o, count);
        });
        expect_mismatch_everywhere<H>(res, odd, {"policy"});
        for (int r : H::checked_ranks(n))
            CHECK_THAT(res[std::size_t(r)].what, Contains("rank 0 has minimum, rank " + std::to_string(odd) +
                                                          " has maximum"));
    });
}

TEST_CASE("ranks that disagree on the element type: int8 and uint8", "[misuse]")
{
    // One byte each, so a plan of either moves the same messages: without the check the
    // ranks would add each other's bytes as numbers of the other type.
    using namespace conformance::misuse_suite;
    using H = conformance::harness;
    for_each_size<H>({5}, [](int n, int odd) {
        const auto res = run_recorded<H>(n, [&](H::comm_type& comm, outcome& o) {
            if (comm.rank() == odd)
                reduce_once<std::uint8_t, H::comm_type, gradsync::sum, gradsync::recursive_doubling>(comm, o, count);
            else
                reduce_once<std::int8_t, H::comm_type, gradsync::sum, gradsync::recursive_doubling>(comm, o, count);
        });
        expect_mismatch_everywhere<H>(res, odd, {"element type"});
        for (int r : H::checked_ranks(n))
            CHECK_THAT(res[std::size_t(r)].what, Contains("rank 0 has int8, rank " + std::to_string(odd) +
                                                          " has uint8"));
    });
}

TEST_CASE("ranks that disagree on the algorithm", "[misuse]")
{
    using namespace conformance::misuse_suite;
    using H = conformance::harness;
    for_each_size<H>({5}, [](int n, int odd) {
        const auto res = run_recorded<H>(n, [&](H::comm_type& comm, outcome& o) {
            if (comm.rank() == odd)
                oneshot<gradsync::sum, gradsync::ring>(comm, o, count, {});
            else
                oneshot<gradsync::sum, gradsync::recursive_halving>(comm, o, count, {});
        });
        expect_mismatch_everywhere<H>(res, odd, {"algorithm"});
    });
}

TEST_CASE("ranks that disagree on the message tag", "[misuse]")
{
    using namespace conformance::misuse_suite;
    using H = conformance::harness;
    for_each_size<H>({5}, [](int n, int odd) {
        const auto res = run_recorded<H>(n, [&](H::comm_type& comm, outcome& o) {
            gradsync::reducer_options options;
            options.tag = comm.rank() == odd ? 77 : 78;
            reduce_once<float, H::comm_type, gradsync::sum, gradsync::recursive_halving>(
                comm, o, count, gradsync::recursive_halving{}, options);
        });
        expect_mismatch_everywhere<H>(res, odd, {"tag"});
    });
}

TEST_CASE("ranks whose automatic rules differ (different thresholds) disagree on the algorithm", "[misuse]")
{
    // automatic{} picks recursive doubling for one float; automatic{.small_bytes = 0} picks
    // recursive halving on 2 ranks. If the rule's parameters are not part of the agreement
    // check, the two plans exchange messages that happen to fit, and the ranks end with
    // different results (rank 0 adds rank 1's already reduced value to its own) and no error.
    using namespace conformance::misuse_suite;
    using H = conformance::harness;
    for_each_size<H>({2}, [](int n, int) {
        const auto res = run_recorded<H>(n, [&](H::comm_type& comm, outcome& o) {
            gradsync::automatic rule;
            if (comm.rank() == n - 1)
                rule.small_bytes = 0;
            oneshot<gradsync::sum>(comm, o, 1, {}, rule);
        });
        expect_everywhere<H>(res, kind::mismatch, n - 1);
    });
}

TEST_CASE("ranks that disagree on shared memory: mismatch_error before any region is made", "[misuse][shared]")
{
    // One rank names shared_memory where the others name ring, or leaves shared memory out of
    // automatic's rule where the others let it in: without the check, that rank would wait for
    // a region the others never make (or make one nobody else joins).
    using namespace conformance::misuse_suite;
    using H = conformance::harness;
    for_each_size<H>({5}, [](int n, int odd) {
        const auto res = run_recorded<H>(n, [&](H::comm_type& comm, outcome& o) {
            if (comm.rank() == odd)
                oneshot<gradsync::sum, gradsync::shared_memory>(comm, o, count, {});
            else
                oneshot<gradsync::sum, gradsync::ring>(comm, o, count, {});
        });
        expect_mismatch_everywhere<H>(res, odd, {"algorithm"});
    });
    for_each_size<H>({5}, [](int n, int odd) {
        const auto res = run_recorded<H>(n, [&](H::comm_type& comm, outcome& o) {
            const std::vector<std::size_t> layers{600, 400};
            oneshot<gradsync::adasum>(comm, o, count, layers,
                                      gradsync::automatic{.share_memory = comm.rank() != odd});
        });
        expect_everywhere<H>(res, kind::mismatch, odd);
    });
}

TEST_CASE("a reducer on a shared_buffer: ranks that leave it out, data outside it", "[misuse][shared]")
{
    // One rank builds its reducer without the buffer the others name: mismatch_error on every
    // rank, naming the buffer. Data that does not lie in the buffer the reducer was built on
    // (a copy elsewhere) is a usage_error on every rank, before any flag is raised.
    using namespace conformance::misuse_suite;
    using H = conformance::harness;
    for_each_size<H>({5}, [](int n, int odd) {
        const auto res = run_recorded<H>(n, [&](H::comm_type& comm, outcome& o) {
            gradsync::shared_buffer buffer(comm, count * sizeof(float));
            const gradsync::reducer_options options{.shared = comm.rank() == odd ? nullptr : &buffer};
            reduce_once<float, H::comm_type, gradsync::sum, gradsync::automatic>(comm, o, count, gradsync::automatic{},
                                                                               options);
        });
        expect_mismatch_everywhere<H>(res, odd, {"shared buffer"});
    });
    for_each_size<H>({5}, [](int n, int) {
        const auto res = run_recorded<H>(n, [&](H::comm_type& comm, outcome& o) {
            gradsync::shared_buffer buffer(comm, count * sizeof(float));
            reduce_once<float, H::comm_type, gradsync::sum, gradsync::shared_memory>(
                comm, o, count, gradsync::shared_memory{}, gradsync::reducer_options{.shared = &buffer});
        });
        for (int r : H::checked_ranks(n)) {
            const outcome& o = res[std::size_t(r)];
            INFO("rank " << r << ": " << kind_name(o.k) << ": " << o.what);
            CHECK(kind_name(o.k) == std::string(kind_name(kind::usage)));
            CHECK_THAT(o.what, Contains("does not lie in this rank's slot of the shared_buffer"));
            CHECK(o.untouched);
        }
    });
}

TEST_CASE("layer sizes that do not add up to the buffer: usage_error on every rank", "[misuse]")
{
    using namespace conformance::misuse_suite;
    using H = conformance::harness;
    for_each_size<H>({5}, [](int n, int odd) {
        for (bool everyone : {false, true}) {
            CAPTURE(everyone);
            const auto res = run_recorded<H>(n, [&](H::comm_type& comm, outcome& o) {
                const bool bad = everyone || comm.rank() == odd;
                const std::vector<std::size_t> layers =
                    bad ? std::vector<std::size_t>{600, 399} : std::vector<std::size_t>{600, 400};
                oneshot<gradsync::sum, gradsync::ring>(comm, o, count, layers);
            });
            expect_everywhere<H>(res, kind::usage, everyone ? 0 : odd); // names the first bad rank
            for (int r : H::checked_ranks(n))
                CHECK_THAT(res[std::size_t(r)].what, Contains("layer", Catch::CaseSensitive::No));
        }
    });
}

TEST_CASE("invalid pipeline options on one rank: usage_error on every rank", "[misuse]")
{
    using namespace conformance::misuse_suite;
    using H = conformance::harness;
    for_each_size<H>({5}, [](int n, int odd) {
        for (bool zero_window : {true, false}) {
            CAPTURE(zero_window);
            const auto res = run_recorded<H>(n, [&](H::comm_type& comm, outcome& o) {
                gradsync::reducer_options options;
                if (comm.rank() == odd) {
                    if (zero_window)
                        options.pipeline.window = 0;
                    else
                        options.pipeline.segment_bytes = 0;
                }
                reduce_once<float, H::comm_type, gradsync::sum, gradsync::ring>(comm, o, count, gradsync::ring{},
                                                                               options);
            });
            expect_everywhere<H>(res, kind::usage, odd);
        }
    });
}

namespace conformance::misuse_suite {

// How the odd rank gets out of order: it calls b then a where the others call a then b
// (swapped: the last rank; mirrored: rank 0), or calls b alone (skipped a).
enum class disorder { swapped, mirrored, skipped };

inline const char* disorder_name(disorder d)
{
    return d == disorder::swapped ? "the last rank calls b, a" : d == disorder::mirrored ? "rank 0 calls b, a"
                                                                                        : "the last rank skips a";
}

// Two Sum reducers of `count` floats with Algorithm, called out of order by one rank; each
// rank's outcome and the reducers' identities (the same on every rank).
template <class H, class Algorithm>
std::vector<outcome> called_out_of_order(int n, disorder d, std::uint64_t& a_id, std::uint64_t& b_id)
{
    const int odd = d == disorder::mirrored ? 0 : n - 1;
    return run_recorded<H>(n, [&](typename H::comm_type& comm, outcome& o) {
        using reducer = gradsync::reducer<float, typename H::comm_type, gradsync::sum, Algorithm>;
        reducer a(comm, count), b(comm, count);
        if (comm.rank() == H::checked_rank()) { // every rank's are rank 0's
            a_id = a.identity();
            b_id = b.identity();
        }
        std::vector<float> x = ref::int_data<float>(1, comm.rank(), count), y = x;
        record(o, false, [&] {
            if (comm.rank() != odd) {
                a(std::span<float>(x));
                b(std::span<float>(y));
            } else {
                b(std::span<float>(y));
                if (d != disorder::skipped)
                    a(std::span<float>(x));
            }
        });
    });
}

} // namespace conformance::misuse_suite

TEST_CASE("calls out of order through shared memory: a mismatch_error naming both reducers on every rank, with no "
          "deadline",
          "[misuse][order]")
{
    // The default path on one host sends no message, so no stamp can name a mix-up; the
    // position board does (docs/semantics.md, "Call order"). Every rank waits on every peer, so
    // every rank names it, the one that made the other call too. No deadline is set: a rank
    // that waited for ever would fail by the test's timeout. No message is sent, so the
    // communicator stays in step for the cases after this one.
    using namespace conformance::misuse_suite;
    using H = conformance::harness;
    for_each_size<H>({2, 3, 5}, [](int n, int) {
        for (disorder d : {disorder::swapped, disorder::mirrored, disorder::skipped}) {
            for (bool automatic : {true, false}) {
                CAPTURE(n, disorder_name(d), automatic);
                std::uint64_t a = 0, b = 0;
                const auto res = automatic ? called_out_of_order<H, gradsync::automatic>(n, d, a, b)
                                           : called_out_of_order<H, gradsync::shared_memory>(n, d, a, b);
                for (int r : H::checked_ranks(n)) {
                    const outcome& o = res[std::size_t(r)];
                    INFO("rank " << r << ": " << kind_name(o.k) << ": " << o.what);
                    CHECK(kind_name(o.k) == std::string(kind_name(kind::mismatch)));
                    CHECK_THAT(o.what, Contains("reducer #" + std::to_string(a)) &&
                                           Contains("reducer #" + std::to_string(b)) && Contains("same order"));
                }
            }
        }
    });
}
