// Collects the runs of interleaved benchmarks named "<side>/<bytes>/<repetition>" and
// prints, per size, the median time of every side and its ratio against a baseline side.
// Registering each (side, size) once per repetition interleaves the sides in time so that
// slow phases of a noisy machine hit all of them alike.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace gradsync_bench {

inline std::string size_text(std::size_t bytes)
{
    if (bytes >= (std::size_t(1) << 20))
        return std::to_string(bytes >> 20) + " MiB";
    if (bytes >= 1024)
        return std::to_string(bytes >> 10) + " KiB";
    return std::to_string(bytes) + " B";
}

inline std::string bench_name(const std::string& side, std::size_t bytes, int repetition)
{
    return side + "/" + std::to_string(bytes) + "/" + std::to_string(repetition);
}

class median_table : public benchmark::ConsoleReporter {
public:
    void ReportRuns(const std::vector<Run>& runs) override
    {
        ConsoleReporter::ReportRuns(runs);
        for (const Run& r : runs) {
            const std::string name = r.benchmark_name();
            const auto a = name.find('/'), b = name.find('/', a + 1);
            if (a == std::string::npos || b == std::string::npos || r.iterations == 0)
                continue;
            const std::size_t bytes = std::stoull(name.substr(a + 1, b - a - 1));
            seconds_[name.substr(0, a)][bytes].push_back(r.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(r.time_unit));
        }
    }

    double median(const std::string& side, std::size_t bytes) const
    {
        auto s = seconds_.find(side);
        if (s == seconds_.end() || !s->second.count(bytes))
            return 0;
        std::vector<double> v = s->second.at(bytes);
        std::sort(v.begin(), v.end());
        const std::size_t n = v.size();
        return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    }

    // bus_factor: busbw = algbw * bus_factor (nccl-tests: 2(N-1)/N for allreduce).
    void print(const std::vector<std::string>& sides, const std::string& baseline,
               const std::vector<std::size_t>& sizes, double bus_factor) const
    {
        std::printf("\nmedians of interleaved repetitions; ratio = %s time / side time (> 1: side is faster)\n",
                    baseline.c_str());
        int width = 20; // the side column fits the longest name
        for (const std::string& side : sides)
            width = std::max(width, int(side.size()));
        std::printf("%-9s %-*s %12s %12s %12s %8s\n", "size", width, "side", "time_us", "algbw_GB/s", "busbw_GB/s",
                    "ratio");
        for (std::size_t bytes : sizes) {
            const double base = median(baseline, bytes);
            for (const std::string& side : sides) {
                const double t = median(side, bytes);
                if (t <= 0)
                    continue;
                const double algbw = double(bytes) / t * 1e-9;
                std::printf("%-9s %-*s %12.2f %12.3f %12.3f %8.3f\n", size_text(bytes).c_str(), width, side.c_str(),
                            t * 1e6, algbw, algbw * bus_factor, base > 0 ? base / t : 0.0);
            }
        }
    }

private:
    std::map<std::string, std::map<std::size_t, std::vector<double>>> seconds_;
};

// What ranks other than 0 report: nothing (rank 0 prints the tables).
class null_reporter : public benchmark::BenchmarkReporter {
public:
    bool ReportContext(const Context&) override { return true; }
    void ReportRuns(const std::vector<Run>&) override {}
};

// The order in which the sides of one repetition run, shuffled anew for each by a generator
// seeded alike on every rank: a side's first calls pay for the side before it, so no side
// may always follow the same one. Unshuffled, the sides keep their registered order.
class side_order {
public:
    side_order(std::size_t sides, bool shuffled) : order_(sides), shuffled_(shuffled)
    {
        std::iota(order_.begin(), order_.end(), std::size_t(0));
    }

    const std::vector<std::size_t>& next()
    {
        if (shuffled_)
            std::shuffle(order_.begin(), order_.end(), random_);
        return order_;
    }

private:
    std::vector<std::size_t> order_;
    bool shuffled_;
    std::mt19937 random_{19};
};

// Untimed calls that warm a side up before it is timed: as many as its timed ones, at least
// 10. The first calls at a new size run slower (16 MiB right after 4 MiB: up to 1.5x over
// MPI), and would favour whichever side does not pay for them.
inline benchmark::IterationCount warm_up_calls(const benchmark::State& state)
{
    return std::max<benchmark::IterationCount>(10, state.max_iterations);
}

// Iterations that take roughly `budget` seconds at `bytes_per_second`, at least 2.
inline benchmark::IterationCount iterations_for(std::size_t bytes, double bytes_per_second, double latency,
                                                double budget)
{
    const double t = latency + double(bytes) / bytes_per_second;
    return std::max<benchmark::IterationCount>(2, benchmark::IterationCount(budget / t));
}

} // namespace gradsync_bench
