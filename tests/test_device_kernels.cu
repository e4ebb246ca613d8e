// The Thrust kernels (kernels/thrust.hpp) on a GPU, thrust::cuda::par_nosync.on(stream),
// against the host kernels and the documented triple order (gpu/kernel_reference.hpp):
//  - add, scale and scaled_add bit for bit (NaN: NaN) for fp16, bf16, fp32 and fp64, with
//    Inf and NaN among the inputs, out aliasing a or b, lengths 0 .. 2^24+3;
//  - triple bit for bit against the documented order, hence the same bits as the CPU back
//    ends (test_thrust_kernels), on every repetition, up to 2^26+3 elements (four levels of
//    partials); it and the host kernel each within Higham's rounding bound of the exact
//    triple; NaN propagates;
//  - part tables (kernels/thrust_adasum.hpp): each layer's triples, added in part order, and
//    the scaled add with the coefficients formed on the device, bit for bit those of the
//    CPU's sequential back end, layers of up to 2^24+3 elements.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include <gradsync/core/cuda.hpp>
#include <gradsync/kernels/host.hpp>
#include <gradsync/kernels/host_adasum.hpp>
#include <gradsync/kernels/thrust.hpp>
#include <gradsync/kernels/thrust_adasum.hpp>
#include <thrust/system/cpp/execution_policy.h>

#include "gpu/kernel_reference.hpp"
#include "reference.hpp"

