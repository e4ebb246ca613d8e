// The NCCL table's runs: one NCCL rank on the GPU (NCCL refuses two on one GPU), so no
// message moves and each call's overhead is what is timed.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdio>
#include <stdexcept>
#include <string>

#include <gradsync/comm/nccl/nccl.hpp>
#include <gradsync/device.hpp>
#include <gradsync/gradsync.hpp>

#include "cases.hpp"
#include "median_table.hpp"
#include "rank_reducer.hpp"

namespace device_bench {

static_assert(gradsync::has_plan<float, gradsync::nccl_communicator, gradsync::automatic, gradsync::adasum,
                                 gradsync::space_memory<gradsync::cuda_stream>>,
              "the benchmark runs Adasum over NCCL on the direct path");

inline constexpr bench_case nccl_cases[] = {
    {policy_kind::sum, side::direct, algorithm_kind::nccl_passthrough, false},
    {policy_kind::sum, side::direct, algorithm_kind::automatic, false},
    {policy_kind::adasum, side::direct, algorithm_kind::automatic, false},
};

inline void nccl_check(ncclResult_t r, const char* call)
{
    if (r != ncclSuccess)
        throw std::runtime_error(std::string("bench_device: ") + call + " failed: " + ncclGetErrorString(r));
}

// One NCCL rank on device 0, driven by this thread.
inline void nccl_runs(int reps, gradsync_bench::median_table& table)
{
    ncclComm_t nccl = nullptr;
    const int devices[] = {0};
    nccl_check(ncclCommInitAll(&nccl, 1, devices), "ncclCommInitAll");
    cudaStream_t stream = nullptr;
    try {
        cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
        rank_data data(0, adasum_sizes.back() / sizeof(float), 0, stream);
        gradsync::nccl_communicator comm(nccl, stream);
        for (int rep = 0; rep < reps; ++rep)
            for (std::size_t bytes : adasum_sizes)
                for (const bench_case& c : nccl_cases)
                    benchmark::RegisterBenchmark(gradsync_bench::bench_name(c.name(), bytes, rep).c_str(),
                                                 [&, c, bytes](benchmark::State& s) {
                                                     rank_reducer reduce(comm, c, bytes / sizeof(float), {}, data);
                                                     reduce(); // untimed: first-use costs
                                                     for (auto _ : s)
                                                         reduce();
                                                 })
                        ->Iterations(iterations_of(c, bytes, 1))
                        ->UseRealTime()
                        ->Unit(benchmark::kMicrosecond);
        std::printf("\n-- allreduce over NCCL, one rank\n");
        std::fflush(stdout);
        benchmark::RunSpecifiedBenchmarks(&table);
        benchmark::ClearRegisteredBenchmarks();
    } catch (...) {
        benchmark::ClearRegisteredBenchmarks();
        if (stream)
            cudaStreamDestroy(stream);
        ncclCommDestroy(nccl);
        throw;
    }
    cudaStreamDestroy(stream);
    ncclCommDestroy(nccl);
}

} // namespace device_bench
