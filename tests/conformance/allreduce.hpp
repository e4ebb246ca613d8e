// The allreduce conformance suite on host memory, once for every transport: a driver
// declares `conformance::harness` (harness.hpp) and includes this file, which registers the
// TEST_CASEs. For each N the harness runs (local_group: {1..16, 24, 32}, {1..8, 12, 16} under
// sanitizers; a launched job: the launcher's N):
//  - the matrix: counts {0, 1, 2, 7, 1000, 65537, N-1} x {fp16, bf16, fp32, fp64} x {ring,
//    recursive_halving, recursive_doubling, automatic, shared_memory} x {sum, average}, each through the
//    one-shot allreduce (uneven layers) and a reducer called three times (integer, random,
//    integer data); one TEST_CASE per (algorithm, type), so CTest runs them in parallel;
//  - automatic's choice around its thresholds, against its documented rule restated here;
//  - pipelined messages: 64-byte segments, window 2 (the message-passing algorithms);
//  - shared_memory's result in rank order, bit for bit, on random data, whole or in pieces;
//  - NaN and Inf as IEEE arithmetic says, NaN payloads alike on every rank.
// Checks (docs/semantics.md): integer-valued data gives exactly the independent reference
// (reference.hpp); non-integer data is within a rounding bound of a double reference; every
// rank's result is bitwise identical to rank 0's.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include <gradsync/gradsync.hpp>

#include "../reference.hpp"
#include "../sanitized.hpp"
#include "harness.hpp"

