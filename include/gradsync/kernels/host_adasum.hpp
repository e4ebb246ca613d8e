// Host kernels of Adasum: triple (one pass: [a.b, a.a, b.b] in double) and scaled_add (one
// pass: out[i] = fma(ca, a[i], cb*b[i]) formed in double, rounded once to the element type;
// out may be a or b). The vector paths (AVX2+FMA; F16C and, for fp16, AVX-512) are chosen at
// run time; their summation order depends only on n and the path, never on addresses, so
// equal inputs give equal bits on machines of one kind (a job whose ranks run on CPUs with
// and without those units can see triples differ in the last bits between them).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

#include <gradsync/core/types.hpp>
#include <gradsync/kernels/host.hpp>

namespace gradsync::kernels {

// [a.b, a.a, b.b] over a stretch of one layer, in double.
struct dot_triple {
    double ab = 0;
    double aa = 0;
    double bb = 0;
};

namespace detail {

template <class T>
void triple_tail(const T* a, const T* b, std::size_t i, std::size_t n, dot_triple& t) noexcept
{
    for (; i < n; ++i) {
        const double x = double(a[i]), y = double(b[i]);
        t.ab += x * y;
        t.aa += x * x;
        t.bb += y * y;
    }
}

template <class T>
void scaled_add_tail(T* out, double ca, const T* a, double cb, const T* b, std::size_t i, std::size_t n) noexcept
{
    for (; i < n; ++i) // fma spelled out, so that no path depends on the compiler contracting
        out[i] = T(std::fma(ca, double(a[i]), cb * double(b[i])));
}

#if GRADSYNC_HAVE_F16C_DISPATCH
// The Adasum kernels spend enough arithmetic on each element (conversions, FMAs in double)
// that their loads of an operand outside L2 (in an allreduce, the rank's own part) issue
// late; asking for the lines 1 KiB ahead overlaps those loads with the arithmetic.
// Prefetching never faults, so lines past the end are harmless (the address is formed as
// an integer, not as a pointer past the end).
template <class T>
inline void prefetch_ahead(const T* a, const T* b) noexcept
{
    constexpr std::uintptr_t ahead = 1024;
    _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<std::uintptr_t>(a) + ahead), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<std::uintptr_t>(b) + ahead), _MM_HINT_T0);
}

#define GRADSYNC_SIMD __attribute__((target("avx2,fma,f16c")))

inline bool cpu_has_avx2() noexcept
{
    static const bool has =
        __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpuid_f16c();
    return has;
}

// Four elements widened to double, and four doubles rounded once back to the element type.
GRADSYNC_SIMD inline __m256d load4(const double* p) noexcept { return _mm256_loadu_pd(p); }
GRADSYNC_SIMD inline __m256d load4(const float* p) noexcept { return _mm256_cvtps_pd(_mm_loadu_ps(p)); }
GRADSYNC_SIMD inline __m256d load4(const half* p) noexcept
{
    return _mm256_cvtps_pd(_mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
GRADSYNC_SIMD inline void store4(double* p, __m256d v) noexcept { _mm256_storeu_pd(p, v); }
GRADSYNC_SIMD inline void store4(float* p, __m256d v) noexcept { _mm_storeu_ps(p, _mm256_cvtpd_ps(v)); }
// double -> fp16 rounded once: round to float with round-to-odd (nearest, then the truncated
// neighbour with its last bit set if inexact), which float -> fp16 nearest-even then rounds
// correctly, as float carries more than twice fp16's precision plus two bits.
GRADSYNC_SIMD inline __m128 round_to_odd(__m256d v) noexcept
{
    const __m128 nearest = _mm256_cvtpd_ps(v);
    const __m256d back = _mm256_cvtps_pd(nearest);
    const __m256d abs_mask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffLL));
    // All-ones double lanes convert to all-ones float lanes: masks narrow in one instruction.
    const __m128i inexact = _mm_castps_si128(_mm256_cvtpd_ps(_mm256_cmp_pd(back, v, _CMP_NEQ_OQ)));
    const __m128i away = _mm_castps_si128(_mm256_cvtpd_ps(
        _mm256_cmp_pd(_mm256_and_pd(back, abs_mask), _mm256_and_pd(v, abs_mask), _CMP_GT_OQ)));
    __m128i bits = _mm_add_epi32(_mm_castps_si128(nearest), away); // away is -1 where nearest grew
    bits = _mm_or_si128(bits, _mm_and_si128(inexact, _mm_set1_epi32(1)));
    return _mm_castsi128_ps(bits);
}
// ca x + cb y in double, rounded to float by round_to_odd.
GRADSYNC_SIMD inline __m128 scaled_to_odd(__m256d ca, __m128 x, __m256d cb, __m128 y) noexcept
{
    return round_to_odd(_mm256_fmadd_pd(ca, _mm256_cvtps_pd(x), _mm256_mul_pd(cb, _mm256_cvtps_pd(y))));
}
GRADSYNC_SIMD inline void store4(half* p, __m256d v) noexcept
{
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_cvtps_ph(round_to_odd(v), _MM_FROUND_TO_NEAREST_INT));
}
// bfloat16 is the top half of a float: widen by shifting, narrow by round_to_odd and then
// float -> bfloat16 nearest-even on the bits (NaN kept quiet), as detail::double_to_bfloat16.
GRADSYNC_SIMD inline __m256d load4(const bfloat16* p) noexcept
{
    const __m128i h = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    return _mm256_cvtps_pd(_mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(), h)));
}
GRADSYNC_SIMD inline void store4(bfloat16* p, __m256d v) noexcept
{
    const __m128i x = _mm_castps_si128(round_to_odd(v));
    const __m128i top = _mm_srli_epi32(x, 16);
    const __m128i even = _mm_add_epi32(_mm_set1_epi32(0x7fff), _mm_and_si128(top, _mm_set1_epi32(1)));
    const __m128i rounded = _mm_srli_epi32(_mm_add_epi32(x, even), 16);
    const __m128i nan = _mm_cmpgt_epi32(_mm_and_si128(x, _mm_set1_epi32(0x7fffffff)), _mm_set1_epi32(0x7f800000));
    const __m128i r = _mm_blendv_epi8(rounded, _mm_or_si128(top, _mm_set1_epi32(0x40)), nan);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packus_epi32(r, r));
}

