// Host kernels of Sum and Average: add (acc[i] = acc[i] + in[i]) and scale
// (x[i] = x[i] * f), computed in the element's accumulate type and rounded once per element.
// (Adasum's kernels, triple and scaled_add, are in kernels/host_adasum.hpp.)
//
// canonicalize_nan(x) replaces every NaN by the default quiet NaN. Addition is commutative
// except for NaN payloads (x86 keeps one operand's, and the compiler may swap operands),
// so an algorithm in which two ranks compute the same element uses it to agree on the bits.
//
// fp32/fp64 loops are written for the compiler's auto-vectorizer (restrict-qualified, unit
// stride, in runs of one cache line: g++ 12 at -O2 vectorizes only loops it can replace
// whole, which a loop of unknown length is not). _Float16 loops are not vectorized
// (docs/results.md, "Kernel notes"), so fp16 goes through F16C (8 lanes of cvtph2ps /
// cvtps2ph with round-to-nearest-even), selected at run time on CPUs that have it; the
// scalar tail rounds identically, so results never depend on the path taken.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>

#include <gradsync/core/types.hpp>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define GRADSYNC_HAVE_F16C_DISPATCH 1
#endif

namespace gradsync::kernels {

namespace detail {

// f(i, length) over [0, n): runs of one cache line, whose length is a constant
// (std::integral_constant), then the rest.
template <class T, class F>
inline void in_lines(std::size_t n, F&& f)
{
    using line = std::integral_constant<std::size_t, std::max<std::size_t>(1, 64 / sizeof(T))>;
    std::size_t i = 0;
    for (; i + line::value <= n; i += line::value)
        f(i, line{});
    if (i < n)
        f(i, n - i);
}

// The restrict-qualified parameters tell the vectorizer that a and b do not overlap.
template <class T, class N>
inline void add_run(T* __restrict a, const T* __restrict b, N n) noexcept
{
    for (std::size_t i = 0; i < n; ++i)
        a[i] = a[i] + b[i];
}

} // namespace detail

template <class T>
void add(std::span<T> acc, std::span<const T> in) noexcept
{
    detail::in_lines<T>(acc.size(), [a = acc.data(), b = in.data()](std::size_t i, auto n) {
        detail::add_run(a + i, b + i, n);
    });
}

template <class T>
void canonicalize_nan(std::span<T> x) noexcept
{
    constexpr T quiet = std::numeric_limits<T>::quiet_NaN();
    detail::in_lines<T>(x.size(), [p = x.data()](std::size_t i, auto n) {
        T* v = p + i;
        for (std::size_t j = 0; j < n; ++j)
            v[j] = v[j] != v[j] ? quiet : v[j];
    });
}

template <class T>
void scale(std::span<T> x, accumulate_t<T> factor) noexcept
{
    detail::in_lines<T>(x.size(), [p = x.data(), factor](std::size_t i, auto n) {
        T* v = p + i;
        for (std::size_t j = 0; j < n; ++j)
            v[j] = v[j] * factor;
    });
}

namespace detail {

inline half add_one(half a, half b) noexcept { return half(float(a) + float(b)); }
inline half scale_one(half a, float f) noexcept { return half(float(a) * f); }

#if GRADSYNC_HAVE_F16C_DISPATCH
// F16C from CPUID leaf 1 (ECX bit 29): not every compiler's __builtin_cpu_supports knows it.
inline bool cpuid_f16c() noexcept
{
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
}

inline bool cpu_has_f16c() noexcept
{
    static const bool has = cpuid_f16c() && __builtin_cpu_supports("avx");
    return has;
}

__attribute__((target("avx,f16c"))) inline std::size_t add_f16c(half* a, const half* b, std::size_t n) noexcept
{
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
        const __m256 y = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(a + i),
                         _mm256_cvtps_ph(_mm256_add_ps(x, y), _MM_FROUND_TO_NEAREST_INT));
    }
    return i;
}

__attribute__((target("avx,f16c"))) inline std::size_t scale_f16c(half* a, float f, std::size_t n) noexcept
{
    const __m256 s = _mm256_set1_ps(f);
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(a + i),
                         _mm256_cvtps_ph(_mm256_mul_ps(x, s), _MM_FROUND_TO_NEAREST_INT));
    }
    return i;
}
#endif

} // namespace detail

template <>
inline void add<half>(std::span<half> acc, std::span<const half> in) noexcept
{
    std::size_t i = 0;
#if GRADSYNC_HAVE_F16C_DISPATCH
    if (detail::cpu_has_f16c())
        i = detail::add_f16c(acc.data(), in.data(), acc.size());
#endif
    for (; i < acc.size(); ++i)
        acc[i] = detail::add_one(acc[i], in[i]);
}

template <>
inline void scale<half>(std::span<half> x, float factor) noexcept
{
    std::size_t i = 0;
#if GRADSYNC_HAVE_F16C_DISPATCH
    if (detail::cpu_has_f16c())
        i = detail::scale_f16c(x.data(), factor, x.size());
#endif
    for (; i < x.size(); ++i)
        x[i] = detail::scale_one(x[i], factor);
}

template <>
inline void canonicalize_nan<bfloat16>(std::span<bfloat16> x) noexcept
{
    for (bfloat16& v : x)
        v.bits = (v.bits & 0x7fffu) > 0x7f80u ? std::uint16_t(0x7fc0u) : v.bits;
}

// On the bits, as comparisons of _Float16 are not vectorized.
template <>
inline void canonicalize_nan<half>(std::span<half> x) noexcept
{
    for (half& v : x) {
        const std::uint16_t bits = std::bit_cast<std::uint16_t>(v);
        v = std::bit_cast<half>((bits & 0x7fffu) > 0x7c00u ? std::uint16_t(0x7e00u) : bits);
    }
}

} // namespace gradsync::kernels
