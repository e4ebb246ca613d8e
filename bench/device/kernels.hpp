// The kernels table: the Thrust kernels (kernels/thrust.hpp) on 256 MiB per operand against
// a device-to-device copy of the same bytes, timed with CUDA events.
#pragma once

#include <cuda_runtime.h>

#include <benchmark/benchmark.h>

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include <gradsync/device.hpp>

#include "median_table.hpp"

namespace device_bench {

using gradsync::detail::cuda_check;

inline constexpr std::size_t kernel_bytes = std::size_t(256) << 20;

// Times each iteration with CUDA events on the stream (manual time).
template <class F>
void timed(benchmark::State& s, cudaStream_t stream, F&& body)
{
    cudaEvent_t start, stop;
    cuda_check(cudaEventCreate(&start), "cudaEventCreate");
    cuda_check(cudaEventCreate(&stop), "cudaEventCreate");
    for (auto _ : s) {
        cuda_check(cudaEventRecord(start, stream), "cudaEventRecord");
        body();
        cuda_check(cudaEventRecord(stop, stream), "cudaEventRecord");
        cuda_check(cudaEventSynchronize(stop), "cudaEventSynchronize");
        float ms = 0;
        cuda_check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
        s.SetIterationTime(double(ms) * 1e-3);
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
}

template <class T>
struct kernel_buffers {
    gradsync::device_buffer<T> a, b, out;
    gradsync::device_buffer<gradsync::kernels::dot_triple> workspace, result;
    explicit kernel_buffers(std::size_t n)
        : a(n), b(n), out(n), workspace(gradsync::kernels::triple_workspace(n)), result(1)
    {
        const std::vector<T> ones(n, T(0.5f));
        cuda_check(cudaMemcpy(a.data(), ones.data(), n * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
        cuda_check(cudaMemcpy(b.data(), ones.data(), n * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
        cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); // pageable copies may still be landing
    }
};

template <class T>
void register_kernels(const std::string& type, kernel_buffers<T>& buf, cudaStream_t stream, int rep)
{
    const std::size_t n = kernel_bytes / sizeof(T);
    const auto exec = thrust::cuda::par_nosync.on(stream);
    const std::span<T> a(buf.a.data(), n), out(buf.out.data(), n);
    const std::span<const T> ca(buf.a.data(), n), cb(buf.b.data(), n);
    auto reg = [&](const std::string& side, auto body) {
        benchmark::RegisterBenchmark(gradsync_bench::bench_name(type + "_" + side, kernel_bytes, rep).c_str(),
                                     [stream, body](benchmark::State& s) { timed(s, stream, body); })
            ->Iterations(20)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
    };
    reg("copy", [=] {
        cuda_check(cudaMemcpyAsync(out.data(), ca.data(), kernel_bytes, cudaMemcpyDeviceToDevice, stream),
                   "cudaMemcpyAsync");
    });
    reg("add", [=] { gradsync::kernels::add(exec, a, cb); });
    reg("triple", [=, &buf] {
        gradsync::kernels::triple(exec, ca, cb, buf.result.data(),
                                  std::span<gradsync::kernels::dot_triple>(buf.workspace.data(), buf.workspace.size()));
    });
    reg("scaled_add", [=] { gradsync::kernels::scaled_add(exec, out, 0.5, ca, 0.5, cb); });
}

inline void kernel_runs(int reps, gradsync_bench::median_table& table)
{
    cudaStream_t stream;
    cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    {
        kernel_buffers<gradsync::half> h(kernel_bytes / 2);
        kernel_buffers<float> f(kernel_bytes / 4);
        kernel_buffers<double> d(kernel_bytes / 8);
        for (int rep = 0; rep < reps; ++rep) {
            register_kernels("fp16", h, stream, rep);
            register_kernels("fp32", f, stream, rep);
            register_kernels("fp64", d, stream, rep);
        }
        benchmark::RunSpecifiedBenchmarks(&table);
        benchmark::ClearRegisteredBenchmarks();
    }
    cudaStreamDestroy(stream);
}

} // namespace device_bench
