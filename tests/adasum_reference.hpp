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
//   Where a reduction passes near A's jump at a zero operand: the results on either side of
//   it ("Either side of A's jump", below).
#pragma once

#include <algorithm>
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

// [a.b, a.a, b.b] over n elements, in double, in element order.
struct dots {
    double d = 0, na = 0, nb = 0;
};
inline dots dots_of(const double* a, const double* b, std::size_t n)
{
    dots t;
    for (std::size_t i = 0; i < n; ++i) {
        t.d += a[i] * b[i];
        t.na += a[i] * a[i];
        t.nb += b[i] * b[i];
    }
    return t;
}

// out[o, o+n) = A(a[o, o+n), b[o, o+n)); out may alias a or b.
inline void combine_range(double* out, const double* a, const double* b, std::size_t n)
{
    const auto [d, na, nb] = dots_of(a, b, n);
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

// The recursive-halving tree's order (also recursive doubling's) over leaves 0..N-1, with
// MPICH folding: the first 2(N - P) leaves combine in pairs, leaving P = 2^floor(log2 N);
// join(out, x, y) puts one combine's result in out, which may be x. For whole vectors
// (halving_tree) and for one layer's results on either side of A's jump (layer_results).
template <class V, class Join>
V halving_order(const std::vector<V>& leaves, Join join)
{
    const std::size_t n = leaves.size();
    if (n == 0)
        throw std::logic_error("adaref::halving_tree: no ranks");
    std::size_t p = 1;
    while (p * 2 <= n)
        p *= 2;
    const std::size_t rem = n - p;
    std::vector<V> folded(rem);
    for (std::size_t i = 0; i < rem; ++i)
        join(folded[i], leaves[2 * i], leaves[2 * i + 1]);
    auto leaf = [&](std::size_t i) -> const V& { return i < rem ? folded[i] : leaves[i + rem]; };
    if (p == 1)
        return leaf(0);
    // h[j]: the subtree over leaves 2j and 2j + 1, then larger subtrees in place.
    std::vector<V> h(p / 2);
    for (std::size_t j = 0; j < p / 2; ++j)
        join(h[j], leaf(2 * j), leaf(2 * j + 1));
    for (std::size_t dist = 1; dist < p / 2; dist *= 2)
        for (std::size_t j = 0; j < p / 2; j += 2 * dist)
            join(h[j], h[j], h[j + dist]);
    return std::move(h[0]);
}

// The recursive-halving tree over g(0..N-1).
inline vec halving_tree(const std::vector<vec>& g, const std::vector<std::size_t>& layers)
{
    return halving_order(g, [&](vec& out, const vec& a, const vec& b) { combine_into(out, a, b, layers); });
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

// hierarchical{k}'s node vectors: the average (or the sum) of k consecutive ranks.
inline std::vector<vec> node_vectors(const std::vector<vec>& g, std::size_t k, bool sum)
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
    return nodes;
}

// hierarchical{k}: node vectors (average or sum of k consecutive ranks), then the tree.
inline vec hierarchical(const std::vector<vec>& g, const std::vector<std::size_t>& layers, std::size_t k, bool sum)
{
    return halving_tree(node_vectors(g, k, sum), layers);
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

// What first_layer_out_of_tolerance says of layer j ([o, o + n)) with error e: where it is,
// the error and its first elements, got against want.
template <class T>
std::string layer_failure(std::size_t j, std::size_t n, std::size_t o, double e, double tol, const T* got,
                          const double* want)
{
    std::string where = "layer " + std::to_string(j) + " (" + std::to_string(n) + " elements at offset " +
        std::to_string(o) + "): relative error " + std::to_string(e) + " > " + std::to_string(tol);
    for (std::size_t i = 0; i < n && i < 3; ++i)
        where += "; [" + std::to_string(i) + "] got " + std::to_string(double(got[i])) + " want " +
            std::to_string(want[i]);
    return where;
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
        if (!(e <= tol))
            return layer_failure(j, layers[j], o, e, tol, got.data() + o, want.data() + o);
        o += layers[j];
    }
    return "";
}

// ---------------------------------------------------------------------------------------
// Either side of A's jump at a zero operand.
//
// A is discontinuous where an operand becomes zero: A(x, 0) = x, but as b -> 0 the term
// (a.b)/(2 b.b) b does not vanish (on a one-element layer A(a, b) = (a + b)/2 for every
// b != 0, and a for b = 0), and near zero it depends on b's direction alone. A partial
// result (an earlier combine's output, or a node's average or sum) that nearly cancels is
// mostly rounding: it may be exactly zero in the element type while the reference keeps it
// small and nonzero, or the other way round, and where both are nonzero its direction is
// the rounding's. The next combine then takes the other branch, or another direction, and
// the layer's result moves by up to half its size with nothing wrong. bf16's 7 fraction
// bits make that common on short layers, so that whether a check of the rounded result
// against the reference passed came down to its seeds.
//
// So a layer whose reduction passes near the jump is checked against every result the
// reference gives on either side of it. Near: a partial within `near` of zero (the error
// budget times the size of the inputs, as far as the rounded reduction may stray) or with
// its squared norm below the guard. Each such partial is taken as it is and also as zero;
// below the guard, also with the formula's coefficient; exactly zero on a one-element
// layer, also as the formula's limit, A(0+, b) = b/2. And the whole layer is evaluated
// once more as the element type rounds (format: every partial rounded to it, node sums in
// rank order), with the same choices, since the partials' directions are the rounding's.
// Layers that pass nowhere near the jump have the one reference result, as before.
// Inputs are never branched on: both sides read the same values.

// A floating-point format: std::numeric_limits' digits and min_exponent.
struct format {
    int digits = 53;
    int min_exponent = -1021;
};

// x rounded to nearest, ties to even, in format f (subnormals included; no overflow).
inline double round_to(double x, const format& f)
{
    if (x == 0 || !std::isfinite(x))
        return x;
    int e = 0;
    std::frexp(x, &e); // x = m 2^e, 1/2 <= |m| < 1
    const int quantum = std::max(e, f.min_exponent) - f.digits;
    return std::ldexp(std::nearbyint(std::ldexp(x, -quantum)), quantum);
}

// How an operand enters A: own, the reference's branch (the formula where its squared norm
// is at least the guard, else 1); zero, taken as zero; formula, the formula even below the
// guard (at zero: its limit, on one element).
enum class side { own, zero, formula };

inline vec combine_sides(const vec& a, side sa, const vec& b, side sb)
{
    const std::size_t n = a.size();
    vec out(n);
    if (sa == side::own && sb == side::own) {
        combine_range(out.data(), a.data(), b.data(), n);
        return out;
    }
    const vec x = sa == side::zero ? vec(n, 0.0) : a, y = sb == side::zero ? vec(n, 0.0) : b;
    const auto [d, na, nb] = dots_of(x.data(), y.data(), n);
    const double guard = std::sqrt(DBL_MIN);
    // c v[i], or the formula's limit at v = 0 on one element: -(u.w)/2 u with u = +-1.
    auto term = [&](const vec& v, double norm, side s, const vec& w, std::size_t i) {
        if (s == side::formula && norm == 0)
            return -w[i] / 2;
        const double c = s == side::formula || (s != side::zero && norm >= guard) ? 1 - d / (2 * norm) : 1.0;
        return c * v[i];
    };
    for (std::size_t i = 0; i < n; ++i)
        out[i] = term(x, na, sa, y, i) + term(y, nb, sb, x, i);
    return out;
}

// The sides an operand may be on: a partial near the jump on both.
inline std::vector<side> sides_of(const vec& x, bool partial, double near)
{
    if (!partial)
        return {side::own};
    double squared = 0;
    for (double v : x)
        squared += v * v;
    if (!(squared < INFINITY)) // NaN or Inf: no jump to be on either side of
        return {side::own};
    if (squared < std::sqrt(DBL_MIN) && (squared > 0 || x.size() == 1))
        return {side::own, side::formula};
    if (squared == 0)
        return {side::own};
    if (std::sqrt(squared) <= near)
        return {side::own, side::zero};
    return {side::own};
}

// One node of a layer's order: the results it may hold (the reference's own first), whether
// it is a partial (which the element type rounds) and whether its reduction passed near
// the jump.
struct layer_node {
    std::vector<vec> may_be;
    bool partial = false;
    bool near_jump = false;
};

// A(a, b) for every choice of sides, each result rounded to `rounded` where given; at most
// cap results, no two alike.
inline layer_node join_either_side(const layer_node& a, const layer_node& b, double near, const format* rounded,
                                   std::size_t cap)
{
    layer_node out{{}, true, a.near_jump || b.near_jump};
    for (const vec& x : a.may_be)
        for (const vec& y : b.may_be) {
            const std::vector<side> sx = sides_of(x, a.partial, near), sy = sides_of(y, b.partial, near);
            out.near_jump = out.near_jump || sx.size() > 1 || sy.size() > 1;
            for (side u : sx)
                for (side w : sy) {
                    if (out.may_be.size() == cap)
                        return out;
                    vec r = combine_sides(x, u, y, w);
                    if (rounded)
                        for (double& e : r)
                            e = round_to(e, *rounded);
                    if (std::find(out.may_be.begin(), out.may_be.end(), r) == out.may_be.end())
                        out.may_be.push_back(std::move(r));
                }
        }
    return out;
}

// The order a result was reduced in: the tree (recursive halving or doubling), the ring's
// chain, or hierarchical{k}'s node vectors (average, or sum) and then the tree.
struct order {
    enum kind_type { tree, chain, nodes } kind = tree;
    std::size_t k = 1;
    bool sum = false;
};

// Layer j ([o, o + n)) of g reduced in order `by`: the reference's own result first
// (halving_tree's, ring_chain's or hierarchical's bits); where the reduction passes near
// the jump, also those with each partial on either side of it, in double and as format t
// rounds; at most cap results of each evaluation, no two alike.
inline std::vector<vec> layer_results(const std::vector<vec>& g, const order& by, std::size_t j, std::size_t o,
                                      std::size_t n, double near, const format& t, std::size_t cap = 256)
{
    if (g.empty())
        throw std::logic_error("adaref::layer_results: no ranks");
    std::vector<vec> slices;
    for (const vec& v : g)
        slices.emplace_back(v.begin() + std::ptrdiff_t(o), v.begin() + std::ptrdiff_t(o + n));
    auto evaluate = [&](const format* rounded) {
        std::vector<vec> leaves = slices;
        const bool nodes = by.kind == order::nodes;
        if (nodes && rounded) { // each node's ranks added in rank order, every sum rounded
            std::vector<vec> summed;
            for (std::size_t m = 0; m * by.k < leaves.size(); ++m) {
                vec v = leaves[m * by.k];
                for (std::size_t r = m * by.k + 1; r < (m + 1) * by.k; ++r)
                    for (std::size_t i = 0; i < n; ++i)
                        v[i] = round_to(v[i] + leaves[r][i], *rounded);
                if (!by.sum)
                    for (double& x : v)
                        x = round_to(x / double(by.k), *rounded);
                summed.push_back(std::move(v));
            }
            leaves = std::move(summed);
        } else if (nodes) {
            leaves = node_vectors(leaves, by.k, by.sum);
        }
        std::vector<layer_node> start;
        for (vec& v : leaves)
            start.push_back({{std::move(v)}, nodes && by.k > 1, false});
        if (by.kind == order::chain) { // the ring's: from rank j mod N on
            layer_node acc = start[j % start.size()];
            for (std::size_t r = 1; r < start.size(); ++r)
                acc = join_either_side(acc, start[(j + r) % start.size()], near, rounded, cap);
            return acc;
        }
        return halving_order(start, [&](layer_node& out, const layer_node& a, const layer_node& b) {
            out = join_either_side(a, b, near, rounded, cap);
        });
    };
    layer_node in_double = evaluate(nullptr);
    if (!in_double.near_jump)
        return std::move(in_double.may_be);
    for (vec& r : evaluate(&t).may_be)
        if (std::find(in_double.may_be.begin(), in_double.may_be.end(), r) == in_double.may_be.end())
            in_double.may_be.push_back(std::move(r));
    return std::move(in_double.may_be);
}

// first_layer_out_of_tolerance with each layer against every result of layer_results (t:
// the element type's format; near the jump: within the error budget of zero): "" when each
// layer is within tol of one of them (the denominator floored by the inputs' size), else
// the first layer within none, shown against the reference's own result.
template <class T>
std::string first_layer_out_of_tolerance_either_side(const std::vector<T>& got, const std::vector<vec>& g,
                                                     const std::vector<std::size_t>& layers, const order& by,
                                                     const format& t, double tol)
{
    if (g.empty())
        return "no inputs";
    if (got.size() != g[0].size())
        return "size " + std::to_string(got.size()) + " != " + std::to_string(g[0].size());
    std::size_t o = 0;
    for (std::size_t j = 0; j < layers.size(); ++j) {
        const double floor = input_scale(g, o, layers[j]);
        // How far from zero a partial may be and still have rounded to zero: the budget
        // times the size of the inputs (of a node sum's k of them).
        const double near = tol * floor * double(by.kind == order::nodes && by.sum ? by.k : 1);
        const std::vector<vec> may_be = layer_results(g, by, j, o, layers[j], near, t);
        bool within = false;
        for (std::size_t c = 0; c < may_be.size() && !within; ++c)
            within = layer_relative_error(got.data() + o, may_be[c].data(), layers[j], floor) <= tol;
        if (!within) {
            const double e = layer_relative_error(got.data() + o, may_be[0].data(), layers[j], floor);
            std::string failure = layer_failure(j, layers[j], o, e, tol, got.data() + o, may_be[0].data());
            if (may_be.size() > 1)
                failure += " (nor within tolerance of the " + std::to_string(may_be.size() - 1) +
                    " results across A's jump at a zero partial)";
            return failure;
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
