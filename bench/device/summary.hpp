// The summary's tables, printed from the medians once every part has run; a case that did
// not run shows "-".
#pragma once

#include <cstddef>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cases.hpp"
#include "kernels.hpp"
#include "median_table.hpp"
#if GRADSYNC_BENCH_NCCL
#include "nccl.hpp"
#endif

namespace device_bench {

// "12.3" (microseconds), or "-" for a case that did not run.
inline std::string micros(double seconds)
{
    if (seconds <= 0)
        return "-";
    char text[32];
    std::snprintf(text, sizeof text, "%.1f", seconds * 1e6);
    return text;
}

// a / b, or "-" where either did not run.
inline std::string quotient(double a, double b)
{
    if (a <= 0 || b <= 0)
        return "-";
    char text[32];
    std::snprintf(text, sizeof text, "%.3f", a / b);
    return text;
}

inline void print_kernels(const gradsync_bench::median_table& kernels)
{
    for (const char* type : {"fp16", "fp32", "fp64"}) {
        const std::string t = type;
        std::printf("\n%s kernels on the GPU, bytes = one operand", type);
        kernels.print({t + "_copy", t + "_add", t + "_triple", t + "_scaled_add"}, t + "_copy", {kernel_bytes}, 1.0);
    }
}

inline void print_sum(const std::vector<int>& rank_counts,
                      const std::vector<std::unique_ptr<gradsync_bench::median_table>>& tables)
{
    const auto sum_case = [](side s) { return bench_case{policy_kind::sum, s, algorithm_kind::automatic, false}.name(); };
    for (std::size_t i = 0; i < rank_counts.size(); ++i) {
        const int ranks = rank_counts[i];
        std::printf("\nallreduce, %d local_group ranks on one GPU, fp32 Sum, automatic", ranks);
        tables[i]->print({sum_case(side::host), sum_case(side::staged), sum_case(side::direct)},
                         sum_case(side::host), sum_sizes, 2.0 * (ranks - 1) / ranks);
    }
}

struct adasum_row {
    int ranks;
    std::size_t bytes;
    bool layered;
    algorithm_kind algorithm;
    double sum, adasum, staged; // medians in seconds, 0 where not run
};

inline std::vector<adasum_row> adasum_rows(const std::vector<int>& rank_counts,
                                           const std::vector<std::unique_ptr<gradsync_bench::median_table>>& tables)
{
    std::vector<adasum_row> rows;
    for (std::size_t i = 0; i < rank_counts.size(); ++i)
        for (std::size_t bytes : adasum_sizes)
            for (bool layered : {false, true}) {
                if (layered && bytes != layered_bytes)
                    continue;
                for (algorithm_kind a : adasum_algorithms) {
                    const auto median = [&](policy_kind p, side s) {
                        return tables[i]->median(bench_case{p, s, a, layered}.name(), bytes);
                    };
                    rows.push_back({rank_counts[i], bytes, layered, a, median(policy_kind::sum, side::direct),
                                    median(policy_kind::adasum, side::direct),
                                    median(policy_kind::adasum, side::staged)});
                }
            }
    return rows;
}

inline void print_adasum(const std::vector<adasum_row>& rows, std::size_t layer_count)
{
    std::printf("\nAdasum, fp32, local_group ranks sharing the GPU; layers: 1, or ResNet-50's %zu scaled to the size\n",
                layer_count);
    std::printf("medians of interleaved repetitions; adasum/sum = direct Adasum time / direct Sum time, "
                "staged/adasum = staged Adasum time / direct Adasum time\n");
    std::printf("%5s %-8s %6s %-17s %14s %17s %17s %10s %13s\n", "ranks", "size", "layers", "algorithm",
                "sum_direct_us", "adasum_direct_us", "adasum_staged_us", "adasum/sum", "staged/adasum");
    for (const adasum_row& r : rows)
        std::printf("%5d %-8s %6zu %-17s %14s %17s %17s %10s %13s\n", r.ranks,
                    gradsync_bench::size_text(r.bytes).c_str(), r.layered ? layer_count : std::size_t(1),
                    algorithm_name(r.algorithm), micros(r.sum).c_str(), micros(r.adasum).c_str(),
                    micros(r.staged).c_str(), quotient(r.adasum, r.sum).c_str(), quotient(r.staged, r.adasum).c_str());

    // Adasum's paper costs it under 2% of Sum's throughput; 1.15 leaves room for the triples'
    // extra pass over the data.
    constexpr double adasum_bound = 1.15, staged_bound = 20.0;
    std::printf("\nacceptance at 64 MiB: direct Adasum at most %.2fx direct Sum, and at least %.0fx faster than "
                "staged Adasum\n",
                adasum_bound, staged_bound);
    std::printf("%5s %6s %-17s %10s %6s %13s %6s\n", "ranks", "layers", "algorithm", "adasum/sum", "<=1.15",
                "staged/adasum", ">=20");
    for (const adasum_row& r : rows) {
        if (r.bytes != layered_bytes)
            continue;
        const auto verdict = [](double a, double b, bool below, double bound) {
            if (a <= 0 || b <= 0)
                return "-";
            return (below ? a / b <= bound : a / b >= bound) ? "yes" : "NO";
        };
        std::printf("%5d %6zu %-17s %10s %6s %13s %6s\n", r.ranks, r.layered ? layer_count : std::size_t(1),
                    algorithm_name(r.algorithm), quotient(r.adasum, r.sum).c_str(),
                    verdict(r.adasum, r.sum, true, adasum_bound), quotient(r.staged, r.adasum).c_str(),
                    verdict(r.staged, r.adasum, false, staged_bound));
    }
}

#if GRADSYNC_BENCH_NCCL
inline void print_nccl(const gradsync_bench::median_table& table)
{
    const std::string passthrough = nccl_cases[0].name(), sum = nccl_cases[1].name(), adasum = nccl_cases[2].name();
    std::printf("\nallreduce over NCCL, one rank on the GPU (no messages: each call's overhead), fp32, one layer\n");
    std::printf("medians of interleaved repetitions; adasum/passthrough = direct Adasum time / nccl_passthrough Sum "
                "time\n");
    std::printf("%-8s %16s %14s %17s %19s\n", "size", "passthrough_us", "sum_direct_us", "adasum_direct_us",
                "adasum/passthrough");
    for (std::size_t bytes : adasum_sizes) {
        const double p = table.median(passthrough, bytes), s = table.median(sum, bytes),
                     a = table.median(adasum, bytes);
        std::printf("%-8s %16s %14s %17s %19s\n", gradsync_bench::size_text(bytes).c_str(), micros(p).c_str(),
                    micros(s).c_str(), micros(a).c_str(), quotient(a, p).c_str());
    }
}
#endif

} // namespace device_bench
