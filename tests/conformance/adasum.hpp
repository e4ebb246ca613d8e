// The Adasum conformance suite (docs/semantics.md, "Adasum"), once for every transport: a
// driver declares `conformance::harness` (harness.hpp) and includes this file, which registers
// the TEST_CASEs. Against the independent double-precision reference of adasum_reference.hpp,
// for each N the harness runs (local_group: 1..16, 1..8, 12 and 16 under sanitizers; a launched
// job: the launcher's N):
//
//  - the matrix: {fp16, bf16, fp32, fp64} x {recursive_halving, recursive_doubling, ring,
//    automatic (default and small thresholds, checked against the reference of the algorithm
//    it chose), hierarchical{k = 1, 2, 4 where k divides N, and 0 = the communicator's},
//    hierarchical{k = 2 (1 for odd N), node_combine::sum}, shared_memory} x layouts with
//    empty, one-element and long layers, fewer elements than ranks, no elements, no layout,
//    256-byte segments (layers cross segments and straddle the halving cuts) and default
//    options with layers of 5000 and 70001 elements. A reducer is called twice with different
//    data; the one-shot allreduce of the first call's data must give the same bits. Per layer,
//    ||out - ref|| / ||ref|| <= 1e-12 (fp64), 2e-5 (fp32), 8e-3 (fp16), 6.4e-2 (bf16), three
//    times that for the ring's chain (ring, shared_memory), where a layer's reduction passes
//    near A's jump at a zero partial against ref on either side of it (adasum_reference.hpp,
//    "Either side of A's jump"); every rank's result is bitwise identical to every
//    other's, and shared_memory's to ring's; hierarchical's plan says the node size asked for
//    (0: the communicator's, one node of N ranks on one machine).
//  - Horovod's scenarios (fp32, fp64, N in {2, 3, 4, 8}, every algorithm): orthogonal
//    gradients sum exactly, parallel ones give the vector back, tiny and huge magnitudes stay
//    finite and accurate, zero gradients drop out, a NaN poisons its layer on every rank.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <gradsync/gradsync.hpp>

#include "../adasum_reference.hpp"
#include "../adasum_variant.hpp"
#include "../reference.hpp"
#include "../sanitized.hpp"
#include "harness.hpp"

