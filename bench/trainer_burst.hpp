// The benchmarks' bursts modes: an allreduce timed as a trainer sees it, after the work a
// trainer does between two allreduces.
#pragma once

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstddef>
#include <span>
#include <vector>

namespace gradsync_bench {

// One pass that reads and writes `bytes` of other memory (the allreduce's buffer leaves the
// caches, as during a layer's backward; none with bytes = 0), then the layer's new gradients
// written into the buffer (hot in cache, as backward leaves them; finite, where a loop of
// in-place sums doubles them towards infinity).
class trainer_burst {
public:
    explicit trainer_burst(std::size_t bytes = 0) : memory_(bytes / sizeof(float), 1.0f) {}

    template <class T>
    void operator()(std::span<T> gradients)
    {
        for (float& x : memory_)
            x = x * 0.5f + 1.0f;
        benchmark::DoNotOptimize(memory_.data());
        ++step_;
        for (std::size_t i = 0; i < gradients.size(); ++i)
            gradients[i] = T(float((i + step_) % 13) * 1e-3f);
        benchmark::ClobberMemory();
    }

private:
    std::vector<float> memory_;
    unsigned step_ = 0;
};

// Times `call` as the benchmark's iterations (UseManualTime), each after burst(gradients)
// and barrier(), with only the call on the clock: the barrier keeps the peer's lateness from
// its own burst, which neither side controls, out of the figure.
template <class T, class Barrier, class Call>
void time_after_bursts(benchmark::State& state, trainer_burst& burst, std::span<T> gradients, Barrier&& barrier,
                       Call&& call)
{
    for (auto _ : state) {
        burst(gradients);
        barrier();
        const auto start = std::chrono::steady_clock::now();
        call();
        state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
}

} // namespace gradsync_bench