namespace {

using gradsync::bfloat16;
using gradsync::kernels::dot_triple;
using namespace kernel_reference;

const std::vector<std::size_t> lengths{0, 1, 7, 255, 256, 257, 1000, 16385, 1048587, (std::size_t(1) << 24) + 3};

struct stream {
    cudaStream_t s = nullptr;
    stream() { gradsync::detail::cuda_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"); }
    ~stream() { cudaStreamDestroy(s); }
    auto execution() const { return thrust::cuda::par_nosync.on(s); }
};

// A device copy of host values, and back. cudaMemcpy from pageable memory may return before
// the data lands, so the device is synchronized before kernels on another stream read it.
template <class T>
struct on_device {
    gradsync::device_buffer<T> d;
    explicit on_device(const std::vector<T>& v) : d(v.size())
    {
        gradsync::detail::cuda_check(cudaMemcpy(d.data(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice),
                                     "cudaMemcpy");
        gradsync::detail::cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    }
    std::span<T> span() { return {d.data(), d.size()}; }
    std::span<const T> cspan() const { return {d.data(), d.size()}; }
    std::vector<T> read() const
    {
        gradsync::detail::cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        std::vector<T> v(d.size());
        gradsync::detail::cuda_check(cudaMemcpy(v.data(), d.data(), v.size() * sizeof(T), cudaMemcpyDeviceToHost),
                                     "cudaMemcpy");
        return v;
    }
};

template <class T>
dot_triple device_triple(const stream& st, const on_device<T>& a, const on_device<T>& b)
{
    gradsync::device_buffer<dot_triple> ws(gradsync::kernels::triple_workspace(a.d.size())), result(1);
    gradsync::kernels::triple(st.execution(), a.cspan(), b.cspan(), result.data(),
                              std::span<dot_triple>(ws.data(), ws.size()));
    dot_triple t;
    gradsync::detail::cuda_check(cudaMemcpyAsync(&t, result.data(), sizeof t, cudaMemcpyDeviceToHost, st.s),
                                 "cudaMemcpyAsync");
    gradsync::detail::cuda_check(cudaStreamSynchronize(st.s), "cudaStreamSynchronize");
    return t;
}

} // namespace

TEMPLATE_TEST_CASE("CUDA add, scale and scaled_add give the host kernels' bits", "[kernels]", gradsync::half,
                   bfloat16, float, double)
{
    using T = TestType;
    using A = gradsync::accumulate_t<T>;
    const stream st;
    const A factor = A(1) / A(3);
    const double ca = 1 - 0x1.3p-3, cb = 0.7 + 0x1.0p-40;
    for (std::size_t n : lengths) {
        INFO(ref::type_name<T>() << ", n = " << n);
        const std::vector<T> a = values<T>(1 + n, n, true), b = values<T>(2 + n, n, true);

        std::vector<T> want = a;
        gradsync::kernels::add<T>(std::span<T>(want), std::span<const T>(b));
        on_device<T> acc(a);
        const on_device<T> in(b);
        gradsync::kernels::add(st.execution(), acc.span(), in.cspan());
        CHECK(first_difference(acc.read(), want) == -1);

        gradsync::kernels::scale<T>(std::span<T>(want), factor);
        gradsync::kernels::scale(st.execution(), acc.span(), factor);
        CHECK(first_difference(acc.read(), want) == -1);

        std::vector<T> combined(n);
        gradsync::kernels::scaled_add<T>(std::span<T>(combined), ca, std::span<const T>(a), cb, std::span<const T>(b));
        const on_device<T> da(a);
        on_device<T> out(std::vector<T>(n, T(1.0f))), on_a(a), on_b(b);
        gradsync::kernels::scaled_add(st.execution(), out.span(), ca, da.cspan(), cb, in.cspan());
        gradsync::kernels::scaled_add(st.execution(), on_a.span(), ca, on_a.cspan(), cb, in.cspan());
        gradsync::kernels::scaled_add(st.execution(), on_b.span(), ca, da.cspan(), cb, on_b.cspan());
        CHECK(first_difference(out.read(), combined) == -1);
        CHECK(first_difference(on_a.read(), combined) == -1);
        CHECK(first_difference(on_b.read(), combined) == -1);
    }
}

TEMPLATE_TEST_CASE("CUDA triple: the documented order bit for bit, close to the host kernel", "[kernels]",
                   gradsync::half, bfloat16, float, double)
{
    using T = TestType;
    const stream st;
    std::vector<std::size_t> ns = lengths;
    ns.push_back((std::size_t(1) << 26) + 3);
    for (std::size_t n : ns) {
        INFO(ref::type_name<T>() << ", n = " << n);
        const std::vector<T> a = values<T>(5 + n, n, false), b = values<T>(6 + n, n, false);
        const dot_triple want = triple_in_documented_order(a, b);
        const on_device<T> da(a), db(b);
        for (int repeat = 0; repeat < 3; ++repeat) {
            INFO("repetition " << repeat);
            CHECK(same_bits(device_triple(st, da, db), want));
        }
        CHECK(close_to_host(want, a, b) == "");
    }
}

TEMPLATE_TEST_CASE("CUDA part tables give the CPU's bits: each layer's triples in part order, then the scaled add",
                   "[kernels]", gradsync::half, float, double)
{
    using T = TestType;
    using gradsync::kernels::adasum_part;
    const stream st;
    // Layers of one to four levels of partials, layer 1 in two parts, results in place of a
    // or of b, operands in data and in scratch.
    const std::size_t sizes[] = {1, 257, 16385, 1048587, (std::size_t(1) << 24) + 3};
    const std::size_t layer_of[] = {0, 1, 1, 2, 3};
    std::vector<adasum_part> parts;
    std::size_t at = 0;
    for (std::size_t p = 0; p < 5; ++p) {
        const std::uint32_t a = p % 2 ? gradsync::kernels::in_scratch : gradsync::kernels::in_data;
        parts.push_back({layer_of[p], at, at, at, sizes[p], a, a ^ 1u, p % 3 ? a : a ^ 1u});
        at += sizes[p];
    }
    const gradsync::kernels::part_lanes lanes(parts);
    const std::vector<T> data0 = values<T>(31, at, false), scratch0 = values<T>(32, at, false);

    std::vector<T> data = data0, scratch = scratch0;
    std::vector<double> sums(12, 0.5);
    std::vector<dot_triple> low(lanes.low), high(lanes.high);
    const gradsync::kernels::part_arrays host{parts.data(), lanes.starts.data(), lanes.flat.data(),
                                              lanes.groups.data()};
    gradsync::kernels::add_part_triples(thrust::cpp::par, lanes, host, 0, parts.size(),
                                        gradsync::kernels::adasum_operands<const T>{data.data(), scratch.data()},
                                        sums.data(), low.data(), high.data());
    gradsync::kernels::scaled_add_parts(thrust::cpp::par, lanes, host, 0, parts.size(),
                                        gradsync::kernels::adasum_operands<T>{data.data(), scratch.data()},
                                        sums.data());

    const on_device<adasum_part> d_parts(parts);
    const on_device<std::uint64_t> d_starts(lanes.starts), d_flat(lanes.flat), d_groups(lanes.groups);
    on_device<T> d_data(data0), d_scratch(scratch0);
    on_device<double> d_sums(std::vector<double>(12, 0.5));
    gradsync::device_buffer<dot_triple> d_low(lanes.low), d_high(lanes.high);
    const gradsync::kernels::part_arrays dev{d_parts.d.data(), d_starts.d.data(), d_flat.d.data(), d_groups.d.data()};
    gradsync::kernels::add_part_triples(st.execution(), lanes, dev, 0, parts.size(),
                                        gradsync::kernels::adasum_operands<const T>{d_data.d.data(), d_scratch.d.data()},
                                        d_sums.d.data(), d_low.data(), d_high.data());
    gradsync::kernels::scaled_add_parts(st.execution(), lanes, dev, 0, parts.size(),
                                        gradsync::kernels::adasum_operands<T>{d_data.d.data(), d_scratch.d.data()},
                                        d_sums.d.data());
    const std::vector<double> got = d_sums.read();
    for (std::size_t i = 0; i < sums.size(); ++i) {
        INFO("sum " << i);
        CHECK(std::bit_cast<std::uint64_t>(got[i]) == std::bit_cast<std::uint64_t>(sums[i]));
    }
    CHECK(first_difference(d_data.read(), data) == -1);
    CHECK(first_difference(d_scratch.read(), scratch) == -1);
}

TEST_CASE("CUDA triple propagates NaN and Inf", "[kernels]")
{
    const stream st;
    std::vector<float> a = values<float>(7, 100000, false), b = values<float>(8, 100000, false);
    a[4242] = NAN;
    b[99999] = -INFINITY;
    const dot_triple t = device_triple(st, on_device<float>(a), on_device<float>(b));
    CHECK(std::isnan(t.ab));
    CHECK(std::isnan(t.aa));
    CHECK(std::isinf(t.bb));
}
