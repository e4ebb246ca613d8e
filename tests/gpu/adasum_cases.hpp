// Adasum (docs/semantics.md, "Adasum") on the direct path of the device plans, and
// hierarchical's Sum and Average there, shared by the CPU test (test_device_adasum: host_space
// with Thrust's OpenMP and CPP systems) and the GPU test (test_device_local: cuda_stream). H
// is a harness as device_cases.hpp describes it; every case runs whole local_groups and
// returns "" or what went wrong, so Catch2's assertions stay on the main thread.
//
// The references:
//  - adasum_reference.hpp, plain double loops of the definition and the tree orders, per
//    layer within the budget of docs/adasum.md ("Accuracy"): 1e-12 fp64, 2e-5 fp32, 8e-3
//    fp16, 6.4e-2 bf16, three times that for the ring's chain (adaref::tolerance), on
//    either side of A's jump where a layer's reduction passes near it;
//  - the host plan (reducer<> in host memory), which the device plan matches to rounding
//    only (it sums the triples in the Thrust kernel's order): within twice that budget;
//  - properties that hold whatever the order: orthogonal gradients sum, parallel ones give
//    their mean, A(v, v) = v and A(x, 0) = x exactly, a NaN poisons its layer only;
//  - for Sum and Average over hierarchical, reference.hpp's exact sums and the host bits.
// Every rank of a device run must end with rank 0's bits, NaN payloads included.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <gradsync/collective/device_reducer.hpp>
#include <gradsync/gradsync.hpp>

#include "../adasum_reference.hpp"
#include "../adasum_variant.hpp"
#include "../reference.hpp"
#include "device_cases.hpp"