GRADSYNC_SIMD inline double hsum(__m256d v) noexcept
{
    const __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

template <class T>
GRADSYNC_SIMD dot_triple triple_simd(const T* a, const T* b, std::size_t n) noexcept
{
    __m256d ab0 = _mm256_setzero_pd(), aa0 = ab0, bb0 = ab0, ab1 = ab0, aa1 = ab0, bb1 = ab0;
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        prefetch_ahead(a + i, b + i);
        const __m256d x0 = load4(a + i), y0 = load4(b + i), x1 = load4(a + i + 4), y1 = load4(b + i + 4);
        ab0 = _mm256_fmadd_pd(x0, y0, ab0);
        aa0 = _mm256_fmadd_pd(x0, x0, aa0);
        bb0 = _mm256_fmadd_pd(y0, y0, bb0);
        ab1 = _mm256_fmadd_pd(x1, y1, ab1);
        aa1 = _mm256_fmadd_pd(x1, x1, aa1);
        bb1 = _mm256_fmadd_pd(y1, y1, bb1);
    }
    dot_triple t{hsum(_mm256_add_pd(ab0, ab1)), hsum(_mm256_add_pd(aa0, aa1)), hsum(_mm256_add_pd(bb0, bb1))};
    triple_tail(a, b, i, n, t);
    return t;
}

template <class T>
GRADSYNC_SIMD inline void scaled_add4(T* out, __m256d ca, const T* a, __m256d cb, const T* b) noexcept
{
    store4(out, _mm256_fmadd_pd(ca, load4(a), _mm256_mul_pd(cb, load4(b))));
}

template <class T>
GRADSYNC_SIMD void scaled_add_simd(T* out, double ca, const T* a, double cb, const T* b, std::size_t n) noexcept
{
    const __m256d va = _mm256_set1_pd(ca), vb = _mm256_set1_pd(cb);
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        prefetch_ahead(a + i, b + i);
        if constexpr (std::is_same_v<T, half>) { // 8 lanes: one load and one store of each operand
            const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
            const __m256 y = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
            const __m128 lo = scaled_to_odd(va, _mm256_castps256_ps128(x), vb, _mm256_castps256_ps128(y));
            const __m128 hi = scaled_to_odd(va, _mm256_extractf128_ps(x, 1), vb, _mm256_extractf128_ps(y, 1));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                             _mm256_cvtps_ph(_mm256_set_m128(hi, lo), _MM_FROUND_TO_NEAREST_INT));
        } else {
            scaled_add4(out + i, va, a + i, vb, b + i);
            scaled_add4(out + i + 4, va, a + i + 4, vb, b + i + 4);
        }
    }
    if (i + 4 <= n) {
        scaled_add4(out + i, va, a + i, vb, b + i);
        i += 4;
    }
    scaled_add_tail(out, ca, a, cb, b, i, n);
}
#undef GRADSYNC_SIMD

// The two fp16 kernels eight doubles wide, on CPUs with AVX-512 (F, VL, DQ): fp16 is bound
// by conversions, which the wider units halve. fp32 and fp64 stay on AVX2: the 512-bit
// units' clock changes between messages cost them more than they save (docs/results.md,
// "Kernel notes").
#define GRADSYNC_SIMD512 __attribute__((target("avx512f,avx512vl,avx512dq,avx2,fma,f16c")))

