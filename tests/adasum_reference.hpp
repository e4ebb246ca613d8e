// Independent Adasum reference for the gradsync tests, written from the rules of
// docs/semantics.md ("Adasum") alone: plain double-precision loops, nothing taken from the
// library (not even the gradsync::half type; callers widen their rounded inputs to double
// first). Keep it that way: a reference that calls the code under test cannot catch that
// code's mistakes.
//
//   A(a, b) per layer: d = a.b, na = a.a, nb = b.b; ca = 1 - d/(2 na) if na >= sqrt(DBL_MIN)
//   else 1, cb likewise; A = ca a + cb b.
//   recursive halving / recursive doubling (same tree): N = P + rem, P the largest power of
//   two <= N; h(i) = A(g(2i), g(2i+1)) for i < rem, h(i) = g(i + rem) otherwise; then pairs
//   at distance 1, 2, 4, ... over h(0..P-1): A(A(h0, h1), A(h2, h3)), ...
//   ring: layer j is the chain A(...A(A(g(s), g(s+1)), g(s+2))..., g(s+N-1)), s = j mod N.
//   hierarchical{k}: node m's vector is the average (or the sum) of g(mk .. mk+k-1), then the
//   recursive-halving tree over the node vectors.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace adaref {

using vec = std::vector<double>;

// Layer sizes as the reducer reads them: an empty list is one layer of the whole count.
inline std::vector<std::size_t> normalize(std::size_t count, const std::vector<std::size_t>& layers)
{
    if (layers.empty())
        return {count};
    std::size_t total = 0;
    for (std::size_t s : layers)
        total += s;
    if (total != count)
        throw std::logic_error("adaref: layer sizes do not add up to the count");
    return layers;
}

// out[o, o+n) = A(a[o, o+n), b[o, o+n)); out may alias a or b.
inline void combine_range(double* out, const double* a, const double* b, std::size_t n)
{
    double d = 0, na = 0, nb = 0;
    for (std::size_t i = 0; i < n; ++i) {
        d += a[i] * b[i];
        na += a[i] * a[i];
        nb += b[i] * b[i];
    }
    const double guard = std::sqrt(DBL_MIN);
    const double ca = na >= guard ? 1 - d / (2 * na) : 1.0;
    const double cb = nb >= guard ? 1 - d / (2 * nb) : 1.0;
    for (std::size_t i = 0; i < n; ++i)
        out[i] = ca * a[i] + cb * b[i];
}

// out = A(a, b) per layer of a fused vector; out may be a or b.
inline void combine_into(vec& out, const vec& a, const vec& b, const std::vector<std::size_t>& layers)
{
    if (a.size() != b.size())
        throw std::logic_error("adaref::combine: sizes differ");
    out.resize(a.size());
    std::size_t o = 0;
    for (std::size_t n : layers) {
        combine_range(out.data() + o, a.data() + o, b.data() + o, n);
        o += n;
    }
}

inline vec combine(const vec& a, const vec& b, const std::vector<std::size_t>& layers)
{
    vec out;
    combine_into(out, a, b, layers);
    return out;
}

// The recursive-halving tree (also recursive doubling's) over g(0..N-1), with MPICH folding:
// the first 2(N - P) ranks combine in pairs, leaving P = 2^floor(log2 N) leaves.
inline vec halving_tree(const std::vector<vec>& g, const std::vector<std::size_t>& layers)
{
    const std::size_t n = g.size();
    if (n == 0)
        throw std::logic_error("adaref::halving_tree: no ranks");
    std::size_t p = 1;
    while (p * 2 <= n)
        p *= 2;
    const std::size_t rem = n - p;
    std::vector<vec> folded(rem);
    for (std::size_t i = 0; i < rem; ++i)
        combine_into(folded[i], g[2 * i], g[2 * i + 1], layers);
    auto leaf = [&](std::size_t i) -> const vec& { return i < rem ? folded[i] : g[i + rem]; };
    if (p == 1)
        return leaf(0);
    // h[j]: the subtree over leaves 2j and 2j + 1, then larger subtrees in place.
    std::vector<vec> h(p / 2);
    for (std::size_t j = 0; j < p / 2; ++j)
        combine_into(h[j], leaf(2 * j), leaf(2 * j + 1), layers);
    for (std::size_t dist = 1; dist < p / 2; dist *= 2)
        for (std::size_t j = 0; j < p / 2; j += 2 * dist)
            combine_into(h[j], h[j], h[j + dist], layers);
    return std::move(h[0]);
}