namespace conformance::adasum_suite {

using namespace adasum_variant;

// The algorithm code a reducer runs: automatic's choice, else the tag's own.
template <class R, class Algo>
std::uint32_t chosen_code(const R& r, const Algo&)
{
    if constexpr (std::is_same_v<Algo, gradsync::automatic>)
        return r.plan().chosen();
    else
        return Algo::code;
}

// hierarchical's node size as planned; 0 for the other algorithms.
template <class R, class Algo>
std::uint32_t planned_node_size(const R& r, const Algo&)
{
    if constexpr (std::is_same_v<Algo, gradsync::hierarchical>)
        return std::uint32_t(r.plan().ranks_per_node());
    else
        return 0;
}

struct layout_case {
    std::string name;
    std::vector<std::size_t> layers; // given to the library as is (empty: one layer)
    std::size_t count = 0;
    bool small_segments = false;     // 256-byte segments, window 2
};

inline gradsync::reducer_options options_for(const layout_case& c)
{
    gradsync::reducer_options o;
    if (c.small_segments)
        o = gradsync::reducer_options{.pipeline = {.segment_bytes = 256, .window = 2}};
    return o;
}

template <class T>
struct case_result {
    std::vector<per_rank<T>> out;          // [call][rank]; one more at the end for the one-shot call
    per_rank<std::uint32_t> chosen;        // [rank]{algorithm code}
    per_rank<std::uint32_t> node_size;     // [rank]{hierarchical's ranks_per_node, 0 for the others}
};

// Runs variant v on n ranks (H::run). For each case c: a reducer is planned and called once
// per entry of inputs[c] (inputs[c][call][rank]); with `oneshot`, the one-shot allreduce of
// call 0's data follows. Returns "" or the exception that escaped a rank.
template <class H, class T>
std::string run_cases(int n, const variant& v, const std::vector<layout_case>& cases,
                      const std::vector<std::vector<per_rank<T>>>& inputs, bool oneshot,
                      std::vector<case_result<T>>& results)
{
    using comm_type = typename H::comm_type;
    results.assign(cases.size(), {});
    for (std::size_t c = 0; c < cases.size(); ++c) {
        results[c].out.assign(inputs[c].size() + (oneshot ? 1 : 0), per_rank<T>(std::size_t(n)));
        results[c].chosen.assign(std::size_t(n), {});
        results[c].node_size.assign(std::size_t(n), {});
    }
    return H::run(n, [&](comm_type& comm) {
        const auto r = std::size_t(comm.rank());
        with_algorithm(v, [&](auto algo) {
            using Algo = decltype(algo);
            for (std::size_t c = 0; c < cases.size(); ++c) {
                const layout_case& lc = cases[c];
                const std::span<const std::size_t> layers(lc.layers);
                gradsync::reducer<T, comm_type, gradsync::adasum, Algo> reduce(comm, lc.count, layers, algo,
                                                                              options_for(lc));
                results[c].chosen[r] = {chosen_code(reduce, algo)};
                results[c].node_size[r] = {planned_node_size(reduce, algo)};
                std::vector<T> data;
                for (std::size_t call = 0; call < inputs[c].size(); ++call) {
                    data = inputs[c][call][r];
                    reduce(std::span<T>(data));
                    results[c].out[call][r] = std::move(data);
                }
                if (oneshot) {
                    data = inputs[c][0][r];
                    if (lc.small_segments) // the six-argument form
                        gradsync::allreduce(comm, std::span<T>(data), gradsync::adasum{}, algo, layers,
                                            options_for(lc));
                    else // the five-argument form, as README.md's "Use" writes it
                        gradsync::allreduce(comm, std::span<T>(data), gradsync::adasum{}, algo, layers);
                    results[c].out.back()[r] = std::move(data);
                }
            }
        });
    });
}

// The checks every case makes of the plan: the same algorithm on every rank, automatic's
// choice by its rule (shared_memory where it may share memory), hierarchical's node size as asked (0: the communicator's, N here).
template <class H, class T>
void check_plan(int n, const variant& v, const layout_case& lc, const case_result<T>& res)
{
    const auto here = std::size_t(H::checked_rank());
    const std::string same_choice = H::identical(res.chosen);
    CHECK(same_choice == "");
    if (v.a == alg::automatic) { // every rank of these harnesses is on one host
        const gradsync::automatic rule = automatic_rule(v);
        CHECK(res.chosen[here][0] == (rule.share_memory && n > 1 ? gradsync::shared_memory::code
                                                                 : rule.choose(lc.count * sizeof(T), lc.count, n)));
    }
    if (v.a == alg::hierarchical)
        CHECK(res.node_size[here][0] == std::uint32_t(resolved_k(v, n)));
}

// ---------------------------------------------------------------------------------------
// The matrix.

template <class T>
std::vector<layout_case> matrix_layouts(int n)
{
    const std::size_t segment = 256 / sizeof(T);
    const std::size_t big = std::size_t(n) * segment + 77; // more than N segments
    std::vector<layout_case> cases;
    std::vector<std::size_t> mixed{0, 1, 5, 0, 1, 300, big, 2, 0};
    cases.push_back(
        {"mixed: empty, one-element and N segments + 77 elements (256-byte segments)", mixed, total(mixed), true});
    std::vector<std::size_t> many;
    for (std::size_t i = 0; i < 23; ++i)
        many.push_back(i * 7 % 13); // 0..12: empty and one-element layers, more layers than ranks
    cases.push_back({"23 small layers (256-byte segments)", many, total(many), true});
    cases.push_back({"two elements in three layers (fewer elements than ranks)", {1, 0, 1}, 2, true});
    cases.push_back({"no elements (two empty layers)", {0, 0}, 0, false});
    cases.push_back({"1000 elements, no layout given (one layer)", {}, 1000, false});
    std::vector<std::size_t> large{70001, 0, 1, 999};
    cases.push_back({"default options, a layer of 70001 elements", large, total(large), false});
    // Appended, so that the cases above keep their seeds (matrix_seed takes the position).
    cases.push_back({"one element (256-byte segments)", {1}, 1, true});
    std::vector<std::size_t> medium{5000, 0, 1, 999};
    cases.push_back({"default options, a layer of 5000 elements", medium, total(medium), false});
    return cases;
}

inline std::uint64_t matrix_seed(int n, std::size_t c, std::size_t call)
{
    return ref::mix(std::uint64_t(n) * 7919 + c * 131 + call);
}

// widened[call]: the call's inputs, widened to double.
template <class H, class T>
void check_matrix_case(int n, const variant& v, const layout_case& lc,
                       const std::vector<std::vector<adaref::vec>>& widened, const case_result<T>& res)
{
    const auto here = std::size_t(H::checked_rank());
    INFO(ref::type_name<T>() << ", rank " << here << " of N " << n << ", " << describe(v) << ", " << lc.name);
    check_plan<H, T>(n, v, lc, res);
    const std::uint32_t chosen = res.chosen[here][0];
    const std::vector<std::size_t> layers = adaref::normalize(lc.count, lc.layers);
    const double tol = tolerance_of<T>(chosen);
    for (std::size_t call = 0; call < widened.size(); ++call) {
        INFO("reducer call " << call + 1 << ", checked against the " << ref::algorithm_name(chosen) << " reference");
        const std::vector<adaref::vec>& g = widened[call];
        const std::string identical = H::identical(res.out[call]);
        // Within tolerance of the reference taken on either side of A's jump at a zero
        // partial (adasum_reference.hpp): which side the rounded reduction lands on is chance.
        CHECK(adaref::first_layer_out_of_tolerance_either_side(res.out[call][here], g, layers,
                                                               order_of(v, chosen, n), format_of<T>(), tol) == "");
        CHECK(identical == "");
    }
    if (res.out.size() > widened.size()) {
        INFO("one-shot allreduce of the first call's data");
        const std::string identical = H::identical(res.out.back());
        CHECK(ref::first_difference(res.out.back()[here], res.out[0][here]) == "");
        CHECK(identical == "");
    }
}

// Every algorithm's variants for N ranks.
inline std::vector<variant> matrix_variants(int n)
{
    std::vector<variant> v{{alg::recursive_halving},
                           {alg::recursive_doubling},
                           {alg::ring},
                           {.a = alg::automatic},
                           {.a = alg::automatic, .small_thresholds = true}};
    for (int k : {1, 2, 4})
        if (n % k == 0)
            v.push_back({.a = alg::hierarchical, .k = k});
    v.push_back({.a = alg::hierarchical, .k = 0}); // the communicator's nodes: one of N ranks here
    v.push_back({.a = alg::hierarchical, .k = n % 2 == 0 ? 2 : 1, .node_sum = true});
    v.push_back({.a = alg::shared_memory});
    return v;
}

// shared_memory's Adasum runs the ring's chains with the ring's triples and sums, so its
// results equal ring's bit for bit (docs/adasum.md).
template <class H, class T>
void check_shared_memory_as_ring(int n, const std::vector<layout_case>& cases, const std::vector<case_result<T>>& ring,
                                 const std::vector<case_result<T>>& shared)
{
    const auto here = std::size_t(H::checked_rank());
    for (std::size_t c = 0; c < cases.size(); ++c)
        for (std::size_t call = 0; call < ring[c].out.size(); ++call) {
            INFO(ref::type_name<T>() << ", rank " << here << " of N " << n << ", " << cases[c].name << ", call "
                                     << call + 1 << ": shared_memory against ring, bit for bit");
            CHECK(ref::first_difference(shared[c].out[call][here], ring[c].out[call][here]) == "");
        }
}

// Every variant of every algorithm on one set of inputs per N: drawing the normal inputs and
// widening them cost more than reducing them, so both are done once per N and type.
template <class H, class T>
void run_matrix()
{
    for (int n : H::sizes(gradsync_test::group_sizes(16))) {
        const std::vector<layout_case> cases = matrix_layouts<T>(n);
        std::vector<std::vector<per_rank<T>>> inputs(cases.size());            // [case][call][rank]
        std::vector<std::vector<std::vector<adaref::vec>>> widened(cases.size()); // the same, in double
        for (std::size_t c = 0; c < cases.size(); ++c)
            for (std::size_t call = 0; call < 2; ++call) {
                per_rank<T> in;
                for (int r = 0; r < n; ++r)
                    in.push_back(adaref::normal_data<T>(matrix_seed(n, c, call), r, cases[c].count));
                widened[c].push_back(adaref::widen(in));
                inputs[c].push_back(std::move(in));
            }
        std::vector<case_result<T>> ring, shared;
        for (const variant& v : matrix_variants(n)) {
            std::vector<case_result<T>> results;
            const std::string escaped = run_cases<H, T>(n, v, cases, inputs, true, results);
            {
                INFO(ref::type_name<T>() << ", N " << n << ", " << describe(v));
                CHECK(escaped == "");
            }
            if (!escaped.empty())
                continue;
            for (std::size_t c = 0; c < cases.size(); ++c)
                check_matrix_case<H, T>(n, v, cases[c], widened[c], results[c]);
            if (v.a == alg::ring)
                ring = std::move(results);
            else if (v.a == alg::shared_memory)
                shared = std::move(results);
        }
        if (!ring.empty() && !shared.empty())
            check_shared_memory_as_ring<H, T>(n, cases, ring, shared);
    }
}

// ---------------------------------------------------------------------------------------
// Horovod's scenarios.

inline const std::vector<std::size_t>& scenario_layers()
{
    static const std::vector<std::size_t> layers{0, 1, 3, 300, 1000, 0, 77};
    return layers;
}

// What each rank's vector becomes by the node rule alone: hierarchical{average} divides by
// k (resolved), everything else by 1.
inline int node_divisor(const variant& v, int n)
{
    return v.a == alg::hierarchical && !v.node_sum ? resolved_k(v, n) : 1;
}

// Runs make(n, rank) on every rank with every scenario variant, N in {2, 3, 4, 8} (a launched
// job: its N); checks that nothing threw, that all ranks agree bit for bit and on the plan, and
// calls check(ctx, inputs, the checked rank's result).
template <class H, class T, class Make, class Check>
void scenario(Make make, Check check)
{
    const layout_case lc{"scenario layers", scenario_layers(), total(scenario_layers()), true};
    for (int n : H::sizes({2, 3, 4, 8})) {
        per_rank<T> in;
        for (int r = 0; r < n; ++r)
            in.push_back(make(n, r));
        const std::vector<std::vector<per_rank<T>>> inputs{{in}};
        std::vector<variant> variants = scenario_variants(n);
        variants.push_back({.a = alg::shared_memory}); // host memory only: not in the device's list
        for (const variant& v : variants) {
            std::vector<case_result<T>> results;
            const std::string escaped = run_cases<H, T>(n, v, {lc}, inputs, false, results);
            const auto here = std::size_t(H::checked_rank());
            INFO(ref::type_name<T>() << ", rank " << here << " of N " << n << ", " << describe(v));
            CHECK(escaped == "");
            if (!escaped.empty())
                continue;
            check_plan<H, T>(n, v, lc, results[0]);
            const std::string identical = H::identical(results[0].out[0]);
            CHECK(identical == "");
            const scenario_context ctx{n, v, results[0].chosen[here][0], adaref::normalize(lc.count, lc.layers)};
            check(ctx, in, results[0].out[0][here]);
        }
    }
}

template <class T>
void check_against_reference(const scenario_context& ctx, const per_rank<T>& in, const std::vector<T>& got)
{
    const std::vector<adaref::vec> g = adaref::widen(in);
    const adaref::vec want = expected(ctx.v, ctx.chosen, g, ctx.layers);
    INFO("against the " << ref::algorithm_name(ctx.chosen) << " reference");
    CHECK(adaref::first_layer_out_of_tolerance(got, want, ctx.layers, tolerance_of<T>(ctx.chosen), g) == "");
}

template <class T>
std::string first_not_finite(const std::vector<T>& got)
{
    for (std::size_t i = 0; i < got.size(); ++i)
        if (!std::isfinite(double(got[i])))
            return "element " + std::to_string(i) + " is " + std::to_string(double(got[i]));
    return "";
}

inline bool power_of_two(int k) { return k > 0 && (k & (k - 1)) == 0; }

// Orthogonal: rank r owns the coordinates i with i % N == r. A(x, y) = x + y exactly, so
// the result is the sum (divided by the node size for hierarchical{average}, exact when
// that is a power of two).
template <class H, class T>
void orthogonal()
{
    scenario<H, T>(
        [](int n, int r) {
            std::vector<T> v = adaref::normal_data<T>(101, r, total(scenario_layers()));
            for (std::size_t i = 0; i < v.size(); ++i)
                if (int(i % std::size_t(n)) != r)
                    v[i] = T(0);
            return v;
        },
        [](const scenario_context& ctx, const per_rank<T>& in, const std::vector<T>& got) {
            check_against_reference<T>(ctx, in, got);
            const int div = node_divisor(ctx.v, ctx.n);
            if (!power_of_two(div))
                return;
            std::vector<T> want(got.size());
            for (std::size_t i = 0; i < want.size(); ++i)
                want[i] = T(double(in[i % std::size_t(ctx.n)][i]) / div);
            INFO("the exact sum" << (div > 1 ? " divided by the node size" : ""));
            CHECK(ref::first_difference(got, want) == "");
        });
}

// Parallel: every rank has the same v; A(v, v) = v exactly (node sums of two give 2v).
template <class H, class T>
void parallel()
{
    scenario<H, T>([](int, int) { return adaref::normal_data<T>(202, 0, total(scenario_layers())); },
                   [](const scenario_context& ctx, const per_rank<T>& in, const std::vector<T>& got) {
                       check_against_reference<T>(ctx, in, got);
                       const int k = ctx.v.a == alg::hierarchical ? resolved_k(ctx.v, ctx.n) : 1;
                       if (k > 2) // a node sum of 3 or more copies may round; the tolerance check covers it
                           return;
                       const double factor = ctx.v.a == alg::hierarchical && ctx.v.node_sum ? k : 1;
                       std::vector<T> want(got.size());
                       for (std::size_t i = 0; i < want.size(); ++i)
                           want[i] = T(double(in[0][i]) * factor);
                       INFO("A(v, v) = v exactly");
                       CHECK(ref::first_difference(got, want) == "");
                   });
}

template <class H, class T>
void magnitude(double scale)
{
    INFO("inputs of magnitude " << scale);
    scenario<H, T>([scale](int, int r) { return adaref::normal_data<T>(303, r, total(scenario_layers()), scale); },
                   [scale](const scenario_context& ctx, const per_rank<T>& in, const std::vector<T>& got) {
                       CHECK(first_not_finite(got) == "");
                       check_against_reference<T>(ctx, in, got);
                       // Not flushed to zero nor blown up: the largest magnitude stays near scale.
                       double top = 0;
                       for (const T& x : got)
                           top = std::max(top, std::fabs(double(x)));
                       CHECK(top > scale / 10);
                       CHECK(top < 100 * scale);
                   });
}

// Zero gradients on the ranks where zero(n, r): A(x, 0) = x.
template <class H, class T, class Zero>
void zeros(Zero zero, bool exact_when_one_left)
{
    scenario<H, T>(
        [zero](int n, int r) {
            std::vector<T> v = adaref::normal_data<T>(404, r, total(scenario_layers()));
            if (zero(n, r))
                std::fill(v.begin(), v.end(), T(0));
            return v;
        },
        [exact_when_one_left](const scenario_context& ctx, const per_rank<T>& in, const std::vector<T>& got) {
            check_against_reference<T>(ctx, in, got);
            if (!exact_when_one_left)
                return;
            // One rank left with data: its vector comes back (over the node size), exactly.
            const int div = node_divisor(ctx.v, ctx.n);
            if (!power_of_two(div))
                return;
            std::vector<T> want(got.size());
            for (std::size_t i = 0; i < want.size(); ++i) {
                double s = 0;
                for (const auto& v : in)
                    s += double(v[i]);
                want[i] = T(s / div);
            }
            INFO("A(x, 0) = x exactly");
            CHECK(ref::first_difference(got, want) == "");
        });
}

template <class T>
void all_zero(const scenario_context&, const per_rank<T>&, const std::vector<T>& got)
{
    std::string first;
    for (std::size_t i = 0; i < got.size() && first.empty(); ++i)
        if (!(double(got[i]) == 0))
            first = "element " + std::to_string(i) + " is " + std::to_string(double(got[i]));
    CHECK(first == "");
}

// NaNs in some ranks' inputs (some negative, with a payload, so that partners could end with
// different NaN bits): the reference's IEEE arithmetic says where the result is NaN (the
// whole layer once a vector with a NaN meets one without; only the NaN elements where two
// vectors with NaNs meet or where no combine happens, as in hierarchical with one node or
// on one rank); other layers are untouched; all ranks agree bit for bit, NaN payloads
// included (checked by scenario()).
template <class H, class T>
void nan_input()
{
    const std::vector<std::size_t>& layers = scenario_layers(); // {0, 1, 3, 300, 1000, 0, 77}
    // Layer 1 (one element) and layer 3 get NaNs from ranks 0 and 1; layer 4 one NaN, from
    // the last rank only.
    const std::size_t one = 1, mid = 1 + 3 + 10, big = 1 + 3 + 300 + 500;
    scenario<H, T>(
        [&](int n, int r) {
            std::vector<T> v = adaref::normal_data<T>(505, r, total(layers));
            if (r == n - 1)
                v[big] = T(std::numeric_limits<float>::quiet_NaN());
            if (r == 0) {
                v[one] = T(std::numeric_limits<float>::quiet_NaN());
                v[mid] = T(std::numeric_limits<float>::quiet_NaN());
            }
            if (r == 1) { // negative and with a payload: partners must still agree on the bits
                v[mid] = T(-std::bit_cast<float>(0x7fd5a000u));
                v[mid + 10] = T(-std::bit_cast<float>(0x7fd5a000u));
            }
            return v;
        },
        [&](const scenario_context& ctx, const per_rank<T>& in, const std::vector<T>& got) {
            check_against_reference<T>(ctx, in, got); // NaN exactly where the reference has one
            CHECK(std::isnan(double(got[big])));
            CHECK(std::isnan(double(got[one])));
            CHECK(std::isnan(double(got[mid])));
            // A combine of a layer holding a NaN with a layer holding none poisons all of it
            // (where both hold NaNs, na and nb are NaN, both coefficients 1 by the guard,
            // and only the NaN elements stay NaN: the reference covers that).
            const bool combined = ctx.n > 1 && !(ctx.v.a == alg::hierarchical && resolved_k(ctx.v, ctx.n) == ctx.n);
            if (combined) {
                std::size_t finite = 0;
                for (std::size_t i = 1 + 3 + 300; i < 1 + 3 + 300 + 1000; ++i)
                    finite += std::isnan(double(got[i])) ? 0 : 1;
                CHECK(finite == 0);
            }
            // The layers without NaN input are still right (checked above) and finite.
            for (std::size_t i = 1 + 3 + 300 + 1000; i < got.size(); ++i)
                if (!std::isfinite(double(got[i]))) {
                    FAIL_CHECK("element " << i << " of the last layer is " << double(got[i]));
                    break;
                }
        });
}

} // namespace conformance::adasum_suite

