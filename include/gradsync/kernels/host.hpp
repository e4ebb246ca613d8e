// Host kernels of Sum and Average: add (acc[i] = acc[i] + in[i], Sum's op sum_of in the
// loop of kernels/host_elementwise.hpp) and scale (x[i] = x[i] * f), computed in the
// element's accumulate type and rounded once per element; integers add modulo 2^bits.
// (Adasum's kernels, triple and scaled_add, are in kernels/host_adasum.hpp.)
//
// canonicalize_nan(x) replaces every NaN by the default quiet NaN. Addition is commutative
// except for NaN payloads (x86 keeps one operand's, and the compiler may swap operands),
// so an algorithm in which two ranks compute the same element uses it to agree on the bits.
// Integers have no NaN: it leaves them alone.
//
// scale's loops are written as the elementwise loop's (host_elementwise.hpp says why): in
// lines for the auto-vectorizer, fp16 through F16C.
#pragma once

#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>

#include <gradsync/core/types.hpp>
#include <gradsync/kernels/host_elementwise.hpp>

namespace gradsync::kernels {

// a + b: the op of add and of Sum.
struct sum_of {
    template <class T>
    static T one(T a, T b) noexcept
    {
        return detail::arithmetic(a, b, std::plus<>());
    }
#if GRADSYNC_HAVE_F16C_DISPATCH
    GRADSYNC_F16C static __m256 lanes(__m256 x, __m256 y) noexcept { return _mm256_add_ps(x, y); }
#endif
};

template <class T>
void add(std::span<T> acc, std::span<const T> in) noexcept
{
    combine<sum_of>(acc, in);
}

template <class T>
void canonicalize_nan(std::span<T> x) noexcept
{
    if constexpr (!std::integral<T>) {
        constexpr T quiet = std::numeric_limits<T>::quiet_NaN();
        detail::in_lines<T>(x.size(), [p = x.data()](std::size_t i, auto n) {
            T* v = p + i;
            for (std::size_t j = 0; j < n; ++j)
                v[j] = v[j] != v[j] ? quiet : v[j];
        });
    }
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

inline half scale_one(half a, float f) noexcept { return half(float(a) * f); }

#if GRADSYNC_HAVE_F16C_DISPATCH
GRADSYNC_F16C inline std::size_t scale_f16c(half* a, float f, std::size_t n) noexcept
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
