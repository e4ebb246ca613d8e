// The Adasum host kernels (docs/semantics.md: products and sums in double, one rounding to the
// element type) on every code path the CPU can run (dispatched, scalar, AVX2, AVX-512), and
// the coefficient guards of adasum::from:
//  - kernels::triple against a plain double loop (relative 1e-13) for fp16/fp32/fp64, lengths
//    0..40 and 10007 (the 8-wide vector body, the scalar tail and their seam), aligned and not;
//  - kernels::scaled_add bit for bit against out[i] = T(fma(ca, a[i], cb*b[i])) with a
//    correctly rounded double -> T conversion (for fp16 both the compiler's double ->
//    _Float16 and gradsync::detail::double_to_binary16), including values one hair away from
//    a rounding midpoint (where double -> float -> fp16 rounds twice and goes wrong), out
//    aliasing a and out aliasing b, and guard elements around the span;
//  - adasum::from: ca = 1 - d/(2 na) when na >= sqrt(DBL_MIN), else 1 (likewise cb);
//  - adasum::combine_layer's identities A(x, 0) = x, A(0, 0) = 0, A(v, v) = v, A(x, y) = x + y
//    for disjoint supports, bit for bit.
#include <catch2/catch.hpp>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <gradsync/core/types.hpp>
#include <gradsync/kernels/host_adasum.hpp>
#include <gradsync/policy/adasum.hpp>

#include "adasum_reference.hpp"
#include "reference.hpp"

