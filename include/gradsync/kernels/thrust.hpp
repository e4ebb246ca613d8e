// Elementwise kernels through Thrust: the host kernels' arithmetic (kernels/host.hpp) on any
// Thrust execution policy, so one source runs on a CUDA stream (thrust::cuda::par_nosync.on(s),
// under nvcc) and on the CPU (thrust::omp::par, thrust::tbb::par, thrust::cpp::par). Adasum's
// kernels (the triple, the scaled add) are in kernels/thrust_adasum.hpp; the conversions
// here (ops<K>) serve both.
//
//   add(exec, acc, in)                   acc[i] = acc[i] + in[i]
//   scale(exec, x, f)                    x[i] = x[i] * f
//   zero(exec, x)                        x[i] = +0
//   canonicalize_nan(exec, x)            every NaN becomes the host kernel's quiet NaN
//
// Preconditions: every span lies in memory that exec's kernels can reach; operands have
// equal sizes (else usage_error). Kernels are queued on exec: with par_nosync the call
// returns before they finish. Cost: one pass over the operands (memory-bound), one launch.
//
// Rounding, as the host kernels: add and scale work in the accumulate type and round once
// per element; from_double rounds a double once (16-bit types: to float with round-to-odd,
// then to nearest even). Results are bit for bit those of the host kernels, NaN payloads
// aside (CUDA's 16-bit conversions return one canonical NaN).
//
// Under nvcc 16-bit elements are read as CUDA's __half and __nv_bfloat16 (the same bits as
// gradsync::half and gradsync::bfloat16); elsewhere as gradsync's own types.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>

#include <thrust/fill.h>
#include <thrust/transform.h>

#include <gradsync/core/error.hpp>
#include <gradsync/core/types.hpp>
#include <gradsync/kernels/host.hpp>
#include <gradsync/kernels/host_device.hpp>

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace gradsync::kernels {

namespace thrust_detail {

#if defined(__CUDACC__)
using half_k = __half;
using bfloat16_k = __nv_bfloat16;
#else
using half_k = half;
using bfloat16_k = bfloat16;
#endif

// The type a kernel reads an element type as.
template <class T>
using kernel_t = std::conditional_t<std::is_same_v<T, half>, half_k,
                                    std::conditional_t<std::is_same_v<T, bfloat16>, bfloat16_k, T>>;

// The span's elements as the kernels read them (const stays const).
template <class T>
auto* kernel_data(std::span<T> s) noexcept
{
    using K = kernel_t<std::remove_const_t<T>>;
    return reinterpret_cast<std::conditional_t<std::is_const_v<T>, const K, K>*>(s.data());
}

GRADSYNC_HD inline double fma_d(double a, double b, double c)
{
#if defined(__CUDA_ARCH__)
    return ::fma(a, b, c);
#else
    return std::fma(a, b, c);
#endif
}

// A product that is never contracted into a neighbouring addition.
GRADSYNC_HD inline double mul_d(double a, double b)
{
#if defined(__CUDA_ARCH__)
    return __dmul_rn(a, b);
#else
    return a * b;
#endif
}

// double -> float with round-to-odd, after which one more rounding to a 16-bit type equals
// a single rounding (core/types.hpp explains why). The device truncates in hardware.
GRADSYNC_HD inline float to_float_odd(double d)
{
#if defined(__CUDA_ARCH__)
    const float t = __double2float_rz(d);
    return double(t) != d && d == d ? __uint_as_float(__float_as_uint(t) | 1u) : t;
#else
    return gradsync::detail::double_to_float_odd(d);
#endif
}

// Widening to the accumulate type and rounding back, per kernel element type.
template <class K>
struct ops {
    using acc = K;
    GRADSYNC_HD static K widen(K x) { return x; }
    GRADSYNC_HD static K narrow(K x) { return x; }
    GRADSYNC_HD static K from_double(double x) { return K(x); }
};

// 16-bit types: CUDA's conversions under nvcc (host and device), gradsync's elsewhere; all
// round to nearest even.
template <class K>
struct ops16 {
    using acc = float;
    GRADSYNC_HD static float widen(K x)
    {
#if defined(__CUDACC__)
        if constexpr (std::is_same_v<K, half_k>)
            return __half2float(x);
        else
            return __bfloat162float(x);
#else
        return float(x);
#endif
    }
    GRADSYNC_HD static K narrow(float x)
    {
#if defined(__CUDACC__)
        if constexpr (std::is_same_v<K, half_k>)
            return __float2half_rn(x);
        else
            return __float2bfloat16_rn(x);
#else
        return K(x);
#endif
    }
    GRADSYNC_HD static K from_double(double x) { return narrow(to_float_odd(x)); }
};

template <>
struct ops<half_k> : ops16<half_k> {};
template <>
struct ops<bfloat16_k> : ops16<bfloat16_k> {};

template <class K>
struct add_op {
    GRADSYNC_HD K operator()(K a, K b) const { return ops<K>::narrow(ops<K>::widen(a) + ops<K>::widen(b)); }
};

template <class K>
struct scale_op {
    typename ops<K>::acc factor;
    GRADSYNC_HD K operator()(K a) const { return ops<K>::narrow(ops<K>::widen(a) * factor); }
};

template <class K>
struct canonical_nan_op {
    K quiet;
    GRADSYNC_HD K operator()(K x) const { return ops<K>::widen(x) != ops<K>::widen(x) ? quiet : x; }
};

inline void check_sizes(const char* kernel, std::size_t a, std::size_t b)
{
    if (a != b)
        throw usage_error(std::string("gradsync::kernels::") + kernel + " (Thrust): operands hold " +
                          std::to_string(a) + " and " + std::to_string(b) + " elements");
}

} // namespace thrust_detail

template <class Exec, element T>
void add(const Exec& exec, std::span<T> acc, std::span<const T> in)
{
    thrust_detail::check_sizes("add", acc.size(), in.size());
    using K = thrust_detail::kernel_t<T>;
    K* a = thrust_detail::kernel_data(acc);
    thrust::transform(exec, a, a + acc.size(), thrust_detail::kernel_data(in), a, thrust_detail::add_op<K>{});
}

template <class Exec, element T>
void scale(const Exec& exec, std::span<T> x, accumulate_t<T> factor)
{
    using K = thrust_detail::kernel_t<T>;
    K* p = thrust_detail::kernel_data(x);
    thrust::transform(exec, p, p + x.size(), p, thrust_detail::scale_op<K>{factor});
}

template <class Exec, element T>
void canonicalize_nan(const Exec& exec, std::span<T> x)
{
    T quiet = T(std::numeric_limits<float>::quiet_NaN());
    canonicalize_nan<T>(std::span<T>(&quiet, 1)); // the host kernel's bits, wherever this runs
    using K = thrust_detail::kernel_t<T>;
    K* p = thrust_detail::kernel_data(x);
    thrust::transform(exec, p, p + x.size(), p, thrust_detail::canonical_nan_op<K>{std::bit_cast<K>(quiet)});
}

template <class Exec, element T>
void zero(const Exec& exec, std::span<T> x)
{
    using K = thrust_detail::kernel_t<T>;
    K* p = thrust_detail::kernel_data(x);
    thrust::fill(exec, p, p + x.size(), std::bit_cast<K>(T(0)));
}

} // namespace gradsync::kernels