// The ring's chains: layer j starts at rank j mod N.
inline vec ring_chain(const std::vector<vec>& g, const std::vector<std::size_t>& layers)
{
    const std::size_t n = g.size();
    if (n == 0)
        throw std::logic_error("adaref::ring_chain: no ranks");
    vec out(g[0].size());
    std::size_t o = 0;
    for (std::size_t j = 0; j < layers.size(); ++j) {
        const std::size_t len = layers[j], s = j % n;
        vec acc(g[s].begin() + std::ptrdiff_t(o), g[s].begin() + std::ptrdiff_t(o + len));
        for (std::size_t t = 1; t < n; ++t) {
            const vec& next = g[(s + t) % n];
            combine_range(acc.data(), acc.data(), next.data() + o, len);
        }
        for (std::size_t i = 0; i < len; ++i)
            out[o + i] = acc[i];
        o += len;
    }
    return out;
}

// hierarchical{k}: node vectors (average or sum of k consecutive ranks), then the tree.
inline vec hierarchical(const std::vector<vec>& g, const std::vector<std::size_t>& layers, std::size_t k, bool sum)
{
    const std::size_t n = g.size();
    if (k == 0 || n % k != 0)
        throw std::logic_error("adaref::hierarchical: k must divide N");
    std::vector<vec> nodes;
    for (std::size_t m = 0; m < n / k; ++m) {
        vec v(g[0].size(), 0.0);
        for (std::size_t r = m * k; r < (m + 1) * k; ++r)
            for (std::size_t i = 0; i < v.size(); ++i)
                v[i] += g[r][i];
        if (!sum)
            for (double& x : v)
                x /= double(k);
        nodes.push_back(std::move(v));
    }
    return halving_tree(nodes, layers);
}

template <class T>
std::vector<vec> widen(const std::vector<std::vector<T>>& per_rank)
{
    std::vector<vec> out;
    for (const auto& v : per_rank) {
        vec w(v.size());
        for (std::size_t i = 0; i < v.size(); ++i)
            w[i] = double(v[i]);
        out.push_back(std::move(w));
    }
    return out;
}

// Euclidean norm of value(0..n-1), scaled by the largest magnitude so that 1e150 and 1e-150
// inputs neither overflow nor underflow; positions where value is NaN are skipped.
template <class F>
double norm_of(std::size_t n, F value)
{
    double top = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const double x = value(i);
        if (x == x)
            top = std::fmax(top, std::fabs(x));
    }
    if (top == 0 || top == INFINITY)
        return top;
    double s = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const double x = value(i);
        if (x == x)
            s += (x / top) * (x / top);
    }
    return top * std::sqrt(s);
}

// The size of one layer's inputs: the root mean square over ranks of ||g_r|| on [o, o+n).
inline double input_scale(const std::vector<vec>& g, std::size_t o, std::size_t n)
{
    if (g.empty())
        return 0;
    std::vector<double> norms;
    for (const vec& v : g)
        norms.push_back(norm_of(n, [&](std::size_t i) { return v[o + i]; }));
    return norm_of(norms.size(), [&](std::size_t r) { return norms[r]; }) / std::sqrt(double(g.size()));
}