namespace {

using gradsync::half;

std::vector<std::size_t> lengths()
{
    std::vector<std::size_t> n;
    for (std::size_t i = 0; i <= 40; ++i)
        n.push_back(i);
    n.push_back(10007);
    return n;
}

// The kernels' code paths. kernels::triple and kernels::scaled_add pick one at run time (AVX-512
// for fp16, else AVX2+FMA, else scalar); the others are reached through gradsync::kernels::detail so
// that every path the CPU can run is checked, not only the one it prefers (white box: the
// header promises results that never depend on the path).
enum class path { dispatched, scalar, avx2, avx512 };

const char* path_name(path p)
{
    switch (p) {
    case path::dispatched: return "dispatched";
    case path::scalar: return "scalar";
    case path::avx2: return "AVX2";
    case path::avx512: return "AVX-512";
    }
    return "?";
}

template <class T>
std::vector<path> runnable_paths()
{
    std::vector<path> p{path::dispatched, path::scalar};
#if defined(GRADSYNC_HAVE_F16C_DISPATCH)
    if (gradsync::kernels::detail::cpu_has_avx2())
        p.push_back(path::avx2);
    if (std::is_same_v<T, gradsync::half> && gradsync::kernels::detail::cpu_has_avx512())
        p.push_back(path::avx512);
#endif
    return p;
}

template <class T>
gradsync::kernels::dot_triple triple_on(path p, std::span<const T> a, std::span<const T> b)
{
    namespace k = gradsync::kernels;
    switch (p) {
    case path::scalar: {
        k::dot_triple t;
        k::detail::triple_tail(a.data(), b.data(), 0, a.size(), t);
        return t;
    }
#if defined(GRADSYNC_HAVE_F16C_DISPATCH)
    case path::avx2: return k::detail::triple_simd(a.data(), b.data(), a.size());
    case path::avx512:
        if constexpr (std::is_same_v<T, gradsync::half>)
            return k::detail::triple_simd512(a.data(), b.data(), a.size());
        [[fallthrough]];
#endif
    default: return k::triple<T>(a, b);
    }
}

template <class T>
void scaled_add_on(path p, std::span<T> out, double ca, std::span<const T> a, double cb, std::span<const T> b)
{
    namespace k = gradsync::kernels;
    switch (p) {
    case path::scalar: k::detail::scaled_add_tail(out.data(), ca, a.data(), cb, b.data(), 0, out.size()); return;
#if defined(GRADSYNC_HAVE_F16C_DISPATCH)
    case path::avx2: k::detail::scaled_add_simd(out.data(), ca, a.data(), cb, b.data(), out.size()); return;
    case path::avx512:
        if constexpr (std::is_same_v<T, gradsync::half>)
            return k::detail::scaled_add_simd512(out.data(), ca, a.data(), cb, b.data(), out.size());
        [[fallthrough]];
#endif
    default: k::scaled_add<T>(out, ca, a, cb, b); return;
    }
}

// A spread of values: for fp16 any finite bit pattern (subnormals and 65504 included) and
// now and then an Inf or a NaN when `specials`; for fp32/fp64 magnitudes 2^-20 .. 2^20.
template <class T>
T value(std::uint64_t seed, std::size_t i, bool specials)
{
    const std::uint64_t k = ref::key(seed, 7, i);
    if constexpr (std::is_same_v<T, half>) {
        std::uint16_t b = std::uint16_t(k);
        if (specials && (k >> 16) % 64 == 0)
            b = (k >> 22) % 2 ? 0x7c00u : 0x7e00u;
        else if ((b & 0x7c00u) == 0x7c00u)
            b &= 0xbfffu;
        return std::bit_cast<half>(b);
    } else if constexpr (std::is_same_v<T, gradsync::bfloat16>) {
        // exponents 2^-100 .. 2^100: products and their sums stay normal doubles
        std::uint16_t b = std::uint16_t(((k & 0x807fu) | (((k >> 7) % 201 + 27) << 7)));
        if (specials && (k >> 16) % 64 == 0)
            b = (k >> 22) % 2 ? 0x7f80u : 0x7fc0u;
        return std::bit_cast<gradsync::bfloat16>(b);
    } else {
        if (specials && (k >> 16) % 97 == 0)
            return (k >> 24) % 2 ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::quiet_NaN();
        const double mant = double(k >> 11) * 0x1.0p-53 * 2 - 1;
        return T(std::ldexp(mant, int((k >> 3) % 41) - 20));
    }
}

// ---------------------------------------------------------------------------------------
// triple

template <class T>
std::string check_triple(path p, std::size_t n, std::size_t offset, std::uint64_t seed)
{
    std::vector<T> a(offset + n), b(offset + n);
    for (std::size_t i = 0; i < a.size(); ++i) {
        a[i] = value<T>(seed, i, false);
        b[i] = value<T>(seed + 1, i, false);
    }
    double ab = 0, aa = 0, bb = 0, mag = 0;
    for (std::size_t i = offset; i < offset + n; ++i) {
        const double x = double(a[i]), y = double(b[i]);
        ab += x * y;
        aa += x * x;
        bb += y * y;
        mag += std::fabs(x * y);
    }
    const gradsync::kernels::dot_triple t =
        triple_on<T>(p, std::span<const T>(a.data() + offset, n), std::span<const T>(b.data() + offset, n));
    const std::string where =
        std::string(path_name(p)) + " path, n " + std::to_string(n) + " offset " + std::to_string(offset) + ": ";
    if (!(std::fabs(t.ab - ab) <= 1e-13 * mag))
        return where + "a.b " + std::to_string(t.ab) + ", want " + std::to_string(ab);
    if (!(std::fabs(t.aa - aa) <= 1e-13 * aa))
        return where + "a.a " + std::to_string(t.aa) + ", want " + std::to_string(aa);
    if (!(std::fabs(t.bb - bb) <= 1e-13 * bb))
        return where + "b.b " + std::to_string(t.bb) + ", want " + std::to_string(bb);
    return "";
}

} // namespace

TEMPLATE_TEST_CASE("kernels::triple forms [a.b, a.a, b.b] in double", "[adasum][kernels]", half, gradsync::bfloat16,
                   float, double)
{
    for (path p : runnable_paths<TestType>()) {
        std::string first;
        for (std::size_t n : lengths())
            for (std::size_t offset : {0, 1})
                for (std::uint64_t seed : {3u, 5u})
                    if (first.empty())
                        first = check_triple<TestType>(p, n, offset, seed * 100000 + n);
        CHECK(first == "");
    }
}

