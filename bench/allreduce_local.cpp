// local_group allreduce (Sum, fp32, automatic: shared memory between the threads) and the same
// with automatic{.share_memory = false} (messages through the local_group's mailboxes) against
// a memcpy of the same bytes, 4 KiB ... 256 MiB, for 2 and 4 ranks as threads of this process.
// Rank 0 drives Google Benchmark; before each benchmark a barrier tells the other ranks its
// size and (fixed) iteration count, and they run that many allreduces alongside, so one
// benchmark iteration is one allreduce on every rank. Sides interleave by repetition.
#include <gradsync/gradsync.hpp>

#include <atomic>
#include <barrier>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "median_table.hpp"

namespace {

std::vector<std::size_t> sizes()
{
    std::vector<std::size_t> s;
    for (std::size_t b = 4096; b <= (std::size_t(256) << 20); b *= 4)
        s.push_back(b);
    return s;
}

// Runs every registered benchmark with `ranks` threads; rank 0 reports into `table`.
void run_group(int ranks, const std::vector<std::size_t>& all_sizes, int reps, gradsync_bench::median_table& table)
{
    gradsync::local_group group(ranks);
    std::vector<std::vector<float>> data(std::size_t(ranks), std::vector<float>(all_sizes.back() / sizeof(float), 1.0f));
    std::vector<float> copy_src(all_sizes.back() / sizeof(float), 1.0f), copy_dst(copy_src.size());
    std::barrier sync(ranks);
    std::atomic<std::size_t> command{0}; // bytes of the next benchmark; 0 ends the run
    std::atomic<std::int64_t> iterations{0};
    std::atomic<bool> shares{true}; // the next benchmark's automatic::share_memory

    group.run([&](gradsync::local_communicator& comm) {
        auto& mine = data[std::size_t(comm.rank())];
        if (comm.rank() != 0) {
            for (;;) {
                sync.arrive_and_wait();
                const std::size_t bytes = command.load();
                if (bytes == 0)
                    return;
                gradsync::reducer<float, gradsync::local_communicator> reduce(
                    comm, bytes / sizeof(float), gradsync::automatic{.share_memory = shares.load()});
                const std::span<float> v(mine.data(), bytes / sizeof(float));
                for (std::int64_t i = iterations.load(); i > 0; --i)
                    reduce(v);
            }
        }
        const std::string tag = std::to_string(ranks) + "ranks";
        for (int rep = 0; rep < reps; ++rep)
            for (std::size_t bytes : all_sizes) {
                const auto iters = gradsync_bench::iterations_for(bytes, 4e9, 5e-6, 0.04);
                benchmark::RegisterBenchmark(
                    gradsync_bench::bench_name("memcpy", bytes, rep).c_str(),
                    [&, bytes](benchmark::State& s) {
                        for (auto _ : s) {
                            std::memcpy(copy_dst.data(), copy_src.data(), bytes);
                            benchmark::ClobberMemory();
                        }
                    })
                    ->Iterations(iters)
                    ->UseRealTime()
                    ->Unit(benchmark::kMicrosecond);
                for (const bool share : {true, false})
                    benchmark::RegisterBenchmark(
                        gradsync_bench::bench_name((share ? "allreduce_" : "messages_") + tag, bytes, rep).c_str(),
                        [&, bytes, iters, share](benchmark::State& s) {
                            command.store(bytes);
                            iterations.store(iters);
                            shares.store(share);
                            sync.arrive_and_wait(); // announce: others plan their reducer
                            gradsync::reducer<float, gradsync::local_communicator> reduce(
                                comm, bytes / sizeof(float), gradsync::automatic{.share_memory = share});
                            const std::span<float> v(mine.data(), bytes / sizeof(float));
                            for (auto _ : s)
                                reduce(v);
                        })
                        ->Iterations(iters)
                        ->UseRealTime()
                        ->Unit(benchmark::kMicrosecond);
            }
        benchmark::RunSpecifiedBenchmarks(&table);
        benchmark::ClearRegisteredBenchmarks();
        command.store(0);
        sync.arrive_and_wait();
    });
}

} // namespace

int main(int argc, char** argv)
{
    benchmark::Initialize(&argc, argv);
    const char* reps_env = std::getenv("GRADSYNC_BENCH_REPS");
    const int reps = reps_env ? std::max(1, std::atoi(reps_env)) : 3;
    const auto all = sizes();
    for (int ranks : {2, 4}) {
        gradsync_bench::median_table table;
        run_group(ranks, all, reps, table);
        std::printf("\nlocal_group, %d ranks, fp32 Sum, automatic", ranks);
        table.print({"memcpy", "allreduce_" + std::to_string(ranks) + "ranks", "messages_" + std::to_string(ranks) + "ranks"},
                    "memcpy", all, 2.0 * (ranks - 1) / ranks);
    }
    return 0;
}
