// The loop of every host elementwise kernel: combine<Op>(acc, in) sets acc[i] =
// Op::one(acc[i], in[i]) for every i. The ops are the policies' (Sum's in kernels/host.hpp,
// Minimum's and Maximum's in host_extrema.hpp, Product's in host_product.hpp, the bitwise
// ones in host_bitwise.hpp); what they share is here, so each is written once.
//
// fp32/fp64 and integer loops are written for the compiler's auto-vectorizer
// (restrict-qualified, unit stride, in runs of one cache line: g++ 12 at -O2 vectorizes only
// loops it can replace whole, which a loop of unknown length is not). _Float16 loops are not
// vectorized (docs/results.md, "Kernel notes"), so fp16 goes through F16C (Op::lanes on 8
// floats widened by cvtph2ps, rounded back to nearest even by cvtps2ph), selected at run
// time on CPUs that have it; the scalar tail rounds identically, so results never depend on
// the path taken.
//
// arithmetic(a, b, f) is how Sum and Product compute: in the accumulate type, rounded once
// to the element type; integers in their unsigned type, where overflow is defined, so they
// wrap modulo 2^bits (two's complement once converted back) without undefined behaviour.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <span>
#include <type_traits>

#include <gradsync/core/types.hpp>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define GRADSYNC_HAVE_F16C_DISPATCH 1
#define GRADSYNC_F16C __attribute__((target("avx,f16c")))
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
template <class Op, class T, class N>
inline void combine_run(T* __restrict a, const T* __restrict b, N n) noexcept
{
    for (std::size_t i = 0; i < n; ++i)
        a[i] = Op::one(a[i], b[i]);
}

// The unsigned type an integer's sum and product are formed in: its promoted type's, so that
// promotion never turns it back into a signed int.
template <std::integral T>
using wrapping_t = std::make_unsigned_t<decltype(+T())>;

template <class T, class F>
T arithmetic(T a, T b, F f) noexcept
{
    if constexpr (std::integral<T>) {
        using W = wrapping_t<T>;
        return T(f(W(a), W(b)));
    } else {
        using A = accumulate_t<T>;
        return T(f(A(a), A(b)));
    }
}

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

// The elements combined in blocks of 8; returns how many.
template <class Op>
GRADSYNC_F16C inline std::size_t combine_f16c(half* a, const half* b, std::size_t n) noexcept
{
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
        const __m256 y = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(a + i),
                         _mm256_cvtps_ph(Op::lanes(x, y), _MM_FROUND_TO_NEAREST_INT));
    }
    return i;
}
#endif

} // namespace detail

// acc[i] = Op::one(acc[i], in[i]); in holds acc.size() elements.
template <class Op, class T>
void combine(std::span<T> acc, std::span<const T> in) noexcept
{
    if constexpr (std::is_same_v<T, half>) {
        std::size_t i = 0;
#if GRADSYNC_HAVE_F16C_DISPATCH
        if (detail::cpu_has_f16c())
            i = detail::combine_f16c<Op>(acc.data(), in.data(), acc.size());
#endif
        for (; i < acc.size(); ++i)
            acc[i] = Op::one(acc[i], in[i]);
    } else {
        detail::in_lines<T>(acc.size(), [a = acc.data(), b = in.data()](std::size_t i, auto n) {
            detail::combine_run<Op>(a + i, b + i, n);
        });
    }
}

} // namespace gradsync::kernels