TEMPLATE_TEST_CASE("kernels::triple of a vector with itself and of opposite vectors", "[adasum][kernels]", half,
                   gradsync::bfloat16, float, double)
{
    // a.b == a.a == b.b bit for bit when b == a (what makes A(v, v) = v exact), and
    // a.b == -a.a when b == -a, at every length.
    using T = TestType;
    std::string first;
    for (path p : runnable_paths<T>())
        for (std::size_t n : lengths()) {
            std::vector<T> a(n), minus(n);
            for (std::size_t i = 0; i < n; ++i) {
                a[i] = value<T>(17, i, false);
                minus[i] = T(-double(a[i]));
            }
            const auto same = triple_on<T>(p, std::span<const T>(a), std::span<const T>(a));
            const auto opposite = triple_on<T>(p, std::span<const T>(a), std::span<const T>(minus));
            const std::string where = std::string(path_name(p)) + " path, n " + std::to_string(n) + ": ";
            if (first.empty() && !(same.ab == same.aa && same.aa == same.bb))
                first = where + "triple(a, a) = [" + std::to_string(same.ab) + ", " + std::to_string(same.aa) + ", " +
                    std::to_string(same.bb) + "]";
            if (first.empty() && !(opposite.ab == -opposite.aa && opposite.aa == opposite.bb))
                first = where + "triple(a, -a) = [" + std::to_string(opposite.ab) + ", " + std::to_string(opposite.aa) +
                    ", " + std::to_string(opposite.bb) + "]";
        }
    CHECK(first == "");
}

// ---------------------------------------------------------------------------------------
// scaled_add

