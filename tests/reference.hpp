// Independent reference for the gradsync tests: plain loops written from docs/semantics.md, with
// nothing taken from the library except the gradsync::half and gradsync::bfloat16 element types. Keep it that
// way: a reference that calls the code under test cannot catch that code's mistakes.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <gradsync/gradsync.hpp> // the element types and the algorithm codes; no algorithm code is used

namespace ref {

using half = gradsync::half;
using bfloat16 = gradsync::bfloat16;

// The accumulate type of the design contract (§3): fp16 and fp32 combine in float, fp64 in
// double. Spelled out here instead of using gradsync::accumulate_t on purpose.
template <class T>
struct acc;
template <>
struct acc<half> {
    using type = float;
};
template <>
struct acc<bfloat16> {
    using type = float;
};
template <>
struct acc<float> {
    using type = float;
};
template <>
struct acc<double> {
    using type = double;
};
template <class T>
using acc_t = typename acc<T>::type;

template <class T>
const char* type_name()
{
    if constexpr (std::is_same_v<T, half>)
        return "fp16";
    else if constexpr (std::is_same_v<T, bfloat16>)
        return "bf16";
    else if constexpr (std::is_same_v<T, float>)
        return "fp32";
    else if constexpr (std::is_same_v<T, double>)
        return "fp64";
    else if constexpr (std::is_same_v<T, std::int8_t>)
        return "int8";
    else if constexpr (std::is_same_v<T, std::uint8_t>)
        return "uint8";
    else if constexpr (std::is_same_v<T, std::int32_t>)
        return "int32";
    else
        return "int64";
}

// splitmix64: a deterministic hash, so every rank (and the checking thread) can regenerate
// any rank's input without communication.
inline std::uint64_t mix(std::uint64_t x) noexcept
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

inline std::uint64_t key(std::uint64_t seed, int rank, std::size_t i) noexcept
{
    return mix(mix(seed * 0x100000001b3ull + std::uint64_t(rank)) ^ std::uint64_t(i));
}

// Integer in [-2, 2]: with N <= 32 ranks every partial sum has |s| <= 64, exact in fp16
// (and fp32/fp64), so any summation order gives the same exact result.
inline int small_int(std::uint64_t seed, int rank, std::size_t i) noexcept
{
    return int(key(seed, rank, i) % 5) - 2;
}

// An unsigned type gets [0, 4] instead.
template <class T>
std::vector<T> int_data(std::uint64_t seed, int rank, std::size_t count)
{
    // The five values converted once: fp16 conversions are calls into libgcc, and converting
    // every element took longer than the reductions under test.
    const float lowest = std::is_unsigned_v<T> ? 0.0f : -2.0f;
    const T values[5] = {T(lowest), T(lowest + 1.0f), T(lowest + 2.0f), T(lowest + 3.0f), T(lowest + 4.0f)};
    std::vector<T> v;
    v.reserve(count);
    for (std::size_t i = 0; i < count; ++i)
        v.push_back(values[small_int(seed, rank, i) + 2]);
    return v;
}

// Non-integer data uniform in [-1, 1), rounded to T (the rounded values are the inputs).
template <class T>
std::vector<T> random_data(std::uint64_t seed, int rank, std::size_t count)
{
    std::vector<T> v(count);
    for (std::size_t i = 0; i < count; ++i) {
        const double u = double(key(seed, rank, i) >> 11) * 0x1.0p-53; // [0, 1)
        v[i] = T(2.0 * u - 1.0);
    }
    return v;
}

// inputs[r] = rank r's vector. Exact Sum/Average of integer-valued inputs: the sum in int64,
// then Sum = T(A(sum)), Average = T(A(sum) * (A(1) / A(N))) rounded once (§3).
template <class T>
std::vector<T> exact(const std::vector<std::vector<T>>& inputs, bool average)
{
    using A = acc_t<T>;
    const std::size_t n = inputs.size();
    const std::size_t count = n ? inputs[0].size() : 0;
    std::vector<T> out(count);
    for (std::size_t i = 0; i < count; ++i) {
        std::int64_t s = 0;
        for (std::size_t r = 0; r < n; ++r) {
            const double x = double(inputs[r][i]);
            if (x != std::floor(x))
                throw std::logic_error("ref::exact needs integer-valued inputs");
            s += std::int64_t(x);
        }
        const A sum = A(s);
        out[i] = average ? T(sum * (A(1) / A(n))) : T(sum);
    }
    return out;
}

// Double-precision sum (or average) and the sum of magnitudes, for tolerance checks on
// non-integer data.
struct approx {
    std::vector<double> value;
    std::vector<double> magnitude; // sum over ranks of |x|, divided by N for Average
};

template <class T>
approx in_double(const std::vector<std::vector<T>>& inputs, bool average)
{
    const std::size_t n = inputs.size();
    const std::size_t count = n ? inputs[0].size() : 0;
    approx a{std::vector<double>(count), std::vector<double>(count)};
    for (std::size_t i = 0; i < count; ++i) {
        double s = 0, m = 0;
        for (std::size_t r = 0; r < n; ++r) {
            s += double(inputs[r][i]);
            m += std::fabs(double(inputs[r][i]));
        }
        a.value[i] = average ? s / double(n) : s;
        a.magnitude[i] = average ? m / double(n) : m;
    }
    return a;
}

// Unit roundoff of T.
template <class T>
constexpr double unit_roundoff()
{
    if constexpr (std::is_same_v<T, half>)
        return 0x1.0p-11;
    else if constexpr (std::is_same_v<T, bfloat16>)
        return 0x1.0p-8;
    else if constexpr (std::is_same_v<T, float>)
        return 0x1.0p-24;
    else
        return 0x1.0p-53;
}

// Bound for any summation order over n ranks: n-1 roundings of partial sums, each at most
// u * (sum of magnitudes), plus two for Average (the factor and the product), plus a small
// absolute term for fp16 subnormals. For N = 32 this is about 1.6e-2 (fp16), 2e-6 (fp32) and
// 4e-15 (fp64) relative to the sum of magnitudes, inside the 1e-2 / 1e-5 / 1e-12 budget
// except for fp16 at N > 20, where the rigorous bound is the honest one.
template <class T>
double tolerance(int n, double magnitude)
{
    const double u = unit_roundoff<T>();
    const double subnormal = std::is_same_v<T, half> ? 0x1.0p-24 : 0.0;
    return 1.01 * double(n + 2) * u * magnitude + double(n + 2) * subnormal;
}

// bfloat16 bits of d rounded to nearest even, by distance: the candidates are the
// truncation of d's float bits and its two neighbours; the nearest to d wins, a tie goes to
// the even one. Overflow past the midpoint between the largest finite bfloat16 and 2^128
// gives Inf, NaN a quiet NaN of the same sign.
inline std::uint16_t round_to_bfloat16(double d)
{
    if (d != d)
        return std::uint16_t(std::signbit(d) ? 0xffc0u : 0x7fc0u);
    const std::uint16_t sign = std::signbit(d) ? 0x8000u : 0;
    const double m = std::fabs(d);
    const double largest = std::ldexp(255.0, 120); // 0x7f7f: (2 - 2^-7) * 2^127
    if (m >= largest + std::ldexp(1.0, 119))       // at or past the midpoint toward 2^128
        return std::uint16_t(sign | 0x7f80u);
    auto value = [](std::uint32_t b) { return double(std::bit_cast<float>(std::uint32_t(b) << 16)); };
    float f = float(m);
    if (std::isinf(f))
        f = std::bit_cast<float>(0x7f7fffffu);
    const std::uint32_t t = std::bit_cast<std::uint32_t>(f) >> 16;
    std::uint32_t best = t;
    for (std::uint32_t c : {t == 0 ? t : t - 1, t + 1}) {
        if (c > 0x7f7fu)
            continue;
        const double dc = std::fabs(value(c) - m), db = std::fabs(value(best) - m);
        if (dc < db || (dc == db && (c & 1u) == 0))
            best = c;
    }
    return std::uint16_t(sign | best);
}

// x rounded to T: bfloat16 through round_to_bfloat16, the others by the compiler.
template <class T, class A>
T narrow(A x)
{
    if constexpr (std::is_same_v<T, bfloat16>)
        return std::bit_cast<bfloat16>(round_to_bfloat16(double(x)));
    else
        return T(x);
}

// The bits of an element as an unsigned integer of its width.
template <class T>
auto bits(T x)
{
    using U = std::conditional_t<sizeof(T) == 2, std::uint16_t,
                                 std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>;
    return std::bit_cast<U>(x);
}

// The fields of a floating-point element type's bits.
template <class T>
struct ieee;
template <>
struct ieee<half> {
    using bits = std::uint16_t;
    static constexpr bits sign = 0x8000u, exponent = 0x7c00u, fraction = 0x3ffu;
};
template <>
struct ieee<bfloat16> {
    using bits = std::uint16_t;
    static constexpr bits sign = 0x8000u, exponent = 0x7f80u, fraction = 0x7fu;
};
template <>
struct ieee<float> {
    using bits = std::uint32_t;
    static constexpr bits sign = 0x80000000u, exponent = 0x7f800000u, fraction = 0x7fffffu;
};
template <>
struct ieee<double> {
    using bits = std::uint64_t;
    static constexpr bits sign = 0x8000000000000000u, exponent = 0x7ff0000000000000u, fraction = 0xfffffffffffffu;
};

template <class T>
T from_bits(std::uint64_t b)
{
    return std::bit_cast<T>(typename ieee<T>::bits(b));
}

// The default quiet NaN of a floating-point element type (docs/semantics.md, "NaN and Inf").
template <class T>
T quiet_nan()
{
    if constexpr (std::is_same_v<T, half>)
        return std::bit_cast<T>(std::uint16_t(0x7e00u));
    else if constexpr (std::is_same_v<T, bfloat16>)
        return std::bit_cast<T>(std::uint16_t(0x7fc0u));
    else if constexpr (std::is_same_v<T, float>)
        return std::bit_cast<T>(std::uint32_t(0x7fc00000u));
    else
        return std::bit_cast<T>(std::uint64_t(0x7ff8000000000000u));
}

// Minimum (smaller) or Maximum of a and b as docs/semantics.md defines them: the smaller (or
// larger) operand itself; for floating-point types the default quiet NaN if either is a NaN,
// and -0 below +0.
template <class T>
T extremum(T a, T b, bool smaller)
{
    if constexpr (std::is_integral_v<T>) {
        return (smaller ? b < a : b > a) ? b : a;
    } else {
        const double x = double(a), y = double(b);
        if (std::isnan(x) || std::isnan(y))
            return quiet_nan<T>();
        if (x != y)
            return (x < y) == smaller ? a : b;
        return std::signbit(x) == smaller ? a : b;
    }
}

inline bool same_bits(const void* a, const void* b, std::size_t bytes) noexcept
{
    return bytes == 0 || std::memcmp(a, b, bytes) == 0;
}

template <class T>
std::string show(T x)
{
    return std::to_string(double(x));
}

// "" when got == want bit for bit, else a description of the first difference.
template <class T>
std::string first_difference(const std::vector<T>& got, const std::vector<T>& want)
{
    if (got.size() != want.size())
        return "size " + std::to_string(got.size()) + " != " + std::to_string(want.size());
    for (std::size_t i = 0; i < got.size(); ++i)
        if (!same_bits(&got[i], &want[i], sizeof(T)))
            return "element " + std::to_string(i) + ": got " + show(got[i]) + ", want " + show(want[i]);
    return "";
}

// "" when every element is within tolerance of the double reference.
template <class T>
std::string first_out_of_tolerance(const std::vector<T>& got, const approx& want, int n)
{
    if (got.size() != want.value.size())
        return "size " + std::to_string(got.size()) + " != " + std::to_string(want.value.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        const double err = std::fabs(double(got[i]) - want.value[i]);
        const double tol = tolerance<T>(n, want.magnitude[i]);
        if (!(err <= tol))
            return "element " + std::to_string(i) + ": got " + show(got[i]) + ", want " + show(want.value[i]) +
                " (error " + std::to_string(err) + " > tolerance " + std::to_string(tol) + ")";
    }
    return "";
}

// Layer layout used by the one-shot calls: uneven, with an empty layer in the middle, adding
// up to count (two empty layers when count is 0).
inline std::vector<std::size_t> uneven_layers(std::size_t count)
{
    if (count == 0)
        return {0, 0};
    const std::size_t a = count / 2, b = count / 4;
    return {a, 0, b, count - a - b};
}

// FNV-1a of a byte range: ranks compare results across processes through it.
inline std::uint64_t fnv1a(const void* p, std::size_t bytes) noexcept
{
    const auto* b = static_cast<const unsigned char*>(p);
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (std::size_t i = 0; i < bytes; ++i) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

// An algorithm's name from its code (gradsync::ring::code, ...), for messages.
inline const char* algorithm_name(std::uint32_t code)
{
    if (code == gradsync::ring::code)
        return "ring";
    if (code == gradsync::recursive_halving::code)
        return "recursive_halving";
    if (code == gradsync::recursive_doubling::code)
        return "recursive_doubling";
    if (code == gradsync::hierarchical::code)
        return "hierarchical";
    if (code == gradsync::shared_memory::code)
        return "shared_memory";
    return "?";
}

} // namespace ref