TEST_CASE("adasum matrix: every algorithm in fp16", "[adasum][matrix]")
{
    conformance::adasum_suite::run_matrix<conformance::harness, gradsync::half>();
}
TEST_CASE("adasum matrix: every algorithm in bf16", "[adasum][matrix]")
{
    conformance::adasum_suite::run_matrix<conformance::harness, gradsync::bfloat16>();
}
TEST_CASE("adasum matrix: every algorithm in fp32", "[adasum][matrix]")
{
    conformance::adasum_suite::run_matrix<conformance::harness, float>();
}
TEST_CASE("adasum matrix: every algorithm in fp64", "[adasum][matrix]")
{
    conformance::adasum_suite::run_matrix<conformance::harness, double>();
}

TEST_CASE("adasum scenario: orthogonal gradients give the exact sum", "[adasum][scenario]")
{
    using namespace conformance::adasum_suite;
    orthogonal<conformance::harness, float>();
    orthogonal<conformance::harness, double>();
}

TEST_CASE("adasum scenario: identical gradients on every rank give that gradient", "[adasum][scenario]")
{
    using namespace conformance::adasum_suite;
    parallel<conformance::harness, float>();
    parallel<conformance::harness, double>();
}

TEST_CASE("adasum scenario: tiny gradients stay finite and accurate", "[adasum][scenario]")
{
    using namespace conformance::adasum_suite;
    magnitude<conformance::harness, float>(1e-30); // squares 1e-60 in double: far above sqrt(DBL_MIN)
    magnitude<conformance::harness, float>(1e-20);
    magnitude<conformance::harness, double>(1e-70);  // squares 1e-140, above sqrt(DBL_MIN) ~ 1.5e-154
    magnitude<conformance::harness, double>(1e-100); // squares 1e-200: below the guard, so A is the plain sum
}