namespace {

// The spec's result for one element, rounded once from double to T. For fp16 two
// independent conversions must agree with each other and with the kernel.
template <class T>
struct candidates {
    T value[2];
    std::size_t count = 0;
};

template <class T>
candidates<T> rounded_candidates(double d)
{
    candidates<T> c{};
    if constexpr (std::is_same_v<T, half>) {
        c.value[c.count++] = std::bit_cast<half>(gradsync::detail::double_to_binary16(d));
#if defined(__FLT16_MANT_DIG__)
        c.value[c.count++] = static_cast<_Float16>(d); // the compiler's correctly rounded double -> _Float16
#endif
    } else if constexpr (std::is_same_v<T, gradsync::bfloat16>) {
        c.value[c.count++] = std::bit_cast<gradsync::bfloat16>(ref::round_to_bfloat16(d));
    } else {
        c.value[c.count++] = T(d);
    }
    return c;
}

template <class T>
bool same_value(T got, T want)
{
    if (std::isnan(double(want)))
        return std::isnan(double(got));
    return ref::bits(got) == ref::bits(want);
}

enum class alias { none, out_is_a, out_is_b };

const char* alias_name(alias m)
{
    switch (m) {
    case alias::none: return "out separate";
    case alias::out_is_a: return "out aliasing a";
    case alias::out_is_b: return "out aliasing b";
    }
    return "?";
}

constexpr std::size_t guard = 5;

// Runs scaled_add on [offset, offset + n) of buffers with guard elements on both sides and
// checks every element of the out buffer: the span against the spec, the rest unchanged.
template <class T>
std::string check_scaled_add(path p, const std::vector<T>& a0, const std::vector<T>& b0, std::size_t offset,
                             std::size_t n, double ca, double cb, alias mode)
{
    std::vector<T> a = a0, b = b0, out(a0.size());
    for (std::size_t i = 0; i < out.size(); ++i)
        out[i] = value<T>(99, i, false);
    std::vector<T>& target = mode == alias::out_is_a ? a : mode == alias::out_is_b ? b : out;
    const std::vector<T> before = target;
    scaled_add_on<T>(p, std::span<T>(target.data() + offset, n), ca, std::span<const T>(a.data() + offset, n), cb,
                     std::span<const T>(b.data() + offset, n));
    auto where = [&](std::size_t i) {
        return std::string(path_name(p)) + " path, " + alias_name(mode) + ", n " + std::to_string(n) + ", offset " +
            std::to_string(offset) +
            ", ca " + std::to_string(ca) + ", cb " + std::to_string(cb) + ", element " + std::to_string(i) + ": ";
    };
    for (std::size_t i = 0; i < target.size(); ++i) {
        if (i < offset || i >= offset + n) {
            if (ref::bits(target[i]) != ref::bits(before[i]))
                return where(i) + "outside the span, changed";
            continue;
        }
        const double exact = std::fma(ca, double(a0[i]), cb * double(b0[i]));
        const candidates<T> want = rounded_candidates<T>(exact);
        for (std::size_t c = 0; c < want.count; ++c)
            if (!same_value(target[i], want.value[c]))
                return where(i) + "a " + ref::show(a0[i]) + ", b " + ref::show(b0[i]) + ": got " +
                    ref::show(target[i]) + " (bits " + std::to_string(ref::bits(target[i])) + "), want " +
                    ref::show(want.value[c]) + " (bits " + std::to_string(ref::bits(want.value[c])) + ", conversion " +
                    std::to_string(c) + ")";
    }
    return "";
}

struct coefficient_pair {
    double ca, cb;
};

std::vector<coefficient_pair> coefficient_pairs()
{
    std::vector<coefficient_pair> p{{1, 1},          {0.75, 0.875}, {0.5, 0.5},     {1, -1}, {-0.3, 1.7},
                                    {1e-3, 1e3},     {1, 0},        {0, 1},         {0, 0},  {1.0 / 3, 2.0 / 3},
                                    {0.5 + 0x1.0p-40, 0.5 - 0x1.0p-41}};
    for (std::size_t i = 0; i < 4; ++i)
        p.push_back({adaref::normal(61, 0, i), adaref::normal(61, 1, i)});
    return p;
}

template <class T>
std::string check_scaled_add_all(path p, bool specials)
{
    for (std::size_t n : lengths())
        for (std::size_t offset : {0, 1}) {
            std::vector<T> a(offset + n + guard), b(offset + n + guard);
            for (std::size_t i = 0; i < a.size(); ++i) {
                a[i] = value<T>(31 + n, i, specials);
                b[i] = value<T>(37 + n, i, specials);
            }
            for (const coefficient_pair& c : coefficient_pairs())
                for (alias mode : {alias::none, alias::out_is_a, alias::out_is_b}) {
                    const std::string e = check_scaled_add<T>(p, a, b, offset, n, c.ca, c.cb, mode);
                    if (!e.empty())
                        return e;
                }
        }
    return "";
}

// Sums one hair away from (or exactly on) a rounding midpoint of T: a has a random last
// bit, b = +-1 and cb is half a unit in a's last place times (1 + delta). Rounding the
// double to float first and then to fp16 turns "just above the midpoint" into "on the
// midpoint" and rounds the wrong way; a single correct rounding does not.
template <class T>
std::string check_midpoints(path p)
{
    const int mant = std::is_same_v<T, half> ? 10 : std::is_same_v<T, gradsync::bfloat16> ? 7
        : std::is_same_v<T, float>                                               ? 23
                                                                                 : 52;
    const std::size_t n = 1003;
    for (bool subnormal : {false, true}) {
        if (subnormal && !std::is_same_v<T, half>)
            continue;
        std::vector<T> a(n + 1), b(n + 1);
        for (std::size_t i = 0; i < a.size(); ++i) {
            const std::uint64_t k = ref::key(71, 0, i);
            double x;
            if (subnormal) // fp16 subnormals: multiples of 2^-24 below 2^-14
                x = std::ldexp(double(k % 1024), -24);
            else // [1, 2) with a random mantissa
                x = 1 + std::ldexp(double(k % (std::uint64_t(1) << std::min(mant, 40))), -std::min(mant, 40));
            a[i] = T((k >> 50) % 2 ? -x : x);
            b[i] = T((k >> 51) % 2 ? -1.0 : 1.0);
        }
        const double half_ulp = subnormal ? 0x1.0p-25 : std::ldexp(1.0, -mant - 1);
        for (double delta : {0.0, 0x1.0p-30, -0x1.0p-30, 0x1.0p-20, -0x1.0p-20})
            for (std::size_t offset : {0, 1})
                for (alias mode : {alias::none, alias::out_is_a, alias::out_is_b}) {
                    const std::string e = check_scaled_add<T>(p, a, b, offset, n, 1.0, half_ulp * (1 + delta), mode);
                    if (!e.empty())
                        return std::string(subnormal ? "subnormal midpoints: " : "midpoints: ") + e;
                }
    }
    return "";
}

} // namespace