namespace conformance {

template <class F>
void with_policy(bool average, F&& f)
{
    if (average)
        f(gradsync::average{});
    else
        f(gradsync::sum{});
}

template <class F>
void for_each_algorithm(F&& f)
{
    f(gradsync::ring{});
    f(gradsync::recursive_halving{});
    f(gradsync::recursive_doubling{});
    f(gradsync::automatic{});
    f(gradsync::shared_memory{});
}

inline const char* policy_name(bool average) { return average ? "average" : "sum"; }

inline std::vector<int> matrix_sizes()
{
    std::vector<int> n = gradsync_test::group_sizes(16);
    if (!gradsync_test::sanitized) { // the same code paths as 12 and 16, with more threads
        n.push_back(24);
        n.push_back(32);
    }
    return n;
}

inline std::vector<std::size_t> matrix_counts(int n)
{
    std::vector<std::size_t> c{0, 1, 2, 7, 1000, 65537, std::size_t(n - 1)};
    std::sort(c.begin(), c.end());
    c.erase(std::unique(c.begin(), c.end()), c.end());
    return c;
}

// What each of the four results of a case holds.
enum variant : std::size_t { oneshot_int, reducer_int_a, reducer_random, reducer_int_b, variants };

inline const char* variant_name(std::size_t v)
{
    static constexpr const char* names[] = {"one-shot allreduce, integer data, uneven layers",
                                            "reducer call 1, integer data", "reducer call 2, random data",
                                            "reducer call 3, integer data"};
    return names[v];
}

inline bool is_random(std::size_t v) { return v == reducer_random; }

inline std::uint64_t seed_of(int n, std::size_t c, std::size_t v)
{
    return ref::mix(std::uint64_t(n) * 1'000'003 + c * 97 + v);
}

template <class T>
std::vector<T> input(std::size_t v, std::uint64_t seed, int rank, std::size_t count)
{
    return is_random(v) ? ref::random_data<T>(seed, rank, count) : ref::int_data<T>(seed, rank, count);
}

// Checks one result set (all ranks) of one case against the reference.
template <class H, class T>
void check_case(int n, std::size_t count, bool average, std::size_t v, std::uint64_t seed, const per_rank<T>& out)
{
    std::vector<std::vector<T>> inputs;
    for (int r = 0; r < n; ++r)
        inputs.push_back(input<T>(v, seed, r, count));
    const std::vector<T>& got = out[std::size_t(H::checked_rank())];
    const std::string correct = is_random(v) ? ref::first_out_of_tolerance(got, ref::in_double(inputs, average), n)
                                             : ref::first_difference(got, ref::exact(inputs, average));
    const std::string identical = H::identical(out);
    INFO("rank " << H::checked_rank() << " of N " << n << ", " << ref::type_name<T>() << ", count " << count << ", "
                 << policy_name(average) << ", " << variant_name(v));
    CHECK(correct == "");
    CHECK(identical == "");
}

template <class H, class T, class Algo>
void run_matrix()
{
    using comm_type = typename H::comm_type;
    for (int n : H::sizes(matrix_sizes())) {
        struct case_spec {
            std::size_t count;
            bool average;
        };
        std::vector<case_spec> cases;
        for (std::size_t count : matrix_counts(n))
            for (bool average : {false, true})
                cases.push_back({count, average});
        std::vector<std::array<per_rank<T>, variants>> out(cases.size()); // [case][variant][rank]
        for (auto& c : out)
            for (auto& v : c)
                v.resize(std::size_t(n));

        const std::string escaped = H::run(n, [&](comm_type& comm) {
            const int r = comm.rank();
            for (std::size_t c = 0; c < cases.size(); ++c) {
                const std::size_t count = cases[c].count;
                with_policy(cases[c].average, [&](auto policy) {
                    using Policy = decltype(policy);
                    // The five-argument form (communicator, span, policy, algorithm, layer
                    // sizes), exactly as README.md's "Use" writes it.
                    const std::vector<std::size_t> layers = ref::uneven_layers(count);
                    std::vector<T> data = input<T>(oneshot_int, seed_of(n, c, oneshot_int), r, count);
                    gradsync::allreduce(comm, std::span<T>(data), Policy{}, Algo{},
                                        std::span<const std::size_t>(layers));
                    out[c][oneshot_int][std::size_t(r)] = std::move(data);

                    // One plan, three calls with different data: the reducer must be reusable.
                    gradsync::reducer<T, comm_type, Policy, Algo> reduce(comm, count);
                    for (std::size_t v : {reducer_int_a, reducer_random, reducer_int_b}) {
                        data = input<T>(v, seed_of(n, c, v), r, count);
                        reduce(std::span<T>(data));
                        out[c][v][std::size_t(r)] = std::move(data);
                    }
                });
            }
        });
        INFO("N " << n);
        CHECK(escaped == "");
        if (!escaped.empty())
            continue;
        for (std::size_t c = 0; c < cases.size(); ++c)
            for (std::size_t v = 0; v < variants; ++v)
                check_case<H, T>(n, cases[c].count, cases[c].average, v, seed_of(n, c, v), out[c][v]);
    }
}

// automatic's rule as its header documents it, restated independently.
inline std::uint32_t expected_choice(std::size_t bytes, std::size_t count, int n)
{
    if (bytes <= (std::size_t(32) << 10) || count < std::size_t(n))
        return gradsync::recursive_doubling::code;
    if ((n & (n - 1)) == 0)
        return gradsync::recursive_halving::code;
    return bytes >= (std::size_t(1) << 20) ? gradsync::ring::code : gradsync::recursive_halving::code;
}

template <class H, class T>
void run_automatic_choice()
{
    using comm_type = typename H::comm_type;
    for (int n : H::sizes({2, 3, 4, 5, 6, 8})) {
        // Around both thresholds (32 KiB, 1 MiB) and count < N.
        std::vector<std::size_t> counts{1, 7, std::size_t(n - 1), 1000};
        for (std::size_t bytes : {std::size_t(32) << 10, std::size_t(1) << 20})
            for (std::size_t c : {bytes / sizeof(T) - 1, bytes / sizeof(T), bytes / sizeof(T) + 1})
                counts.push_back(c);
        counts.push_back(300'000);
        // [count][rank]{the choice with shared memory, the rule's without}
        std::vector<per_rank<std::uint32_t>> chosen(counts.size(), per_rank<std::uint32_t>(std::size_t(n)));
        std::vector<per_rank<T>> out(counts.size(), per_rank<T>(std::size_t(n))), by_rule = out;
        const std::string escaped = H::run(n, [&](comm_type& comm) {
            const auto r = std::size_t(comm.rank());
            for (std::size_t c = 0; c < counts.size(); ++c) {
                gradsync::reducer<T, comm_type, gradsync::sum, gradsync::automatic> reduce(comm, counts[c]);
                gradsync::reducer<T, comm_type, gradsync::sum, gradsync::automatic> rule(
                    comm, counts[c], gradsync::automatic{.share_memory = false});
                chosen[c][r] = {reduce.plan().chosen(), rule.plan().chosen()};
                std::vector<T> data = ref::int_data<T>(c, comm.rank(), counts[c]);
                reduce(std::span<T>(data));
                out[c][r] = std::move(data);
                data = ref::int_data<T>(c, comm.rank(), counts[c]);
                rule(std::span<T>(data));
                by_rule[c][r] = std::move(data);
            }
        });
        {
            INFO("N " << n);
            CHECK(escaped == "");
        }
        if (!escaped.empty())
            continue;
        const auto here = std::size_t(H::checked_rank());
        for (std::size_t c = 0; c < counts.size(); ++c) {
            const std::size_t bytes = counts[c] * sizeof(T);
            const std::uint32_t mine = chosen[c][here][1];
            const std::string same_choice = H::identical(chosen[c]);
            std::vector<std::vector<T>> inputs;
            for (int r = 0; r < n; ++r)
                inputs.push_back(ref::int_data<T>(c, r, counts[c]));
            const std::string identical = H::identical(out[c]), identical_by_rule = H::identical(by_rule[c]);
            INFO("rank " << here << " of N " << n << ", count " << counts[c] << " (" << bytes << " bytes)");
            // Every rank of these harnesses is on one host; one rank has nothing to share.
            CHECK(ref::algorithm_name(chosen[c][here][0]) == std::string(n > 1 ? "shared_memory" : ref::algorithm_name(mine)));
            CHECK(ref::algorithm_name(mine) == std::string(ref::algorithm_name(expected_choice(bytes, counts[c], n))));
            CHECK(mine == gradsync::automatic{}.choose(bytes, counts[c], n));
            CHECK(same_choice == "");
            CHECK(ref::first_difference(out[c][here], ref::exact(inputs, false)) == "");
            CHECK(ref::first_difference(by_rule[c][here], ref::exact(inputs, false)) == "");
            CHECK(identical == "");
            CHECK(identical_by_rule == "");
        }
    }
}

// 64-byte segments and two receive slots: hundreds of segments per block, every scratch slot
// reused many times, segment boundaries inside layers. Same exactness and identity checks.
template <class H, class T, class Algo>
void run_pipelined()
{
    using comm_type = typename H::comm_type;
    gradsync::reducer_options options;
    options.pipeline.segment_bytes = 64;
    options.pipeline.window = 2;
    const std::vector<std::size_t> counts{1000, 4099};
    for (int n : H::sizes({2, 3, 5, 8})) {
        std::vector<per_rank<T>> out(counts.size() * 2 * 2, per_rank<T>(std::size_t(n))); // [(count, policy, call)]
        auto slot = [&](std::size_t c, bool average, std::size_t call) { return (c * 2 + (average ? 1 : 0)) * 2 + call; };
        auto seed = [&](std::size_t c, std::size_t call) { return 1000 + c * 10 + call; };
        const std::string escaped = H::run(n, [&](comm_type& comm) {
            const int r = comm.rank();
            for (std::size_t c = 0; c < counts.size(); ++c)
                for (bool average : {false, true})
                    with_policy(average, [&](auto policy) {
                        using Policy = decltype(policy);
                        const std::vector<std::size_t> layers = ref::uneven_layers(counts[c]);
                        // One-shot with options (six arguments), then a reducer planned from
                        // the layers alone.
                        std::vector<T> data = ref::int_data<T>(seed(c, 0), r, counts[c]);
                        gradsync::allreduce(comm, std::span<T>(data), Policy{}, Algo{},
                                            std::span<const std::size_t>(layers), options);
                        out[slot(c, average, 0)][std::size_t(r)] = std::move(data);
                        gradsync::reducer<T, comm_type, Policy, Algo> reduce(comm, std::span<const std::size_t>(layers),
                                                                            Algo{}, options);
                        data = ref::int_data<T>(seed(c, 1), r, counts[c]);
                        reduce(std::span<T>(data));
                        out[slot(c, average, 1)][std::size_t(r)] = std::move(data);
                    });
        });
        {
            INFO(ref::type_name<T>() << ", N " << n);
            CHECK(escaped == "");
        }
        if (!escaped.empty())
            continue;
        for (std::size_t c = 0; c < counts.size(); ++c)
            for (bool average : {false, true})
                for (std::size_t call = 0; call < 2; ++call) {
                    std::vector<std::vector<T>> inputs;
                    for (int r = 0; r < n; ++r)
                        inputs.push_back(ref::int_data<T>(seed(c, call), r, counts[c]));
                    const per_rank<T>& got = out[slot(c, average, call)];
                    const std::string identical = H::identical(got);
                    INFO(ref::type_name<T>() << ", rank " << H::checked_rank() << " of N " << n << ", count "
                                             << counts[c] << ", " << policy_name(average)
                                             << (call ? ", reducer" : ", one-shot"));
                    CHECK(ref::first_difference(got[std::size_t(H::checked_rank())], ref::exact(inputs, average)) == "");
                    CHECK(identical == "");
                }
    }
}

// Specials in integer data: element 3 NaN on one rank, 5 +Inf and -Inf on two ranks (NaN), 7
// +Inf on one rank, 9 -Inf on one rank, 11 NaN everywhere, 13 NaNs of different signs and
// payloads on two ranks. Every other element must still be exact, and all ranks must agree
// bit for bit, NaN payloads included (§3: bitwise identical results for every algorithm; x86
// addition keeps the first operand's NaN payload, so partners that add in opposite orders
// need to settle on one). On one rank the specials meet nothing: they stay as they are.
template <class H, class T>
void run_nan_inf()
{
    using comm_type = typename H::comm_type;
    constexpr std::size_t count = 100;
    // Through float: libstdc++ 12 has no numeric_limits<_Float16>.
    const T nan = T(std::numeric_limits<float>::quiet_NaN()), inf = T(std::numeric_limits<float>::infinity());
    const T odd_nan = -T(std::bit_cast<float>(0x7fd5a000u)); // negative, with a payload
    auto make = [&](int n, int r) {
        std::vector<T> v = ref::int_data<T>(42, r, count);
        if (r == 1)
            v[3] = nan;
        if (r == 0)
            v[5] = inf, v[7] = inf;
        if (r == n - 1)
            v[5] = -inf, v[9] = -inf;
        v[11] = nan;
        if (r == 0)
            v[13] = odd_nan;
        if (r == n - 1)
            v[13] = nan;
        return v;
    };
    enum expect { finite, is_nan, pos_inf, neg_inf };
    // One rank: element 5 is -Inf alone and element 3 finite.
    auto expectation = [](int n, std::size_t i) {
        if (n == 1 && (i == 3 || i == 5))
            return i == 5 ? neg_inf : finite;
        return i == 3 || i == 5 || i == 11 || i == 13 ? is_nan : i == 7 ? pos_inf : i == 9 ? neg_inf : finite;
    };
    for (int n : H::sizes({2, 3, 5, 8})) {
        std::vector<per_rank<T>> out(10, per_rank<T>(std::size_t(n)));
        const std::string escaped = H::run(n, [&](comm_type& comm) {
            std::size_t k = 0;
            for_each_algorithm([&](auto algo) {
                for (bool average : {false, true})
                    with_policy(average, [&](auto policy) {
                        std::vector<T> v = make(n, comm.rank());
                        gradsync::allreduce(comm, std::span<T>(v), policy, algo, std::span<const std::size_t>());
                        out[k++][std::size_t(comm.rank())] = std::move(v);
                    });
            });
        });
        {
            INFO("N " << n);
            CHECK(escaped == "");
        }
        if (!escaped.empty())
            continue;
        const char* names[] = {"ring", "recursive_halving", "recursive_doubling", "automatic", "shared_memory"};
        const int r = H::checked_rank();
        for (std::size_t k = 0; k < out.size(); ++k) {
            const bool average = k % 2 == 1;
            std::vector<std::vector<T>> inputs;
            for (int q = 0; q < n; ++q) {
                inputs.push_back(make(n, q));
                for (std::size_t i = 0; i < count; ++i)
                    if (expectation(n, i) != finite)
                        inputs.back()[i] = T(0);
            }
            const std::vector<T> want = ref::exact(inputs, average);
            const std::vector<T>& got = out[k][std::size_t(r)];
            std::string first;
            for (std::size_t i = 0; i < count && first.empty(); ++i) {
                const double x = double(got[i]);
                bool ok = false;
                switch (expectation(n, i)) {
                case is_nan: ok = std::isnan(x); break;
                case pos_inf: ok = x == INFINITY; break;
                case neg_inf: ok = x == -INFINITY; break;
                case finite: ok = ref::same_bits(&got[i], &want[i], sizeof(T)); break;
                }
                if (!ok)
                    first = "element " + std::to_string(i) + " is " + std::to_string(x);
            }
            const std::string identical = H::identical(out[k]);
            INFO(names[k / 2] << ", rank " << r << " of N " << n << ", " << policy_name(average));
            CHECK(first == "");
            CHECK(identical == "");
        }
    }
}

// shared_memory adds every element in rank order ((g_0 + g_1) + ...) + g_{N-1}, whatever block
// it falls in (docs/semantics.md): on random data its result equals the policy's combine
// applied element by element in that order, then its finish, bit for bit; and a buffer
// reduced in two pieces gives the bits of one call.
template <class H, class T>
void run_shared_memory_in_rank_order()
{
    using comm_type = typename H::comm_type;
    const std::vector<std::size_t> counts{5, 1000, 65537};
    for (int n : H::sizes({2, 3, 4, 5, 8})) {
        std::vector<per_rank<T>> whole(counts.size() * 2, per_rank<T>(std::size_t(n))), pieces = whole;
        const std::string escaped = H::run(n, [&](comm_type& comm) {
            const auto r = std::size_t(comm.rank());
            for (std::size_t c = 0; c < counts.size(); ++c)
                for (bool average : {false, true})
                    with_policy(average, [&](auto policy) {
                        const std::size_t k = c * 2 + (average ? 1 : 0);
                        std::vector<T> a = ref::random_data<T>(77 + c, comm.rank(), counts[c]), b = a;
                        gradsync::allreduce(comm, std::span<T>(a), policy, gradsync::shared_memory{});
                        const std::size_t cut = counts[c] / 3;
                        gradsync::allreduce(comm, std::span<T>(b).first(cut), policy, gradsync::shared_memory{});
                        gradsync::allreduce(comm, std::span<T>(b).subspan(cut), policy, gradsync::shared_memory{});
                        whole[k][r] = std::move(a);
                        pieces[k][r] = std::move(b);
                    });
        });
        INFO(ref::type_name<T>() << ", N " << n);
        CHECK(escaped == "");
        if (!escaped.empty())
            continue;
        const auto here = std::size_t(H::checked_rank());
        for (std::size_t c = 0; c < counts.size(); ++c)
            for (bool average : {false, true})
                with_policy(average, [&](auto policy) {
                    using P = decltype(policy);
                    std::vector<T> want = ref::random_data<T>(77 + c, 0, counts[c]);
                    for (int q = 1; q < n; ++q) {
                        const std::vector<T> g = ref::random_data<T>(77 + c, q, counts[c]);
                        for (std::size_t i = 0; i < want.size(); ++i)
                            P::template combine<T>(std::span<T>(&want[i], 1), std::span<const T>(&g[i], 1));
                    }
                    for (std::size_t i = 0; i < want.size(); ++i)
                        P::template finish<T>(std::span<T>(&want[i], 1), n);
                    const std::size_t k = c * 2 + (average ? 1 : 0);
                    INFO("count " << counts[c] << ", " << policy_name(average));
                    CHECK(ref::first_difference(whole[k][here], want) == "");
                    CHECK(ref::first_difference(pieces[k][here], whole[k][here]) == "");
                });
    }
}

// Gradients kept in a shared_buffer (docs/semantics.md, "Shared memory"): three reducers, each
// built on the buffer and run on its own stretch of it (a trainer's buckets), read their peers'
// data in place and hold no slot. Sum and Average give the rank-order reference's bits; Adasum
// over shared memory gives adasum_ring's bits on a copy outside the buffer.
template <class H, class T>
void run_shared_buffer()
{
    using comm_type = typename H::comm_type;
    const std::vector<std::vector<std::size_t>> buckets{{300, 0, 7}, {1}, {4096, 33}};
    std::size_t total = 0;
    for (const auto& b : buckets)
        for (std::size_t l : b)
            total += l;
    for (int n : H::sizes({1, 2, 3, 4, 8})) {
        // [policy][rank]: the buffer after the buckets' reducers, and the reference
        per_rank<T> shared_out[3] = {per_rank<T>(std::size_t(n)), per_rank<T>(std::size_t(n)), per_rank<T>(std::size_t(n))};
        per_rank<T> ring_out(static_cast<std::size_t>(n));
        per_rank<std::size_t> scratch(static_cast<std::size_t>(n));
        per_rank<int> in_place(static_cast<std::size_t>(n));
        const std::string escaped = H::run(n, [&](comm_type& comm) {
            const auto r = std::size_t(comm.rank());
            gradsync::shared_buffer buffer(comm, total * sizeof(T));
            in_place[r] = {buffer.shared() || n == 1 ? 1 : 0};
            const std::span<T> all = buffer.span<T>().first(total);
            std::size_t most = 0;
            for (int policy = 0; policy < 3; ++policy) {
                const std::vector<T> g = ref::random_data<T>(91 + std::uint64_t(policy), comm.rank(), total);
                std::copy(g.begin(), g.end(), all.begin());
                const auto run = [&]<class P, class A>(P, A algo) {
                    std::size_t at = 0;
                    for (const auto& layers : buckets) {
                        std::size_t count = 0;
                        for (std::size_t l : layers)
                            count += l;
                        gradsync::reducer<T, comm_type, P, A> reduce(comm, count, layers, algo,
                                                                     gradsync::reducer_options{.shared = &buffer});
                        if (!gradsync::is_adasum<P>) // Adasum's plan holds its triples' sums besides
                            most = std::max(most, reduce.plan().scratch_bytes());
                        reduce(all.subspan(at, count));
                        at += count;
                    }
                };
                if (policy == 0)
                    run(gradsync::sum{}, gradsync::automatic{});
                else if (policy == 1)
                    run(gradsync::average{}, gradsync::shared_memory{});
                else {
                    run(gradsync::adasum{}, gradsync::automatic{});
                    std::vector<T> copy = g;
                    std::size_t at = 0;
                    for (const auto& layers : buckets) {
                        std::size_t count = 0;
                        for (std::size_t l : layers)
                            count += l;
                        gradsync::reducer<T, comm_type, gradsync::adasum, gradsync::ring> reduce(comm, count, layers);
                        reduce(std::span<T>(copy).subspan(at, count));
                        at += count;
                    }
                    ring_out[r] = std::move(copy);
                }
                shared_out[policy][r] = std::vector<T>(all.begin(), all.end());
            }
            scratch[r] = {most};
        });
        INFO(ref::type_name<T>() << ", N " << n);
        CHECK(escaped == "");
        if (!escaped.empty())
            continue;
        const auto here = std::size_t(H::checked_rank());
        CHECK(in_place[here] == std::vector<int>{1});
        if (n > 1)
            CHECK(scratch[here] == std::vector<std::size_t>{0}); // no slot: the data is read where it lies
        for (int policy = 0; policy < 2; ++policy)
            with_policy(policy == 1, [&](auto p) {
                using P = decltype(p);
                std::vector<T> want = ref::random_data<T>(91 + std::uint64_t(policy), 0, total);
                for (int q = 1; q < n; ++q) {
                    const std::vector<T> g = ref::random_data<T>(91 + std::uint64_t(policy), q, total);
                    for (std::size_t i = 0; i < want.size(); ++i)
                        P::template combine<T>(std::span<T>(&want[i], 1), std::span<const T>(&g[i], 1));
                }
                for (std::size_t i = 0; i < want.size(); ++i)
                    P::template finish<T>(std::span<T>(&want[i], 1), n);
                INFO(policy_name(policy == 1));
                CHECK(ref::first_difference(shared_out[policy][here], want) == "");
            });
        INFO("adasum against adasum_ring");
        CHECK(ref::first_difference(shared_out[2][here], ring_out[here]) == "");
        CHECK(H::identical(shared_out[2]) == "");
    }
}

} // namespace conformance

// Unqualified, as the type lists below name it: Catch2 puts the name into the CTest test names.
using gradsync::half;

#define GRADSYNC_CONFORMANCE_MATRIX_CASE(algo, type, type_name)                                                       \
    TEST_CASE("allreduce matrix: " #algo " " type_name, "[allreduce][matrix]")                                      \
    {                                                                                                                  \
        conformance::run_matrix<conformance::harness, type, gradsync::algo>();                                        \
    }

GRADSYNC_CONFORMANCE_MATRIX_CASE(ring, gradsync::half, "fp16")
GRADSYNC_CONFORMANCE_MATRIX_CASE(ring, gradsync::bfloat16, "bf16")
GRADSYNC_CONFORMANCE_MATRIX_CASE(ring, float, "fp32")
GRADSYNC_CONFORMANCE_MATRIX_CASE(ring, double, "fp64")
GRADSYNC_CONFORMANCE_MATRIX_CASE(recursive_halving, gradsync::half, "fp16")
GRADSYNC_CONFORMANCE_MATRIX_CASE(recursive_halving, gradsync::bfloat16, "bf16")
GRADSYNC_CONFORMANCE_MATRIX_CASE(recursive_halving, float, "fp32")
GRADSYNC_CONFORMANCE_MATRIX_CASE(recursive_halving, double, "fp64")
GRADSYNC_CONFORMANCE_MATRIX_CASE(recursive_doubling, gradsync::half, "fp16")
GRADSYNC_CONFORMANCE_MATRIX_CASE(recursive_doubling, gradsync::bfloat16, "bf16")
GRADSYNC_CONFORMANCE_MATRIX_CASE(recursive_doubling, float, "fp32")
GRADSYNC_CONFORMANCE_MATRIX_CASE(recursive_doubling, double, "fp64")
GRADSYNC_CONFORMANCE_MATRIX_CASE(automatic, gradsync::half, "fp16")
GRADSYNC_CONFORMANCE_MATRIX_CASE(automatic, gradsync::bfloat16, "bf16")
GRADSYNC_CONFORMANCE_MATRIX_CASE(automatic, float, "fp32")
GRADSYNC_CONFORMANCE_MATRIX_CASE(automatic, double, "fp64")
GRADSYNC_CONFORMANCE_MATRIX_CASE(shared_memory, gradsync::half, "fp16")
GRADSYNC_CONFORMANCE_MATRIX_CASE(shared_memory, gradsync::bfloat16, "bf16")
GRADSYNC_CONFORMANCE_MATRIX_CASE(shared_memory, float, "fp32")
GRADSYNC_CONFORMANCE_MATRIX_CASE(shared_memory, double, "fp64")

TEMPLATE_TEST_CASE("automatic: recursive doubling for small vectors, halving or ring for large ones",
                   "[allreduce][automatic]", half, gradsync::bfloat16, float, double)
{
    conformance::run_automatic_choice<conformance::harness, TestType>();
}

#define GRADSYNC_CONFORMANCE_PIPELINE_CASE(algo)                                                                      \
    TEST_CASE("pipelined messages (64-byte segments, window 2): " #algo, "[allreduce][pipeline]")                     \
    {                                                                                                                  \
        conformance::run_pipelined<conformance::harness, gradsync::half, gradsync::algo>();                           \
        conformance::run_pipelined<conformance::harness, gradsync::bfloat16, gradsync::algo>();                       \
        conformance::run_pipelined<conformance::harness, float, gradsync::algo>();                                    \
    }

GRADSYNC_CONFORMANCE_PIPELINE_CASE(ring)
GRADSYNC_CONFORMANCE_PIPELINE_CASE(recursive_halving)
GRADSYNC_CONFORMANCE_PIPELINE_CASE(recursive_doubling)
GRADSYNC_CONFORMANCE_PIPELINE_CASE(automatic)

TEMPLATE_TEST_CASE("shared_memory adds in rank order, whatever the block: one call's bits in pieces", "[allreduce][shared]", half,
                   double)
{
    conformance::run_shared_memory_in_rank_order<conformance::harness, TestType>();
}

TEMPLATE_TEST_CASE("gradients in a shared_buffer: reducers on its stretches read them in place", "[allreduce][shared]",
                   half, float)
{
    conformance::run_shared_buffer<conformance::harness, TestType>();
}

TEMPLATE_TEST_CASE("NaN and Inf propagate as IEEE arithmetic says, without hanging", "[allreduce][nan]", half,
                   gradsync::bfloat16, float, double)
{
    conformance::run_nan_inf<conformance::harness, TestType>();
}