inline bool cpu_has_avx512() noexcept
{
    static const bool has = cpu_has_avx2() && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    return has;
}

// The zero-masking forms: the unmasked ones read an undefined register (-Wuninitialized).
GRADSYNC_SIMD512 inline __m512d widen(__m256 v) noexcept { return _mm512_maskz_cvtps_pd(0xff, v); }
GRADSYNC_SIMD512 inline __m512d load8(const half* p) noexcept
{
    return widen(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
// Round to odd with the embedded rounding mode: truncate, then set the last bit if inexact.
// (The mask comes from _cvtu32_mask8: unoptimized builds get the intrinsic as a macro, where a
// constant 0xff is -Woverflow for g++ and, as the builtin's signed char, a change of sign for
// nvcc's front end.)
GRADSYNC_SIMD512 inline void store8(half* p, __m512d v) noexcept
{
    const __m256 t = _mm512_maskz_cvt_roundpd_ps(_cvtu32_mask8(0xff), v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __mmask8 inexact = _mm512_cmp_pd_mask(widen(t), v, _CMP_NEQ_UQ);
    const __m256i bits = _mm256_mask_or_epi32(_mm256_castps_si256(t), inexact, _mm256_castps_si256(t),
                                              _mm256_set1_epi32(1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm256_cvtps_ph(_mm256_castsi256_ps(bits), _MM_FROUND_TO_NEAREST_INT));
}

GRADSYNC_SIMD512 inline double hsum8(__m512d v) noexcept
{
    alignas(64) double t[8];
    _mm512_store_pd(t, v);
    return ((t[0] + t[4]) + (t[2] + t[6])) + ((t[1] + t[5]) + (t[3] + t[7]));
}

GRADSYNC_SIMD512 inline dot_triple triple_simd512(const half* a, const half* b, std::size_t n) noexcept
{
    // Two accumulators per sum: one chain of dependent FMAs would wait on their latency.
    __m512d ab0 = _mm512_setzero_pd(), aa0 = ab0, bb0 = ab0, ab1 = ab0, aa1 = ab0, bb1 = ab0;
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        prefetch_ahead(a + i, b + i);
        const __m512d x0 = load8(a + i), y0 = load8(b + i), x1 = load8(a + i + 8), y1 = load8(b + i + 8);
        ab0 = _mm512_fmadd_pd(x0, y0, ab0);
        aa0 = _mm512_fmadd_pd(x0, x0, aa0);
        bb0 = _mm512_fmadd_pd(y0, y0, bb0);
        ab1 = _mm512_fmadd_pd(x1, y1, ab1);
        aa1 = _mm512_fmadd_pd(x1, x1, aa1);
        bb1 = _mm512_fmadd_pd(y1, y1, bb1);
    }
    dot_triple t{hsum8(_mm512_add_pd(ab0, ab1)), hsum8(_mm512_add_pd(aa0, aa1)), hsum8(_mm512_add_pd(bb0, bb1))};
    triple_tail(a, b, i, n, t);
    return t;
}

GRADSYNC_SIMD512 inline void scaled_add_simd512(half* out, double ca, const half* a, double cb, const half* b,
                                                std::size_t n) noexcept
{
    const __m512d va = _mm512_set1_pd(ca), vb = _mm512_set1_pd(cb);
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        prefetch_ahead(a + i, b + i);
        store8(out + i, _mm512_fmadd_pd(va, load8(a + i), _mm512_mul_pd(vb, load8(b + i))));
    }
    scaled_add_tail(out, ca, a, cb, b, i, n);
}
#undef GRADSYNC_SIMD512
#endif

} // namespace detail

template <class T>
dot_triple triple(std::span<const T> a, std::span<const T> b) noexcept
{
#if GRADSYNC_HAVE_F16C_DISPATCH
    if constexpr (std::is_same_v<T, half>)
        if (detail::cpu_has_avx512())
            return detail::triple_simd512(a.data(), b.data(), a.size());
    if (detail::cpu_has_avx2())
        return detail::triple_simd(a.data(), b.data(), a.size());
#endif
    dot_triple t;
    detail::triple_tail(a.data(), b.data(), 0, a.size(), t);
    return t;
}

template <class T>
void scaled_add(std::span<T> out, double ca, std::span<const T> a, double cb, std::span<const T> b) noexcept
{
#if GRADSYNC_HAVE_F16C_DISPATCH
    if constexpr (std::is_same_v<T, half>)
        if (detail::cpu_has_avx512())
            return detail::scaled_add_simd512(out.data(), ca, a.data(), cb, b.data(), out.size());
    if (detail::cpu_has_avx2())
        return detail::scaled_add_simd(out.data(), ca, a.data(), cb, b.data(), out.size());
#endif
    detail::scaled_add_tail(out.data(), ca, a.data(), cb, b.data(), 0, out.size());
}

} // namespace gradsync::kernels
