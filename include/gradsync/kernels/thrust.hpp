// Kernels through Thrust: the host kernels' arithmetic (kernels/host.hpp and
// kernels/host_adasum.hpp) on any Thrust execution policy, so one source runs on a CUDA
// stream (thrust::cuda::par_nosync.on(s), under nvcc) and on the CPU (thrust::omp::par,
// thrust::tbb::par, thrust::cpp::par).
//
//   add(exec, acc, in)                   acc[i] = acc[i] + in[i]
//   scale(exec, x, f)                    x[i] = x[i] * f
//   scaled_add(exec, out, ca, a, cb, b)  out[i] = fma(ca, a[i], cb*b[i]); out may be a or b
//   triple(exec, a, b, result, ws)       *result = [a.b, a.a, b.b]
//   add_triple(exec, a, b, sums, ws)     sums[0..2] += [a.b, a.a, b.b] (three doubles)
//   zero(exec, x)                        x[i] = +0
//   canonicalize_nan(exec, x)            every NaN becomes the host kernel's quiet NaN
//
// Preconditions: every span (and result, ws) lies in memory that exec's kernels can reach;
// operands have equal sizes (else usage_error). Kernels are queued on exec: with
// par_nosync the call returns before they finish. Cost: one pass over the operands
// (memory-bound); triple adds about log64(n/256) small passes over partials.
//
// Rounding, as the host kernels: add and scale work in the accumulate type and round once
// per element; scaled_add forms the value in double and rounds once (16-bit types: to float
// with round-to-odd, then to nearest even). Elementwise results are bit for bit those of the
// host kernels, NaN payloads aside (CUDA's 16-bit conversions return one canonical NaN).
//
// The triple's summation order is fixed by n alone, never by the back end, the thread count
// or addresses, and there are no atomics, so it is bitwise reproducible everywhere (a GPU and
// a CPU give the same bits). Level 1 has m = max(1, ceil(n / 256)) lanes; lane j starts at
// +0 and accumulates x*x, x*y and y*y with fma in double over elements i = j, j+m, j+2m, ...
// (< n) in increasing order. Each further level reduces the L partials of the level before
// with m' = ceil(L / 64) lanes the same way (lane j adds partials j, j+m', ... to +0 in
// order) until one remains. Strided lanes let neighbouring GPU threads read neighbouring
// elements. It differs from the host kernels' order, so the two agree to rounding error, not
// bit for bit. ws holds the partials: triple_workspace(n) of them.
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
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/transform.h>

#include <gradsync/error.hpp>
#include <gradsync/kernels/host.hpp>
#include <gradsync/kernels/host_adasum.hpp>
#include <gradsync/types.hpp>

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define GRADSYNC_HD __host__ __device__
#else
#define GRADSYNC_HD
#endif
#if defined(__CUDA_ARCH__)
#define GRADSYNC_UNROLL _Pragma("unroll")
#else
#define GRADSYNC_UNROLL
#endif

namespace gradsync::kernels {

inline constexpr std::size_t triple_first_fanout = 256; // elements per level-1 lane
inline constexpr std::size_t triple_fanout = 64;        // partials per lane above level 1

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
// a single rounding (types.hpp explains why). The device truncates in hardware.
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
struct scaled_add_op {
    double ca, cb;
    GRADSYNC_HD K operator()(K a, K b) const
    {
        return ops<K>::from_double(fma_d(ca, double(ops<K>::widen(a)), mul_d(cb, double(ops<K>::widen(b)))));
    }
};

template <class K>
struct canonical_nan_op {
    K quiet;
    GRADSYNC_HD K operator()(K x) const { return ops<K>::widen(x) != ops<K>::widen(x) ? quiet : x; }
};

// Visits i = j, j + lanes, ... (< n) in increasing order, loading B of them before using
// them: a GPU thread needs several loads in flight to keep memory busy. The batch sizes
// below are the fastest found (docs/results.md, "Kernel notes").
template <std::size_t B, class Load, class Use>
GRADSYNC_HD void strided_in_batches(std::size_t j, std::size_t n, std::size_t lanes, Load load, Use use)
{
    using V = decltype(load(j));
    std::size_t i = j;
    for (; i + (B - 1) * lanes < n; i += B * lanes) {
        V v[B];
        GRADSYNC_UNROLL
        for (std::size_t u = 0; u < B; ++u)
            v[u] = load(i + u * lanes);
        GRADSYNC_UNROLL
        for (std::size_t u = 0; u < B; ++u)
            use(v[u]);
    }
    for (; i < n; i += lanes)
        use(load(i));
}

template <class K>
struct element_pair {
    K x, y;
};

// Level 1 of the triple: lane j over elements j, j + lanes, ...
template <class K>
struct triple_lane {
    static constexpr std::size_t batch = sizeof(K) == 4 ? 16 : 8;
    const K* a;
    const K* b;
    std::size_t n;
    std::size_t lanes;
    GRADSYNC_HD dot_triple operator()(std::size_t j) const
    {
        double ab = 0, aa = 0, bb = 0;
        strided_in_batches<batch>(
            j, n, lanes, [this](std::size_t i) { return element_pair<K>{a[i], b[i]}; },
            [&](element_pair<K> e) {
                const double x = double(ops<K>::widen(e.x)), y = double(ops<K>::widen(e.y));
                ab = fma_d(x, y, ab);
                aa = fma_d(x, x, aa);
                bb = fma_d(y, y, bb);
            });
        return dot_triple{ab, aa, bb};
    }
};

// Levels above: lane j over partials j, j + lanes, ...
struct partial_lane {
    static constexpr std::size_t batch = 16;
    const dot_triple* p;
    std::size_t n;
    std::size_t lanes;
    GRADSYNC_HD dot_triple operator()(std::size_t j) const
    {
        double ab = 0, aa = 0, bb = 0;
        strided_in_batches<batch>(
            j, n, lanes, [this](std::size_t i) { return p[i]; },
            [&](const dot_triple& t) {
                ab = ab + t.ab;
                aa = aa + t.aa;
                bb = bb + t.bb;
            });
        return dot_triple{ab, aa, bb};
    }
};

// The top level of add_triple: the one lane's triple added to three doubles.
template <class Lane>
struct add_top {
    Lane lane;
    double* sums;
    GRADSYNC_HD void operator()(std::size_t) const
    {
        const dot_triple t = lane(0);
        sums[0] = sums[0] + t.ab;
        sums[1] = sums[1] + t.aa;
        sums[2] = sums[2] + t.bb;
    }
};

constexpr std::size_t lanes_of(std::size_t n, std::size_t fanout) noexcept
{
    return n <= fanout ? 1 : (n + fanout - 1) / fanout;
}

inline void check_sizes(const char* kernel, std::size_t a, std::size_t b)
{
    if (a != b)
        throw usage_error(std::string("gradsync::kernels::") + kernel + " (Thrust): operands hold " +
                          std::to_string(a) + " and " + std::to_string(b) + " elements");
}

} // namespace thrust_detail

