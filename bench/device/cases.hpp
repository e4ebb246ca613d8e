// What one run of the allreduce tables is: the policy, the path, the algorithm, one layer or
// ResNet-50's, and the sizes and iteration counts the tables use.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "median_table.hpp"

namespace device_bench {

inline constexpr std::size_t MiB = std::size_t(1) << 20;

enum class side { direct, staged, host };
enum class policy_kind { sum, adasum };
enum class algorithm_kind { automatic, recursive_halving, ring, nccl_passthrough };

inline const char* side_name(side s) { return s == side::direct ? "direct" : s == side::staged ? "staged" : "host"; }
inline const char* policy_name(policy_kind p) { return p == policy_kind::sum ? "sum" : "adasum"; }
inline const char* algorithm_name(algorithm_kind a)
{
    switch (a) {
    case algorithm_kind::recursive_halving:
        return "recursive_halving";
    case algorithm_kind::ring:
        return "ring";
    case algorithm_kind::nccl_passthrough:
        return "passthrough";
    default:
        return "automatic";
    }
}

// What one benchmark runs on every rank: an fp32 allreduce of `policy` by `algorithm` on
// `where`'s memory and path, over one layer or ResNet-50's layers scaled to the size.
struct bench_case {
    policy_kind policy = policy_kind::sum;
    side where = side::direct;
    algorithm_kind algorithm = algorithm_kind::automatic;
    bool layered = false;

    // The table's key: "<policy>_<side>_<algorithm>[_resnet50]".
    std::string name() const
    {
        return std::string(policy_name(policy)) + "_" + side_name(where) + "_" + algorithm_name(algorithm) +
               (layered ? "_resnet50" : "");
    }
};

// Timed calls of one run: about 25 ms (direct) or 60 ms (staged, host) at a rough cost per
// call (the group's ranks share the GPU and the host, so it grows with ranks x bytes), at
// least 2 and at most 32.
inline benchmark::IterationCount iterations_of(const bench_case& c, std::size_t bytes, int ranks)
{
    const bool direct = c.where == side::direct;
    const benchmark::IterationCount n = gradsync_bench::iterations_for(
        bytes * std::size_t(ranks), direct ? 100e9 : 8e9, direct ? 200e-6 : 1e-3, direct ? 0.025 : 0.06);
    return std::min<benchmark::IterationCount>(n, 32);
}

// The per-rank sizes, and the one (64 MiB) of the ResNet-50 layout.
inline const std::vector<std::size_t> adasum_sizes{1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB, 256 * MiB};
inline constexpr std::size_t layered_bytes = 64 * MiB;
inline constexpr std::size_t staged_adasum_limit = 64 * MiB;
inline const std::vector<std::size_t> sum_sizes{1 * MiB, 64 * MiB};
inline constexpr algorithm_kind adasum_algorithms[] = {algorithm_kind::automatic, algorithm_kind::recursive_halving,
                                                       algorithm_kind::ring};

} // namespace device_bench