TEMPLATE_TEST_CASE("kernels::scaled_add rounds fma(ca, a, cb*b) once to the element type", "[adasum][kernels]", half,
                   gradsync::bfloat16, float, double)
{
    for (path p : runnable_paths<TestType>())
        CHECK(check_scaled_add_all<TestType>(p, false) == "");
}

TEMPLATE_TEST_CASE("kernels::scaled_add with Inf and NaN among the inputs", "[adasum][kernels]", half,
                   gradsync::bfloat16, float, double)
{
    for (path p : runnable_paths<TestType>())
        CHECK(check_scaled_add_all<TestType>(p, true) == "");
}

TEMPLATE_TEST_CASE("kernels::scaled_add rounds correctly next to rounding midpoints", "[adasum][kernels]", half,
                   gradsync::bfloat16, float, double)
{
    for (path p : runnable_paths<TestType>())
        CHECK(check_midpoints<TestType>(p) == "");
}

TEST_CASE("double_to_binary16 agrees with the compiler's double -> _Float16 conversion", "[adasum][kernels]")
{
#if defined(__FLT16_MANT_DIG__)
    std::string first;
    auto check = [&](double d) {
        const std::uint16_t mine = gradsync::detail::double_to_binary16(d);
        const std::uint16_t want = std::bit_cast<std::uint16_t>(static_cast<_Float16>(d));
        const bool ok = (std::isnan(d) && (mine & 0x7fffu) > 0x7c00u) || mine == want;
        if (!ok && first.empty())
            first = "double " + std::to_string(d) + " (bits " + std::to_string(std::bit_cast<std::uint64_t>(d)) +
                "): got " + std::to_string(mine) + ", want " + std::to_string(want);
    };
    for (std::uint32_t h = 0; h < 0x10000u; ++h) { // every fp16 value, its midpoints and their neighbours
        const double x = double(std::bit_cast<_Float16>(std::uint16_t(h)));
        const double y = double(std::bit_cast<_Float16>(std::uint16_t(h + 1)));
        check(x);
        if (std::isfinite(x) && std::isfinite(y) && (h & 0x7fffu) != 0x7bffu && h != 0x7fffu && h != 0xffffu) {
            const double mid = (x + y) / 2;
            check(mid);
            check(std::nextafter(mid, INFINITY));
            check(std::nextafter(mid, -INFINITY));
            check(mid + (y - x) * 0x1.0p-30);
            check(mid - (y - x) * 0x1.0p-30);
        }
    }
    for (double d : {65504.0, 65519.99, 65520.0, 65520.01, 1e10, -1e10, 0x1.0p-25, 0x1.0p-25 * (1 + 0x1.0p-40),
                     0x1.0p-26, 1e-300, -0.0, double(INFINITY), -double(INFINITY), double(NAN)})
        check(d);
    for (std::size_t i = 0; i < 200000; ++i) // random doubles of every magnitude fp16 can see
        check(std::ldexp(adaref::normal(83, 0, i), int(ref::key(83, 1, i) % 60) - 40));
    CHECK(first == "");
#else
    SUCCEED("no _Float16 in this compiler");
#endif
}

// ---------------------------------------------------------------------------------------
// adasum::from and combine_layer