TEST_CASE("adasum scenario: huge gradients stay finite and accurate", "[adasum][scenario]")
{
    using namespace conformance::adasum_suite;
    magnitude<conformance::harness, float>(1e30);
    magnitude<conformance::harness, double>(1e150);
}

TEST_CASE("adasum scenario: zero gradients on some ranks leave the others' (A(x, 0) = x)", "[adasum][scenario]")
{
    using namespace conformance::adasum_suite;
    using H = conformance::harness;
    SECTION("every rank but the middle one is zero")
    {
        auto zero = [](int n, int r) { return r != n / 2; };
        zeros<H, float>(zero, true);
        zeros<H, double>(zero, true);
    }
    SECTION("the even ranks are zero")
    {
        auto zero = [](int, int r) { return r % 2 == 0; };
        zeros<H, float>(zero, false);
        zeros<H, double>(zero, false);
    }
    SECTION("the last rank is zero")
    {
        auto zero = [](int n, int r) { return r == n - 1; };
        zeros<H, float>(zero, false);
        zeros<H, double>(zero, false);
    }
}

TEST_CASE("adasum scenario: zero gradients everywhere give zero", "[adasum][scenario]")
{
    using namespace conformance::adasum_suite;
    using H = conformance::harness;
    scenario<H, float>([](int, int) { return std::vector<float>(total(scenario_layers()), 0.0f); }, all_zero<float>);
    scenario<H, double>([](int, int) { return std::vector<double>(total(scenario_layers()), 0.0); },
                        all_zero<double>);
}

TEST_CASE("adasum scenario: a NaN in one rank's input makes its layer NaN on every rank, without hanging",
          "[adasum][scenario]")
{
    using namespace conformance::adasum_suite;
    nan_input<conformance::harness, float>();
    nan_input<conformance::harness, double>();
}