namespace adasum_cases {

using device_cases::per_rank;
using gradsync::local_communicator;

using namespace adasum_variant;

// 1, 2, ..., n.
inline std::vector<int> one_to(int n)
{
    std::vector<int> ns;
    for (int i = 1; i <= n; ++i)
        ns.push_back(i);
    return ns;
}

// The scenarios' rank counts: powers of two and others, up to 16.
inline const std::vector<int> scenario_ranks{1, 2, 3, 4, 5, 8, 16};

// What the node rule alone makes of each gradient: hierarchical{sum} keeps a node's k
// gradients' sum, every other variant averages or combines, leaving the scale.
inline int node_factor(const variant& v, int n) { return v.a == alg::hierarchical && v.node_sum ? resolved_k(v, n) : 1; }

inline bool power_of_two(int k) { return k > 0 && (k & (k - 1)) == 0; }

// ---------------------------------------------------------------------------------------
// Running a variant on the device path and on the host path.

// One reducer's work: its layout, its pipeline segment and its inputs, [call][rank].
template <class T>
struct job {
    std::string name;
    std::vector<std::size_t> layers; // given to the library as is (empty: one layer)
    std::size_t segment_bytes = 0;
    std::vector<per_rank<T>> sets;
};

template <class T>
struct adasum_run {
    std::string error;                            // "" or what went wrong running
    std::vector<std::vector<per_rank<T>>> device; // [job][call][rank]: the direct path
    std::vector<std::vector<per_rank<T>>> host;   // [job][call][rank]: reducer<> in host memory
    std::vector<std::uint32_t> chosen;            // [job]: the host plan's algorithm (automatic: its choice)
};

// Variant v on n ranks: every job's reducer on the direct path (device_path::direct asked
// for on every rank) and on the host path (reducer<> with the same reducer options), each
// called once per call of its inputs. One group per path runs all the jobs in turn: groups
// and their threads cost more than these small reductions.
template <class H, class T>
adasum_run<T> run_adasum(int n, const variant& v, const std::vector<job<T>>& jobs)
{
    adasum_run<T> res;
    for (const job<T>& j : jobs) {
        res.device.push_back(j.sets);
        res.host.push_back(j.sets);
    }
    res.chosen.assign(jobs.size(), 0);
    with_algorithm<false>(v, [&](auto algorithm) {
        using Algorithm = decltype(algorithm);
        using space = typename H::space_type;
        device_cases::device_run run{std::vector<gradsync::device_path>(std::size_t(n)),
                                     std::vector<gradsync_test::outcome>(std::size_t(n))};
        {
            const auto group = H::make_group(n);
            try {
                group->run([&](local_communicator& comm) {
                    const std::size_t r = std::size_t(comm.rank());
                    gradsync_test::record(run.outcomes[r], true, [&] {
                        typename H::context ctx;
                        for (std::size_t j = 0; j < jobs.size(); ++j) {
                            gradsync::device_reducer<T, local_communicator, gradsync::adasum, Algorithm, space> reduce(
                                comm, jobs[j].sets[0][r].size(), std::span<const std::size_t>(jobs[j].layers),
                                algorithm, device_cases::with(gradsync::device_path::direct, jobs[j].segment_bytes));
                            run.path[r] = reduce.path();
                            device_cases::reduce_each<H>(reduce, ctx, res.device[j], r);
                        }
                    });
                });
            } catch (...) {
                // recorded per rank
            }
        }
        res.error = device_cases::outcomes_ok(run);
        if (res.error.empty())
            res.error = device_cases::paths_are(run, {gradsync::device_path::direct});
        if (!res.error.empty())
            return;
        gradsync::local_group group(n);
        const std::string escaped = gradsync_test::run_ranks(group, [&](local_communicator& comm) {
            const std::size_t r = std::size_t(comm.rank());
            for (std::size_t j = 0; j < jobs.size(); ++j) {
                gradsync::reducer<T, local_communicator, gradsync::adasum, Algorithm> reduce(
                    comm, jobs[j].sets[0][r].size(), std::span<const std::size_t>(jobs[j].layers),
                    device_cases::device_choice(algorithm), device_cases::with(gradsync::device_path::direct, jobs[j].segment_bytes).reducer);
                if (r == 0) {
                    if constexpr (std::is_same_v<Algorithm, gradsync::automatic>)
                        res.chosen[j] = reduce.plan().chosen();
                    else
                        res.chosen[j] = Algorithm::code;
                }
                for (per_rank<T>& set : res.host[j])
                    reduce(std::span<T>(set[r]));
            }
        });
        if (!escaped.empty())
            res.error = "the host path threw: " + escaped;
    });
    return res;
}

// "" when call `call` of job j is right: within tolerance of the reference, every rank with
// rank 0's bits, and within twice the tolerance of the host plan's result.
template <class T>
std::string check_call(const variant& v, const job<T>& jb, const adasum_run<T>& res, std::size_t j, std::size_t call)
{
    const per_rank<T>& in = jb.sets[call];
    const std::vector<std::size_t> normalized = adaref::normalize(in[0].size(), jb.layers);
    const std::vector<adaref::vec> g = adaref::widen(in);
    const std::uint32_t chosen = res.chosen[j];
    const double tol = tolerance_of<T>(chosen);
    const std::vector<T>& got = res.device[j][call][0];
    // Either side of A's jump at a zero partial (adasum_reference.hpp): where the rounded
    // reduction lands is chance.
    if (const std::string e = adaref::first_layer_out_of_tolerance_either_side(
            got, g, normalized, order_of(v, chosen, int(in.size())), format_of<T>(), tol);
        !e.empty())
        return std::string("against the ") + ref::algorithm_name(chosen) + " reference: " + e;
    if (const std::string e = device_cases::identical(res.device[j][call]); !e.empty())
        return e;
    const adaref::vec host = adaref::widen(per_rank<T>{res.host[j][call][0]})[0];
    if (const std::string e = adaref::first_layer_out_of_tolerance(got, host, normalized, 2 * tol, g); !e.empty())
        return "against the host plan: " + e;
    return "";
}

template <class T>
std::string label(int n, const variant& v, const std::string& what)
{
    return std::string(ref::type_name<T>()) + ", N " + std::to_string(n) + ", " + describe(v) + ", " + what + ": ";
}

// Joins failures, keeping the first few (one broken kernel fails most of a matrix).
inline void note(std::string& all, std::size_t& failures, const std::string& e)
{
    if (e.empty())
        return;
    if (++failures <= 8)
        all += (all.empty() ? "" : "\n") + e;
    else if (failures == 9)
        all += "\n(more failures left out)";
}

// ---------------------------------------------------------------------------------------
// The matrix: every algorithm, layouts with empty, one-element and long layers.

// The layouts for n ranks, with `calls` sets of normal inputs each. segment_bytes: the small
// pipeline segment of the first layouts, which then cross segments; the last two use the
// device default (64 MiB, one segment).
template <class T>
std::vector<job<T>> matrix_jobs(int n, std::size_t segment_bytes, bool full, std::size_t calls)
{
    const std::size_t segment = segment_bytes / sizeof(T);
    // Over two segments: the halving cuts (count/2, count/4, ...) and the ring's blocks
    // (count/N) fall inside it, so its triples are summed over parts on several ranks.
    const std::size_t big = 2 * segment + 77;
    std::vector<job<T>> jobs;
    jobs.push_back({"mixed layers, one of 2 segments + 77 elements", {0, 1, 5, 0, 1, 300, big, 2, 0, std::size_t(n) + 3},
                    segment_bytes, {}});
    std::vector<std::size_t> many;
    for (std::size_t i = 0; i < 23; ++i)
        many.push_back(i * 7 % 13); // 0..12: empty and one-element layers, more layers than ranks
    jobs.push_back({"23 small layers", many, segment_bytes, {}});
    if (full) {
        jobs.push_back({"two elements in three layers (fewer elements than ranks)", {1, 0, 1}, segment_bytes, {}});
        jobs.push_back({"no elements (two empty layers)", {0, 0}, segment_bytes, {}});
        jobs.push_back({"1000 elements, no layout given (one layer), default segments", {}, std::size_t(64) << 20, {}});
        jobs.push_back({"a layer of 3001 elements, default segments", {3001, 0, 1, 999}, std::size_t(64) << 20, {}});
    }
    for (std::size_t c = 0; c < jobs.size(); ++c) {
        const std::size_t count = jobs[c].layers.empty() ? 1000 : total(jobs[c].layers);
        jobs[c].sets.resize(calls);
        for (std::size_t call = 0; call < calls; ++call)
            for (int r = 0; r < n; ++r)
                jobs[c].sets[call].push_back(
                    adaref::normal_data<T>(ref::mix(std::uint64_t(n) * 7919 + c * 131 + call), r, count));
    }
    return jobs;
}

// Every algorithm's variants for n ranks; `full` adds automatic{} and every hierarchical k.
inline std::vector<variant> matrix_variants(int n, bool full)
{
    std::vector<variant> v{{.a = alg::recursive_halving},
                           {.a = alg::recursive_doubling},
                           {.a = alg::ring},
                           {.a = alg::automatic, .small_thresholds = true}};
    if (full) {
        v.push_back({.a = alg::automatic});
        for (int k : {1, 2, 4})
            if (n % k == 0)
                for (bool node_sum : {false, true})
                    v.push_back({.a = alg::hierarchical, .k = k, .node_sum = node_sum});
    } else {
        v.push_back({.a = alg::hierarchical, .k = n % 2 == 0 ? 2 : 1});
        v.push_back({.a = alg::hierarchical, .k = n % 4 == 0 ? 4 : 1, .node_sum = true});
    }
    return v;
}

// The matrix for one type over n in ns: for n <= full_up_to every variant, every layout and
// two calls of each reducer (different data); above, fewer variants, two layouts, one call.
template <class H, class T>
std::string matrix(const std::vector<int>& ns, int full_up_to, std::size_t segment_bytes)
{
    std::string all;
    std::size_t failures = 0;
    for (int n : ns) {
        const bool full = n <= full_up_to;
        const std::vector<job<T>> jobs = matrix_jobs<T>(n, segment_bytes, full, full ? 2 : 1);
        for (const variant& v : matrix_variants(n, full)) {
            const adasum_run<T> res = run_adasum<H, T>(n, v, jobs);
            if (!res.error.empty()) {
                note(all, failures, label<T>(n, v, "running the layouts") + res.error);
                continue;
            }
            for (std::size_t j = 0; j < jobs.size(); ++j)
                for (std::size_t call = 0; call < jobs[j].sets.size(); ++call)
                    if (const std::string e = check_call<T>(v, jobs[j], res, j, call); !e.empty()) {
                        note(all, failures, label<T>(n, v, jobs[j].name) + "call " + std::to_string(call + 1) + ", " + e);
                        break;
                    }
        }
    }
    return all;
}

// Sum or Average over hierarchical{k} on the direct path (device_cases::elementwise_case):
// integer data exact, random data the host bits, every rank alike.
template <class H, class T>
std::string hierarchical_elementwise(const std::vector<int>& ns, const std::vector<std::size_t>& counts,
                                     std::size_t segment_bytes)
{
    std::string all;
    std::size_t failures = 0;
    for (int n : ns)
        for (int k : {1, 2, 4, 0}) // 0: the communicator's (local_group: one node of n ranks)
            if (k == 0 || n % k == 0)
                for (std::size_t count : counts) {
                    const gradsync::hierarchical tag{.ranks_per_node = k};
                    const std::string where = std::string(ref::type_name<T>()) + ", ranks_per_node " +
                        std::to_string(k) + ", ";
                    const std::vector<gradsync::device_path> direct{gradsync::device_path::direct};
                    if (const std::string e = device_cases::elementwise_case<H, T, gradsync::sum, gradsync::hierarchical>(
                            n, count, direct, segment_bytes, tag);
                        !e.empty())
                        note(all, failures, where + "sum, " + e);
                    if (const std::string e =
                            device_cases::elementwise_case<H, T, gradsync::average, gradsync::hierarchical>(
                                n, count, direct, segment_bytes, tag);
                        !e.empty())
                        note(all, failures, where + "average, " + e);
                }
    return all;
}

// ---------------------------------------------------------------------------------------
// Horovod's scenarios with realistic data, on 4 KiB segments.

// Layers with an empty, one-element and three-element layer, long layers that cross
// segments and cuts, and a last one long enough for 16 orthogonal vectors.
inline const std::vector<std::size_t>& scenario_layers()
{
    static const std::vector<std::size_t> layers{0, 1, 3, 300, 1500, 0, 77};
    return layers;
}

// make(n, r) is rank r's input; check(ctx, inputs, rank 0's result) returns "" or a
// failure, after the reference, the ranks' agreement and the host plan are checked. Every
// n of ns, every scenario variant.
template <class H, class T, class Make, class Check>
std::string scenario(const std::vector<int>& ns, Make make, Check check)
{
    std::string all;
    std::size_t failures = 0;
    const std::vector<std::size_t>& layers = scenario_layers();
    for (int n : ns) {
        std::vector<job<T>> jobs{{"scenario", layers, 4096, std::vector<per_rank<T>>(1)}};
        for (int r = 0; r < n; ++r)
            jobs[0].sets[0].push_back(make(n, r));
        for (const variant& v : scenario_variants(n)) {
            const adasum_run<T> res = run_adasum<H, T>(n, v, jobs);
            std::string e = res.error;
            if (e.empty())
                e = check_call<T>(v, jobs[0], res, 0, 0);
            if (e.empty())
                e = check(scenario_context{n, v, res.chosen[0], layers}, jobs[0].sets[0], res.device[0][0][0]);
            if (!e.empty())
                note(all, failures, label<T>(n, v, "scenario") + e);
        }
    }
    return all;
}

// Positions [o, o + n) of each layer, in order.
struct layer_range {
    std::size_t offset, size;
};

inline std::vector<layer_range> ranges(const std::vector<std::size_t>& layers)
{
    std::vector<layer_range> out;
    std::size_t o = 0;
    for (std::size_t s : layers) {
        out.push_back({o, s});
        o += s;
    }
    return out;
}

// "" when every layer of got is within tol of want (double), in adaref's relative norm.
template <class T>
std::string layer_near(const std::vector<T>& got, const adaref::vec& want, const std::vector<std::size_t>& layers,
                       double tol, const std::string& what)
{
    const std::string e = adaref::first_layer_out_of_tolerance(got, want, layers, tol);
    return e.empty() ? "" : what + ": " + e;
}

// Orthogonal gradients from a QR factorisation: per layer of length m, n random vectors in
// double made orthonormal by modified Gram-Schmidt (twice, so that they are orthogonal to
// double precision), the first min(m, n) scaled by magnitudes from 1/2 to 4, the others zero
// (which is orthogonal too); then rounded to T. Adasum of orthogonal vectors is their sum
// (over k for hierarchical{average}: node vectors are averages of orthogonal vectors, still
// orthogonal across nodes).
template <class T>
per_rank<T> orthogonal_inputs(int n, std::uint64_t seed)
{
    const std::vector<std::size_t>& layers = scenario_layers();
    per_rank<T> out(std::size_t(n), std::vector<T>(total(layers)));
    for (const layer_range& l : ranges(layers)) {
        const std::size_t m = l.size, vectors = std::min(m, std::size_t(n));
        std::vector<adaref::vec> q;
        for (std::size_t r = 0; r < vectors; ++r) {
            adaref::vec x(m);
            for (std::size_t i = 0; i < m; ++i)
                x[i] = adaref::normal(seed + l.offset, int(r), i);
            for (int pass = 0; pass < 2; ++pass)
                for (const adaref::vec& p : q) {
                    double d = 0;
                    for (std::size_t i = 0; i < m; ++i)
                        d += p[i] * x[i];
                    for (std::size_t i = 0; i < m; ++i)
                        x[i] -= d * p[i];
                }
            double norm = 0;
            for (double xi : x)
                norm += xi * xi;
            norm = std::sqrt(norm);
            for (double& xi : x)
                xi /= norm;
            q.push_back(x);
        }
        for (std::size_t r = 0; r < vectors; ++r) {
            const double magnitude = 0.5 * double(1 + (r * 5) % 8); // 1/2 .. 4
            for (std::size_t i = 0; i < m; ++i)
                out[r][l.offset + i] = T(magnitude * q[r][i]);
        }
    }
    return out;
}

template <class H, class T>
std::string orthogonal(const std::vector<int>& ns)
{
    return scenario<H, T>(
        ns, [](int n, int r) { return orthogonal_inputs<T>(n, 101)[std::size_t(r)]; },
        [](const scenario_context& ctx, const per_rank<T>& in, const std::vector<T>& got) {
            const bool averaged = ctx.v.a == alg::hierarchical && !ctx.v.node_sum;
            adaref::vec sum(got.size(), 0.0);
            for (const auto& g : in)
                for (std::size_t i = 0; i < sum.size(); ++i)
                    sum[i] += double(g[i]);
            if (averaged)
                for (double& s : sum)
                    s /= double(resolved_k(ctx.v, ctx.n));
            return layer_near(got, sum, ctx.layers, tolerance_of<T>(ctx.chosen),
                              averaged ? "the sum over the node size" : "the sum");
        });
}

// Parallel gradients g_r = c_r v, c_r from 1/2 to 2: A(a, c a) = (1 + c)/2 a, the mean, so
// any power-of-two tree of them (over nodes: hierarchical) gives the mean of the c_r times
// v, times k for node sums; N = 2 (also the ring, a chain of one combine) as well. Other N
// weigh the ranks unequally (checked against the reference only).
template <class H, class T>
std::string parallel(const std::vector<int>& ns)
{
    const std::size_t count = total(scenario_layers());
    auto c = [](int r) { return 0.5 + 0.25 * double(r % 7); };
    return scenario<H, T>(
        ns,
        [&](int, int r) {
            std::vector<T> g(count);
            for (std::size_t i = 0; i < count; ++i)
                g[i] = T(c(r) * double(T(adaref::normal(202, 0, i))));
            return g;
        },
        [&](const scenario_context& ctx, const per_rank<T>& in, const std::vector<T>& got) -> std::string {
            const int nodes = ctx.v.a == alg::hierarchical ? ctx.n / resolved_k(ctx.v, ctx.n) : ctx.n;
            const bool tree = ctx.chosen != gradsync::ring::code || ctx.v.a == alg::hierarchical;
            if (!(power_of_two(nodes) && (tree || nodes == 2)))
                return "";
            double mean = 0;
            for (int r = 0; r < ctx.n; ++r)
                mean += c(r) / ctx.n;
            adaref::vec want(count);
            for (std::size_t i = 0; i < count; ++i)
                want[i] = node_factor(ctx.v, ctx.n) * mean * double(in[0][i]) / c(0);
            return layer_near(got, want, ctx.layers, tolerance_of<T>(ctx.chosen), "the mean");
        });
}

// Identical gradients on every rank: A(v, v) = v exactly (the triple's a.b and a.a are the
// same sums, so both coefficients are 1/2); nodes of two give v (average) or 2v (sum)
// exactly. Nodes of more ranks may round (3v is not always representable) and are checked
// against the reference only.
template <class H, class T>
std::string identical(const std::vector<int>& ns)
{
    return scenario<H, T>(
        ns, [](int, int) { return adaref::normal_data<T>(203, 0, total(scenario_layers())); },
        [](const scenario_context& ctx, const per_rank<T>& in, const std::vector<T>& got) -> std::string {
            if (ctx.v.a == alg::hierarchical && resolved_k(ctx.v, ctx.n) > 2)
                return "";
            const int factor = node_factor(ctx.v, ctx.n);
            std::vector<T> want(got.size());
            for (std::size_t i = 0; i < want.size(); ++i)
                want[i] = T(double(in[0][i]) * factor);
            const std::string e = ref::first_difference(got, want);
            return e.empty() ? "" : "A(v, v) = v exactly: " + e;
        });
}

// Tiny or huge inputs (normal numbers times scale): finite, within tolerance, and neither
// flushed to zero nor blown up.
template <class H, class T>
std::string magnitude(const std::vector<int>& ns, double scale)
{
    const std::string e = scenario<H, T>(
        ns, [scale](int, int r) { return adaref::normal_data<T>(303, r, total(scenario_layers()), scale); },
        [scale](const scenario_context&, const per_rank<T>&, const std::vector<T>& got) -> std::string {
            double top = 0;
            for (std::size_t i = 0; i < got.size(); ++i) {
                if (!std::isfinite(double(got[i])))
                    return "element " + std::to_string(i) + " is " + std::to_string(double(got[i]));
                top = std::max(top, std::fabs(double(got[i])));
            }
            if (!(top > scale / 10 && top < 100 * scale))
                return "the largest magnitude is " + std::to_string(top);
            return "";
        });
    char shown[32];
    std::snprintf(shown, sizeof shown, "%g", scale);
    return e.empty() ? "" : std::string("inputs of magnitude ") + shown + ": " + e;
}

// Zero layers: rank r's layer l is zero when (r + l) % 3 == 0, and layer 6 is zero on every
// rank (its result must be zero). A(x, 0) = x; the reference checks the rest.
template <class H, class T>
std::string zero_layers(const std::vector<int>& ns)
{
    const std::vector<layer_range> at = ranges(scenario_layers());
    return scenario<H, T>(
        ns,
        [&](int, int r) {
            std::vector<T> g = adaref::normal_data<T>(404, r, total(scenario_layers()));
            for (std::size_t l = 0; l < at.size(); ++l)
                if ((std::size_t(r) + l) % 3 == 0 || l == 6)
                    std::fill(g.begin() + std::ptrdiff_t(at[l].offset),
                              g.begin() + std::ptrdiff_t(at[l].offset + at[l].size), T(0));
            return g;
        },
        [&](const scenario_context&, const per_rank<T>&, const std::vector<T>& got) -> std::string {
            for (std::size_t i = at[6].offset; i < at[6].offset + at[6].size; ++i)
                if (!(double(got[i]) == 0))
                    return "the layer that is zero everywhere has " + std::to_string(double(got[i])) +
                        " at element " + std::to_string(i);
            return "";
        });
}

// Every rank but the middle one zero: that rank's vector comes back exactly (A(x, 0) = x:
// a.b = 0 and b.b = 0, so the coefficients are 1 and 1), over k for hierarchical{average}
// (exact for a power-of-two k).
template <class H, class T>
std::string one_nonzero(const std::vector<int>& ns)
{
    return scenario<H, T>(
        ns,
        [](int n, int r) {
            std::vector<T> g = adaref::normal_data<T>(405, r, total(scenario_layers()));
            if (r != n / 2)
                std::fill(g.begin(), g.end(), T(0));
            return g;
        },
        [](const scenario_context& ctx, const per_rank<T>& in, const std::vector<T>& got) -> std::string {
            const int div = ctx.v.a == alg::hierarchical && !ctx.v.node_sum ? resolved_k(ctx.v, ctx.n) : 1;
            if (!power_of_two(div))
                return "";
            std::vector<T> want(got.size());
            for (std::size_t i = 0; i < want.size(); ++i)
                want[i] = T(double(in[std::size_t(ctx.n / 2)][i]) / div);
            const std::string e = ref::first_difference(got, want);
            return e.empty() ? "" : "A(x, 0) = x exactly: " + e;
        });
}

// A NaN in one rank's input (the last rank's, inside layer 4, and rank 0's one-element layer
// 1): the reference says where the result is NaN (the whole layer once a vector with the
// NaN meets one without it; only that element where no combine happens, as in
// hierarchical with one node); the other layers stay finite; every rank ends with the same
// bits and the run returns promptly (scenario()).
template <class H, class T>
std::string nan_input(const std::vector<int>& ns)
{
    const std::vector<layer_range> at = ranges(scenario_layers());
    const std::size_t poisoned = at[4].offset + 700;
    return scenario<H, T>(
        ns,
        [&](int n, int r) {
            std::vector<T> g = adaref::normal_data<T>(505, r, total(scenario_layers()));
            if (r == n - 1)
                g[poisoned] = T(std::numeric_limits<float>::quiet_NaN());
            if (r == 0)
                g[at[1].offset] = T(-std::bit_cast<float>(0x7fd5a000u)); // negative, with a payload
            return g;
        },
        [&](const scenario_context& ctx, const per_rank<T>&, const std::vector<T>& got) -> std::string {
            const bool combined = ctx.n > 1 && !(ctx.v.a == alg::hierarchical && resolved_k(ctx.v, ctx.n) == ctx.n);
            for (std::size_t l : {std::size_t(1), std::size_t(4)})
                for (std::size_t i = at[l].offset; i < at[l].offset + at[l].size; ++i)
                    if ((combined || i == poisoned || l == 1) && !std::isnan(double(got[i])))
                        return "element " + std::to_string(i) + " of layer " + std::to_string(l) + " is " +
                            std::to_string(double(got[i])) + ", not NaN";
            for (std::size_t l : {std::size_t(2), std::size_t(3), std::size_t(6)})
                for (std::size_t i = at[l].offset; i < at[l].offset + at[l].size; ++i)
                    if (!std::isfinite(double(got[i])))
                        return "element " + std::to_string(i) + " of layer " + std::to_string(l) + " is " +
                            std::to_string(double(got[i]));
            return "";
        });
}

} // namespace adasum_cases