TEST_CASE("adasum::from: ca = 1 - d/(2 na) when na >= sqrt(DBL_MIN), else 1", "[adasum][kernels]")
{
    const double guard = std::sqrt(DBL_MIN);
    const double below = std::nextafter(guard, 0.0);
    auto from = [](double ab, double aa, double bb) { return gradsync::adasum::from({ab, aa, bb}); };

    auto c = from(2, 4, 8);
    CHECK(c.a == 0.75);
    CHECK(c.b == 0.875);

    c = from(0, 4, 9); // orthogonal: plain sum
    CHECK(c.a == 1);
    CHECK(c.b == 1);

    c = from(3, 3, 3); // parallel: halves
    CHECK(c.a == 0.5);
    CHECK(c.b == 0.5);

    c = from(1, 0, 4); // a = 0: A(0, b) = b
    CHECK(c.a == 1);
    CHECK(c.b == 1 - 1.0 / 8);

    c = from(0, 0, 0); // both zero
    CHECK(c.a == 1);
    CHECK(c.b == 1);

    c = from(1e-160, below, 4); // na just below the guard: 1, however large d/na would be
    CHECK(c.a == 1);
    CHECK(c.b == 1 - 1e-160 / 8);

    c = from(1e-160, guard, below); // na exactly at the guard: the formula; nb below: 1
    CHECK(c.a == 1 - 1e-160 / (2 * guard));
    CHECK(c.b == 1);

    c = from(-3, 2, 1e-160); // nb far below the guard
    CHECK(c.a == 1.75);
    CHECK(c.b == 1);

    c = from(1e-200, 1e-200, 1e-200); // both below: the plain sum, not the halves
    CHECK(c.a == 1);
    CHECK(c.b == 1);
}

TEMPLATE_TEST_CASE("adasum::combine_layer: A(x, 0) = x, A(0, 0) = 0, A(v, v) = v, A(x, y) = x + y for x and y "
                   "orthogonal",
                   "[adasum][kernels]", half, gradsync::bfloat16, float, double)
{
    using T = TestType;
    using gradsync::adasum;
    for (std::size_t n : {std::size_t(1), std::size_t(7), std::size_t(37), std::size_t(1000)}) {
        INFO("n " << n);
        const std::vector<T> x = adaref::normal_data<T>(91, 0, n), zero(n, T(0));
        std::vector<T> out(n);
        adasum::combine_layer<T>(std::span<T>(out), std::span<const T>(x), std::span<const T>(zero));
        CHECK(ref::first_difference(out, x) == "");
        adasum::combine_layer<T>(std::span<T>(out), std::span<const T>(zero), std::span<const T>(x));
        CHECK(ref::first_difference(out, x) == "");
        adasum::combine_layer<T>(std::span<T>(out), std::span<const T>(zero), std::span<const T>(zero));
        CHECK(ref::first_difference(out, zero) == "");
        adasum::combine_layer<T>(std::span<T>(out), std::span<const T>(x), std::span<const T>(x));
        CHECK(ref::first_difference(out, x) == "");
        // In place, as the algorithms call it.
        std::vector<T> inplace = x;
        adasum::combine_layer<T>(std::span<T>(inplace), std::span<const T>(inplace), std::span<const T>(x));
        CHECK(ref::first_difference(inplace, x) == "");
        // Disjoint supports: even and odd positions.
        std::vector<T> even(n, T(0)), odd(n, T(0));
        for (std::size_t i = 0; i < n; ++i)
            (i % 2 ? odd : even)[i] = x[i];
        adasum::combine_layer<T>(std::span<T>(out), std::span<const T>(even), std::span<const T>(odd));
        CHECK(ref::first_difference(out, x) == "");
        // A general pair against the reference: one rounding of ca a + cb b.
        const std::vector<T> y = adaref::normal_data<T>(91, 1, n);
        adasum::combine_layer<T>(std::span<T>(out), std::span<const T>(x), std::span<const T>(y));
        const std::vector<adaref::vec> g = adaref::widen(std::vector<std::vector<T>>{x, y});
        const adaref::vec want = adaref::combine(g[0], g[1], {n});
        CHECK(adaref::first_layer_out_of_tolerance(out, want, {n}, adaref::tolerance<T>(false), g) == "");
    }
}
