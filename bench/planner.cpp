// Planning time of mgwfbp and optimal for L = 100, 1000 and 10000 layers, on seeded random
// profiles shaped like real networks (many tiny normalisation and bias layers, convolutions
// in between, a few huge fully connected layers at the end) under two links: a slow one
// (50 us + 1.25 GB/s, communication-bound) and a fast one (10 us + 100 GB/s, mostly hidden).
// Planning time is this thread's CPU time per call. Sides interleave by repetition
// (GRADSYNC_BENCH_REPS, default 3); the table at the end gives the median planning time and,
// for context, each plan's predicted iteration time and group count.
#include <gradsync/planner.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "median_table.hpp"

namespace {

namespace gp = gradsync::planner;

gp::profile network_like(std::size_t layers, std::uint64_t seed)
{
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> jitter(0.5, 2.0);
    std::uniform_int_distribution<int> kind(0, 2);
    std::uniform_int_distribution<std::uint64_t> channels(64, 2048), convolution(16, 512);
    gp::profile p(layers);
    for (std::size_t l = 0; l < layers; ++l) {
        std::uint64_t params;
        if (l + 3 >= layers) // the classifier: 10^7 to 10^8 parameters
            params = std::uniform_int_distribution<std::uint64_t>(10'000'000, 100'000'000)(rng);
        else if (kind(rng) == 0) { // a 3x3 convolution
            const std::uint64_t in = convolution(rng), out = convolution(rng);
            params = 9 * in * out;
        } else { // normalisation or bias
            params = 2 * channels(rng);
        }
        p[l].name = "layer" + std::to_string(l);
        p[l].params = params;
        p[l].backward_s = (20e-6 + 1e-9 * double(params)) * jitter(rng);
    }
    return p;
}

struct link_model {
    const char* name;
    gp::linear_cost cost;
};

const link_model links[] = {{"slow", {50e-6, 1.0 / 1.25e9}}, {"fast", {10e-6, 1.0 / 100e9}}};
const std::size_t sizes[] = {100, 1000, 10000};

std::string side(const char* method, const link_model& l) { return std::string(method) + "_" + l.name; }

double thread_cpu_seconds()
{
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// Times each planning call in this thread's CPU seconds: the machine may be shared, and
// planning is single-threaded work, so waiting for a core is not planning time.
template <class Plan>
void timed(benchmark::State& s, Plan plan)
{
    for (auto _ : s) {
        const double start = thread_cpu_seconds();
        benchmark::DoNotOptimize(plan());
        s.SetIterationTime(thread_cpu_seconds() - start);
    }
}

} // namespace

int main(int argc, char** argv)
{
    benchmark::Initialize(&argc, argv);
    const char* reps_env = std::getenv("GRADSYNC_BENCH_REPS");
    const int reps = reps_env ? std::max(1, std::atoi(reps_env)) : 3;
    std::vector<gp::profile> profiles;
    for (std::size_t layers : sizes)
        profiles.push_back(network_like(layers, 42 + layers));

    for (int rep = 0; rep < reps; ++rep)
        for (std::size_t i = 0; i < profiles.size(); ++i)
            for (const link_model& l : links) {
                const gp::profile& p = profiles[i];
                const gp::linear_cost cost = l.cost;
                benchmark::RegisterBenchmark(gradsync_bench::bench_name(side("mgwfbp", l), sizes[i], rep).c_str(),
                                             [&p, cost](benchmark::State& s) {
                                                 timed(s, [&] { return gp::mgwfbp(p, cost); });
                                             })
                    ->Unit(benchmark::kMicrosecond)
                    ->UseManualTime();
                benchmark::RegisterBenchmark(gradsync_bench::bench_name(side("optimal", l), sizes[i], rep).c_str(),
                                             [&p, cost](benchmark::State& s) {
                                                 timed(s, [&] { return gp::optimal(p, cost); });
                                             })
                    ->Unit(benchmark::kMicrosecond)
                    ->UseManualTime();
            }
    gradsync_bench::median_table table;
    benchmark::RunSpecifiedBenchmarks(&table);

    std::printf("\nmedian planning time (thread CPU us) and predicted iteration time (ms) of the plan; groups in ()\n");
    std::printf("%-6s %7s %12s %12s %16s %16s %16s\n", "link", "layers", "mgwfbp_us", "optimal_us", "wfbp_ms",
                "mgwfbp_ms", "optimal_ms");
    for (const link_model& l : links)
        for (std::size_t i = 0; i < profiles.size(); ++i) {
            const gp::profile& p = profiles[i];
            auto shown = [&](const gp::merge_plan& g) {
                char text[64];
                std::snprintf(text, sizeof text, "%.3f (%zu)", gp::simulate(p, g, l.cost).predicted_s * 1e3, g.size());
                return std::string(text);
            };
            std::printf("%-6s %7zu %12.1f %12.1f %16s %16s %16s\n", l.name, sizes[i],
                        table.median(side("mgwfbp", l), sizes[i]) * 1e6, table.median(side("optimal", l), sizes[i]) * 1e6,
                        shown(gp::wfbp(p)).c_str(), shown(gp::mgwfbp(p, l.cost)).c_str(),
                        shown(gp::optimal(p, l.cost)).c_str());
        }
    return 0;
}
