// bench_device: the device path on one GPU in four tables, the Thrust kernels, allreduce of
// device buffers, device Adasum and (built with NCCL) one NCCL rank, each against its
// baseline. What the tables measure and how to read them: docs/gpu.md, "bench_device".
#include <cuda_runtime.h>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "device/kernels.hpp"
#include "device/local_group.hpp"
#include "device/summary.hpp"
#if GRADSYNC_BENCH_NCCL
#include "device/nccl.hpp"
#endif
#include "median_table.hpp"
#include "resnet50_layers.hpp"

int main(int argc, char** argv)
{
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        std::printf("skipped: no usable CUDA device\n");
        return 77;
    }
    benchmark::Initialize(&argc, argv);
    const char* reps_env = std::getenv("GRADSYNC_BENCH_REPS");
    const int reps = reps_env ? std::max(1, std::atoi(reps_env)) : 3;
    const std::vector<int> rank_counts{2, 4, 8};
    gradsync_bench::median_table kernels;
    std::vector<std::unique_ptr<gradsync_bench::median_table>> allreduce;
    for (std::size_t i = 0; i < rank_counts.size(); ++i)
        allreduce.push_back(std::make_unique<gradsync_bench::median_table>());
#if GRADSYNC_BENCH_NCCL
    gradsync_bench::median_table nccl;
#endif
    // A part that fails says why; the others still run, the summary shows what ran, and the
    // exit status is 1.
    bool failed = false;
    const auto part = [&](const std::string& what, auto run) {
        try {
            run();
        } catch (const std::exception& e) {
            std::fprintf(stderr, "bench_device: %s failed: %s\n", what.c_str(), e.what());
            std::printf("\n-- %s FAILED: %s\n", what.c_str(), e.what());
            failed = true;
        }
    };
    part("kernels", [&] { device_bench::kernel_runs(reps, kernels); });
    for (std::size_t i = 0; i < rank_counts.size(); ++i)
        part("allreduce on " + std::to_string(rank_counts[i]) + " ranks",
             [&] { device_bench::allreduce_runs(rank_counts[i], reps, *allreduce[i]); });
#if GRADSYNC_BENCH_NCCL
    part("allreduce over NCCL", [&] { device_bench::nccl_runs(reps, nccl); });
#endif

    std::printf("\n== summary\n");
    device_bench::print_kernels(kernels);
    device_bench::print_sum(rank_counts, allreduce);
    device_bench::print_adasum(device_bench::adasum_rows(rank_counts, allreduce),
                               gradsync_bench::resnet50_layers(device_bench::layered_bytes / sizeof(float)).size());
#if GRADSYNC_BENCH_NCCL
    device_bench::print_nccl(nccl);
#endif
    if (failed)
        std::printf("\nsome parts FAILED (above): their rows are missing or partial\n");
    return failed ? 1 : 0;
}