// Relative error of one layer, ||got - want|| / max(||want||, floor), over the positions where
// want is not NaN (0 when got == want, +inf when the denominator is zero and got differs).
// NaN when got and want disagree on where the NaNs are: a NaN must come out exactly where
// IEEE arithmetic in the reference puts one.
//
// The floor: Adasum of inputs that nearly cancel is ill-conditioned (on a one-element layer
// A(a, b) = (a + b)/2), so each rounding of an intermediate to the element type, which is
// relative to the size of the inputs, may be large next to a small result. Measuring
// against max(||want||, size of the inputs) keeps the bound meaningful there; for ordinary
// layers ||want|| is the larger and the floor changes nothing.
template <class T>
double layer_relative_error(const T* got, const double* want, std::size_t n, double floor = 0)
{
    for (std::size_t i = 0; i < n; ++i) {
        const double g = double(got[i]);
        if ((g != g) != (want[i] != want[i]))
            return NAN;
    }
    const double err = norm_of(n, [&](std::size_t i) {
        return want[i] != want[i] ? 0.0 : double(got[i]) == want[i] ? 0.0 : double(got[i]) - want[i];
    });
    if (err == 0)
        return 0;
    const double denominator = std::fmax(norm_of(n, [&](std::size_t i) { return want[i]; }), floor);
    if (denominator == 0 || err == INFINITY || denominator == INFINITY)
        return INFINITY;
    return err / denominator;
}

// "" when every layer's relative error is at most tol, else the first failing layer. With
// the inputs (widened), the denominator has their size as a floor (see above).
template <class T>
std::string first_layer_out_of_tolerance(const std::vector<T>& got, const vec& want,
                                         const std::vector<std::size_t>& layers, double tol,
                                         const std::vector<vec>& inputs = {})
{
    if (got.size() != want.size())
        return "size " + std::to_string(got.size()) + " != " + std::to_string(want.size());
    std::size_t o = 0;
    for (std::size_t j = 0; j < layers.size(); ++j) {
        const double floor = input_scale(inputs, o, layers[j]);
        const double e = layer_relative_error(got.data() + o, want.data() + o, layers[j], floor);
        if (!(e <= tol)) {
            std::string where = "layer " + std::to_string(j) + " (" + std::to_string(layers[j]) +
                " elements at offset " + std::to_string(o) + "): relative error " + std::to_string(e) + " > " +
                std::to_string(tol);
            for (std::size_t i = 0; i < layers[j] && i < 3; ++i)
                where += "; [" + std::to_string(i) + "] got " + std::to_string(double(got[o + i])) + " want " +
                    std::to_string(want[o + i]);
            return where;
        }
        o += layers[j];
    }
    return "";
}

} // namespace adaref

namespace adaref {

// Standard normal number i of `rank` for `seed` (Box-Muller on two splitmix64 draws), a
// deterministic function so every thread and process can regenerate any rank's input.
inline double normal(std::uint64_t seed, int rank, std::size_t i) noexcept
{
    auto draw = [&](std::size_t j) {
        std::uint64_t x = seed * 0x9e3779b97f4a7c15ull + std::uint64_t(rank) * 0xd1b54a32d192ed03ull + j;
        x += 0x9e3779b97f4a7c15ull;
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        return x ^ (x >> 31);
    };
    const double u1 = (double(draw(2 * i) >> 11) + 1) * 0x1.0p-53; // (0, 1]
    const double u2 = double(draw(2 * i + 1) >> 11) * 0x1.0p-53;    // [0, 1)
    return std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

// count normals times `scale`, computed in double and then rounded to T: the rounded values
// are the inputs (the reference is fed them widened back to double).
template <class T>
std::vector<T> normal_data(std::uint64_t seed, int rank, std::size_t count, double scale = 1)
{
    std::vector<T> v(count);
    for (std::size_t i = 0; i < count; ++i)
        v[i] = T(scale * normal(seed, rank, i));
    return v;
}

// The per-layer relative error budget: fp16 8e-3, fp32 2e-5, fp64 1e-12; three times that
// for the ring's chain (N - 1 roundings deep instead of about log2 N). bf16 (`coarse`: 3
// fewer significand bits than fp16) gets fp16's budget in units of roundoff, 6.4e-2.
template <class T>
double tolerance(bool chain, bool coarse = false)
{
    const double base = sizeof(T) == 2 ? (coarse ? 6.4e-2 : 8e-3) : sizeof(T) == 4 ? 2e-5 : 1e-12;
    return chain ? 3 * base : base;
}

} // namespace adaref
