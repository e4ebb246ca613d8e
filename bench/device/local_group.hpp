// The allreduce and Adasum tables' runs: fp32 allreduces on the ranks of one local_group
// sharing the GPU, on the direct, staged and host paths.
#pragma once

#include <cuda_runtime.h>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <utility>
#include <vector>

#include <gradsync/device.hpp>
#include <gradsync/gradsync.hpp>

#include "cases.hpp"
#include "median_table.hpp"
#include "rank_reducer.hpp"
#include "resnet50_layers.hpp"

namespace device_bench {

// The cases of one repetition on a local group, as (case, bytes), sizes outermost so that
// the cases of a size run close in time.
inline std::vector<std::pair<bench_case, std::size_t>> local_cases()
{
    std::vector<std::pair<bench_case, std::size_t>> cases;
    const auto add = [&](policy_kind p, side s, algorithm_kind a, bool layered, std::size_t bytes) {
        cases.push_back({bench_case{p, s, a, layered}, bytes});
    };
    for (std::size_t bytes : adasum_sizes) {
        if (std::find(sum_sizes.begin(), sum_sizes.end(), bytes) != sum_sizes.end()) {
            add(policy_kind::sum, side::host, algorithm_kind::automatic, false, bytes);
            add(policy_kind::sum, side::staged, algorithm_kind::automatic, false, bytes);
        }
        for (algorithm_kind a : adasum_algorithms) {
            add(policy_kind::sum, side::direct, a, false, bytes);
            add(policy_kind::adasum, side::direct, a, false, bytes);
            if (bytes <= staged_adasum_limit)
                add(policy_kind::adasum, side::staged, a, false, bytes);
        }
        if (bytes == layered_bytes)
            for (algorithm_kind a : adasum_algorithms) {
                add(policy_kind::sum, side::direct, a, true, bytes);
                add(policy_kind::adasum, side::direct, a, true, bytes);
                add(policy_kind::adasum, side::staged, a, true, bytes);
            }
    }
    return cases;
}

// Rank 0 drives Google Benchmark; before each benchmark a barrier tells the other ranks the
// case, size and (fixed) iteration count, and they run that many allreduces alongside. A
// rank that fails leaves the barrier (so that no rank waits there for it) and aborts the
// group, whose waits then fail on every rank; a wait that hangs fails after the deadline.
inline void allreduce_runs(int ranks, int reps, gradsync_bench::median_table& table)
{
    gradsync::local_group group(
        ranks, gradsync::local_options{.deadline = std::chrono::seconds(60), .copy = gradsync::device_copy});
    std::barrier sync(ranks);
    std::atomic<std::size_t> command_bytes{0}; // 0 ends the run
    bench_case command_case;                   // written by rank 0 before the barrier
    std::atomic<std::int64_t> iterations{0};
    const std::vector<std::pair<bench_case, std::size_t>> cases = local_cases();
    const std::size_t largest = adasum_sizes.back() / sizeof(float);
    const std::size_t largest_host = sum_sizes.back() / sizeof(float);
    const std::vector<std::size_t> layers = gradsync_bench::resnet50_layers(layered_bytes / sizeof(float));
    const auto layers_of = [&](const bench_case& c) {
        return c.layered ? std::span<const std::size_t>(layers) : std::span<const std::size_t>();
    };

    group.run([&](gradsync::local_communicator& comm) {
        cudaStream_t stream = nullptr;
        try {
            cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
            rank_data data(comm.rank(), largest, largest_host, stream);
            if (comm.rank() != 0) {
                for (;;) {
                    sync.arrive_and_wait();
                    const std::size_t bytes = command_bytes.load();
                    if (bytes == 0)
                        break;
                    const bench_case c = command_case;
                    rank_reducer reduce(comm, c, bytes / sizeof(float), layers_of(c), data);
                    for (std::int64_t i = iterations.load() + 1; i > 0; --i) // + the untimed first call
                        reduce();
                }
            } else {
                for (int rep = 0; rep < reps; ++rep)
                    for (const auto& [c, bytes] : cases) {
                        const auto iters = iterations_of(c, bytes, ranks);
                        benchmark::RegisterBenchmark(
                            gradsync_bench::bench_name(c.name(), bytes, rep).c_str(),
                            [&, c = c, bytes = bytes, iters](benchmark::State& s) {
                                command_case = c;
                                command_bytes.store(bytes);
                                iterations.store(iters);
                                sync.arrive_and_wait(); // announce: others plan their reducer
                                rank_reducer reduce(comm, c, bytes / sizeof(float), layers_of(c), data);
                                reduce(); // untimed: first-use costs
                                for (auto _ : s)
                                    reduce();
                            })
                            ->Iterations(iters)
                            ->UseRealTime()
                            ->Unit(benchmark::kMicrosecond);
                    }
                std::printf("\n-- allreduce on %d local_group ranks sharing the GPU\n", ranks);
                std::fflush(stdout);
                benchmark::RunSpecifiedBenchmarks(&table);
                benchmark::ClearRegisteredBenchmarks();
                command_bytes.store(0);
                sync.arrive_and_wait();
            }
        } catch (...) {
            if (comm.rank() == 0)
                benchmark::ClearRegisteredBenchmarks();
            sync.arrive_and_drop();
            if (stream)
                cudaStreamDestroy(stream);
            throw;
        }
        cudaStreamDestroy(stream);
    });
}

} // namespace device_bench