// Partials triple() needs for n elements: the two largest levels below the top.
constexpr std::size_t triple_workspace(std::size_t n) noexcept
{
    const std::size_t first = thrust_detail::lanes_of(n, triple_first_fanout);
    if (first == 1)
        return 0;
    const std::size_t second = thrust_detail::lanes_of(first, triple_fanout);
    return first + (second == 1 ? 0 : second);
}

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
void scaled_add(const Exec& exec, std::span<T> out, double ca, std::span<const T> a, double cb, std::span<const T> b)
{
    thrust_detail::check_sizes("scaled_add", out.size(), a.size());
    thrust_detail::check_sizes("scaled_add", out.size(), b.size());
    using K = thrust_detail::kernel_t<T>;
    const K* x = thrust_detail::kernel_data(a);
    thrust::transform(exec, x, x + a.size(), thrust_detail::kernel_data(b), thrust_detail::kernel_data(out),
                      thrust_detail::scaled_add_op<K>{ca, cb});
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

namespace thrust_detail {

// The levels of the triple of (a, b) below the top (into workspace), then top(lane) with the
// one lane left: triple() stores its triple, add_triple() adds it.
template <class Exec, element T, class Top>
void triple_levels(const Exec& exec, const char* kernel, std::span<const T> a, std::span<const T> b,
                   std::span<dot_triple> workspace, Top top)
{
    check_sizes(kernel, a.size(), b.size());
    const std::size_t n = a.size();
    if (workspace.size() < triple_workspace(n))
        throw usage_error(std::string("gradsync::kernels::") + kernel + " (Thrust): " + std::to_string(n) +
                          " elements need a workspace of " + std::to_string(triple_workspace(n)) + " partials, got " +
                          std::to_string(workspace.size()));
    using count = thrust::counting_iterator<std::size_t>;
    const triple_lane<kernel_t<T>> first{kernel_data(a), kernel_data(b), n, lanes_of(n, triple_first_fanout)};
    if (first.lanes == 1)
        return top(first);
    std::size_t lanes = first.lanes;
    dot_triple* const low = workspace.data();
    dot_triple* const high = low + lanes;
    thrust::transform(exec, count(0), count(lanes), low, first);
    const dot_triple* in = low;
    for (;;) {
        const partial_lane next{in, lanes, lanes_of(lanes, triple_fanout)};
        if (next.lanes == 1)
            return top(next);
        dot_triple* const out = in == low ? high : low;
        thrust::transform(exec, count(0), count(next.lanes), out, next);
        in = out;
        lanes = next.lanes;
    }
}

} // namespace thrust_detail

template <class Exec, element T>
void triple(const Exec& exec, std::span<const T> a, std::span<const T> b, dot_triple* result,
            std::span<dot_triple> workspace)
{
    using count = thrust::counting_iterator<std::size_t>;
    thrust_detail::triple_levels(exec, "triple", a, b, workspace, [&](const auto& lane) {
        thrust::transform(exec, count(0), count(1), result, lane);
    });
}

template <class Exec, element T>
void add_triple(const Exec& exec, std::span<const T> a, std::span<const T> b, double* sums,
                std::span<dot_triple> workspace)
{
    using count = thrust::counting_iterator<std::size_t>;
    thrust_detail::triple_levels(exec, "add_triple", a, b, workspace, [&](const auto& lane) {
        thrust::for_each(exec, count(0), count(1), thrust_detail::add_top<std::decay_t<decltype(lane)>>{lane, sums});
    });
}

template <class Exec, element T>
void zero(const Exec& exec, std::span<T> x)
{
    using K = thrust_detail::kernel_t<T>;
    K* p = thrust_detail::kernel_data(x);
    thrust::fill(exec, p, p + x.size(), std::bit_cast<K>(T(0)));
}

} // namespace gradsync::kernels

#undef GRADSYNC_HD
#undef GRADSYNC_UNROLL
