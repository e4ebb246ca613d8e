// Two comparisons on the same fp32 buffer, run on 2 ranks (GRADSYNC_BENCH_REPS=5 by default):
//   mpiexec -n 2 bench_allreduce_mpi          gradsync's persistent reducer (Sum, each
//       algorithm) against MPI_Allreduce(MPI_IN_PLACE, ..., MPI_SUM), 4 KiB ... 256 MiB;
//       automatic_deadline is automatic over a communicator with a 60 s deadline, whose
//       waits read the clock (automatic's has none);
//   mpiexec -n 2 bench_allreduce_mpi adasum   Adasum against Sum on the same algorithm
//       (recursive_halving, ring, automatic, shared_memory) and layout (GRADSYNC_BENCH_LAYERS
//       near-equal layers, 16 by default), 64 KiB ... 64 MiB.
//   mpiexec -n 2 bench_allreduce_mpi adasum_shared   Adasum on one host: shared_memory against
//       the message-passing Adasum plans (ring, recursive halving and doubling) and
//       automatic as a user gets it (default options), on that layout, 4 KiB ... 256 MiB; a
//       last table names the fastest side per size and automatic's time against it.
//   mpiexec -n 2 bench_allreduce_mpi bursts   the Sum comparison as a trainer sees it: each
//       timed allreduce follows a burst of other work (GRADSYNC_BENCH_BURST_MIB, 16 by
//       default, streamed through memory as a layer's backward would) and new gradients
//       written into the buffer, and only the allreduce is timed; MPI_Allreduce against
//       automatic, 50 calls per run.
//   mpiexec -n 2 bench_allreduce_mpi alternate   MPI_Allreduce and automatic take turns,
//       200 calls each, with no untimed calls between: every run starts in the state the
//       other side left (GRADSYNC_BENCH_REPS=20 by default), 4 KiB ... 1 MiB; with
//       GRADSYNC_BENCH_FRESH=1 new gradients are written before each call, off the clock.
//   mpiexec -n 2 bench_allreduce_mpi shared   ranks of one host: shared_memory (each rank's
//       block combined from the others' copies in a shared region), on a buffer of the
//       user's and on gradients kept in a shared_buffer, against MPI_Allreduce,
//       automatic (message passing) and one memcpy of the same bytes on every rank (the
//       bound), 4 KiB ... 256 MiB.
// --svg FILE (rank 0) draws every side's median time against size.
// GRADSYNC_BENCH_THREAD=multiple initialises MPI with MPI_THREAD_MULTIPLE (the level a
// synchronizer's communication thread asks for) instead of MPI_Init.
// The side named automatic is automatic{.share_memory = false}: message passing, but for
// adasum_shared's adasum_automatic, which is automatic{}.
// Rank 0 reports; every side is registered once per repetition, repetitions outermost, in
// an order shuffled for each repetition (alternate mode keeps its turns), so the sides
// interleave in time. The closing tables give medians, algbw, busbw and ratios.
#include <gradsync/comm/mpi/mpi.hpp>
#include <gradsync/gradsync.hpp>

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "line_chart.hpp"
#include "median_table.hpp"
#include "trainer_burst.hpp"

namespace {

std::vector<float> buffer;
std::unique_ptr<gradsync::mpi_communicator> comm, comm_with_deadline;

int layer_count = 16;
bool bursts = false;
bool alternate = false;
bool fresh = false; // GRADSYNC_BENCH_FRESH=1: new gradients before every timed call
gradsync_bench::trainer_burst burst; // bursts mode's other work, and the fresh gradients
// Alternate mode's reducers, one per size, kept for the whole program as a trainer keeps its
// own: a run then starts with the other side's state, not with a new reducer's first call.
std::map<std::size_t, std::shared_ptr<void>> kept_reducers;
// What automatic's plan ran, per element count (the last automatic side timed there).
std::map<std::size_t, std::uint32_t> automatic_chose;

// Times `call` as the benchmark's iterations: plainly, or in bursts mode or with `fresh`
// after the burst (new gradients in the first `count` elements) and a barrier each.
template <class Call>
void timed(benchmark::State& state, std::size_t count, Call&& call)
{
    if (!bursts && !fresh) {
        for (auto _ : state)
            call();
        return;
    }
    gradsync_bench::time_after_bursts(state, burst, std::span<float>(buffer.data(), count),
                                      [] { MPI_Barrier(MPI_COMM_WORLD); }, call);
}

// Near-equal layers: Adasum works per layer, Sum ignores the layout.
std::vector<std::size_t> layers_of(std::size_t count)
{
    std::vector<std::size_t> layers;
    for (int l = 0; l < layer_count; ++l)
        layers.push_back(gradsync::block_of(count, layer_count, l).size());
    return layers;
}

// Untimed calls before each side's timed ones (warm_up_calls; they also touch the scratch),
// none in alternate mode, whose runs start in the state the other side left.
benchmark::IterationCount warm_up(const benchmark::State& state)
{
    return alternate ? 0 : gradsync_bench::warm_up_calls(state);
}

template <class Policy, class Algorithm, bool deadline = false, bool as_given = false>
void run_gradsync(benchmark::State& state, std::size_t count)
{
    using reducer = gradsync::reducer<float, gradsync::mpi_communicator, Policy, Algorithm>;
    Algorithm algorithm{};
    if constexpr (std::is_same_v<Algorithm, gradsync::automatic>)
        algorithm.share_memory = as_given; // message passing: shared_memory is a side of its own
    const auto made = [&] {
        return std::make_shared<reducer>(deadline ? *comm_with_deadline : *comm, layers_of(count), algorithm);
    };
    std::shared_ptr<reducer> reduce;
    if (alternate) {
        std::shared_ptr<void>& kept = kept_reducers[count];
        if (!kept)
            kept = made();
        reduce = std::static_pointer_cast<reducer>(kept);
    } else {
        reduce = made();
    }
    if constexpr (std::is_same_v<Algorithm, gradsync::automatic>)
        automatic_chose[count] = reduce->plan().chosen();
    const std::span<float> data(buffer.data(), count);
    for (benchmark::IterationCount i = 0; i < warm_up(state); ++i)
        (*reduce)(data);
    MPI_Barrier(MPI_COMM_WORLD);
    timed(state, count, [&] { (*reduce)(data); });
}

// Gradients kept in a shared_buffer, reduced by automatic (shared_memory on one host) built on
// it, as data_parallel does: no copy in or out.
void run_in_shared_buffer(benchmark::State& state, std::size_t count)
{
    gradsync::shared_buffer memory(*comm, count * sizeof(float));
    gradsync::reducer<float, gradsync::mpi_communicator, gradsync::sum> reduce(*comm, layers_of(count), {},
                                                                               {.shared = &memory});
    const std::span<float> data = memory.span<float>().first(count);
    std::copy_n(buffer.data(), count, data.data());
    for (benchmark::IterationCount i = 0; i < warm_up(state); ++i)
        reduce(data);
    MPI_Barrier(MPI_COMM_WORLD);
    for (auto _ : state)
        reduce(data);
}

// One memcpy of the buffer's bytes, on every rank at once: what reading and writing M bytes
// costs with both cores busy, the bound for an allreduce that must at least write its result.
void run_memcpy(benchmark::State& state, std::size_t count)
{
    static std::vector<float> copy;
    copy.resize(buffer.size());
    std::memcpy(copy.data(), buffer.data(), count * sizeof(float));
    MPI_Barrier(MPI_COMM_WORLD);
    for (auto _ : state) {
        std::memcpy(copy.data(), buffer.data(), count * sizeof(float));
        benchmark::DoNotOptimize(copy.data());
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

void run_mpi(benchmark::State& state, std::size_t count)
{
    for (benchmark::IterationCount i = 0; i < warm_up(state); ++i)
        MPI_Allreduce(MPI_IN_PLACE, buffer.data(), int(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    timed(state, count, [&] { MPI_Allreduce(MPI_IN_PLACE, buffer.data(), int(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); });
}

// Every side's median time against size, on log2 axes.
void draw(const std::string& file, const gradsync_bench::median_table& table, const std::vector<std::string>& names,
          const std::vector<std::size_t>& sizes, int ranks)
{
    gradsync_examples::line_chart chart;
    chart.title = std::to_string(ranks) + " ranks of one host, fp32 Sum: median time per allreduce";
    chart.x_label = "message size";
    chart.y_label = "time, microseconds";
    chart.y_scale = gradsync_examples::axis_scale::log2;
    for (std::size_t b : sizes) {
        chart.x.push_back(double(b));
        chart.x_tick_labels.push_back(gradsync_bench::size_text(b));
    }
    const char* palette[] = {"#d62728", "#ff7f0e", "#1f77b4", "#2ca02c", "#7f7f7f", "#9467bd", "#8c564b", "#e377c2"};
    for (std::size_t k = 0; k < names.size(); ++k) {
        gradsync_examples::chart_series series{.name = names[k], .colour = palette[k % std::size(palette)]};
        for (std::size_t b : sizes) {
            const double t = table.median(names[k], b);
            series.y.push_back(t > 0 ? t * 1e6 : std::nan(""));
        }
        chart.series.push_back(std::move(series));
    }
    std::ofstream out(file);
    gradsync_examples::write_line_chart_svg(out, chart);
}

} // namespace

int main(int argc, char** argv)
{
    const char* thread_env = std::getenv("GRADSYNC_BENCH_THREAD");
    const bool multiple = thread_env && std::string(thread_env) == "multiple";
    int provided = MPI_THREAD_SINGLE;
    if (multiple)
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    else
        MPI_Init(&argc, &argv);
    std::string svg;
    for (int i = 1; i + 1 < argc; ++i)
        if (std::string(argv[i]) == "--svg") {
            svg = argv[i + 1];
            std::copy(argv + i + 2, argv + argc, argv + i);
            argc -= 2;
            break;
        }
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    {
        comm = std::make_unique<gradsync::mpi_communicator>(MPI_COMM_WORLD);
        comm_with_deadline = std::make_unique<gradsync::mpi_communicator>(
            MPI_COMM_WORLD, gradsync::mpi_options{.deadline = std::chrono::seconds(60)});
        const char* reps_env = std::getenv("GRADSYNC_BENCH_REPS");
        const bool adasum = argc > 1 && std::string(argv[1]) == "adasum";
        const bool adasum_shared = argc > 1 && std::string(argv[1]) == "adasum_shared";
        bursts = argc > 1 && std::string(argv[1]) == "bursts";
        alternate = argc > 1 && std::string(argv[1]) == "alternate";
        const bool shared = argc > 1 && std::string(argv[1]) == "shared";
        const char* fresh_env = std::getenv("GRADSYNC_BENCH_FRESH");
        fresh = alternate && fresh_env && std::string(fresh_env) == "1";
        if (adasum || adasum_shared || bursts || alternate || shared)
            argv[1] = argv[0], --argc, ++argv;
        const int reps = reps_env ? std::max(1, std::atoi(reps_env)) : alternate ? 20 : 5;
        if (const char* layers_env = std::getenv("GRADSYNC_BENCH_LAYERS"))
            layer_count = std::max(1, std::atoi(layers_env));
        if (bursts) {
            const char* mib_env = std::getenv("GRADSYNC_BENCH_BURST_MIB");
            const std::size_t mib = mib_env ? std::size_t(std::max(1, std::atoi(mib_env))) : 16;
            burst = gradsync_bench::trainer_burst(mib << 20);
        }
        std::vector<std::size_t> sizes;
        // Sum: steps of 2 up to 16 MiB, where the transport's protocols change, then of 4.
        for (std::size_t b = adasum ? 65536 : 4096; b <= (std::size_t(adasum ? 64 : alternate ? 1 : 256) << 20);
             b *= !adasum && b < (std::size_t(16) << 20) ? 2 : 4)
            sizes.push_back(b);
        buffer.assign(sizes.back() / sizeof(float), 0.0f);
        for (std::size_t i = 0; i < buffer.size(); ++i)
            buffer[i] = float(i % 13) * 1e-3f;

        using side_fn = void (*)(benchmark::State&, std::size_t);
        using namespace gradsync;
        const std::vector<std::pair<std::string, side_fn>> sides =
            adasum_shared ? std::vector<std::pair<std::string, side_fn>>{
                                {"adasum_shared_memory", run_gradsync<gradsync::adasum, shared_memory>},
                                {"adasum_ring", run_gradsync<gradsync::adasum, ring>},
                                {"adasum_recursive_halving", run_gradsync<gradsync::adasum, recursive_halving>},
                                {"adasum_recursive_doubling", run_gradsync<gradsync::adasum, recursive_doubling>},
                                {"adasum_automatic", run_gradsync<gradsync::adasum, automatic, false, true>},
                            }
            : adasum ? std::vector<std::pair<std::string, side_fn>>{
                         {"sum_recursive_halving", run_gradsync<sum, recursive_halving>},
                         {"adasum_recursive_halving", run_gradsync<gradsync::adasum, recursive_halving>},
                         {"sum_ring", run_gradsync<sum, ring>},
                         {"adasum_ring", run_gradsync<gradsync::adasum, ring>},
                         {"sum_automatic", run_gradsync<sum, automatic>},
                         {"adasum_automatic", run_gradsync<gradsync::adasum, automatic>},
                         {"sum_shared_memory", run_gradsync<sum, shared_memory>},
                         {"adasum_shared_memory", run_gradsync<gradsync::adasum, shared_memory>},
                     }
                   : shared ? std::vector<std::pair<std::string, side_fn>>{
                                  {"mpi_allreduce", run_mpi},
                                  {"automatic", run_gradsync<sum, automatic>},
                                  {"shared_memory", run_gradsync<sum, shared_memory>},
                                  {"in_shared_buffer", run_in_shared_buffer},
                                  {"memcpy", run_memcpy},
                              }
                   : bursts || alternate ? std::vector<std::pair<std::string, side_fn>>{
                                  {"mpi_allreduce", run_mpi},
                                  {"automatic", run_gradsync<sum, automatic>},
                              }
                   : std::vector<std::pair<std::string, side_fn>>{
                         {"mpi_allreduce", run_mpi},
                         {"automatic", run_gradsync<sum, automatic>},
                         {"automatic_deadline", run_gradsync<sum, automatic, true>},
                         {"ring", run_gradsync<sum, ring>},
                         {"recursive_halving", run_gradsync<sum, recursive_halving>},
                         {"recursive_doubling", run_gradsync<sum, recursive_doubling>},
                     };
        gradsync_bench::side_order order(sides.size(), !alternate);
        for (int rep = 0; rep < reps; ++rep)
            for (std::size_t bytes : sizes)
                for (std::size_t k : order.next()) {
                    const auto& [name, fn] = sides[k];
                    benchmark::internal::Benchmark* b = benchmark::RegisterBenchmark(
                        gradsync_bench::bench_name(name, bytes, rep).c_str(),
                        [fn = fn, bytes](benchmark::State& s) { fn(s, bytes / sizeof(float)); });
                    // Bursts mode: 50 calls per run, the burst costs milliseconds each.
                    b->Iterations(bursts      ? 50
                                  : alternate ? 200
                                              : gradsync_bench::iterations_for(bytes, 2e9, 5e-6, 0.05))
                        ->Unit(benchmark::kMicrosecond);
                    if (bursts || fresh)
                        b->UseManualTime();
                    else
                        b->UseRealTime();
                }

        benchmark::Initialize(&argc, argv);
        if (rank == 0) {
            gradsync_bench::median_table table;
            benchmark::RunSpecifiedBenchmarks(&table);
            const double bus = 2.0 * (size - 1) / size;
            if (adasum) {
                for (std::size_t i = 0; i < sides.size(); i += 2) {
                    std::printf("\n%d ranks, fp32, %d layers, Adasum against Sum", size, layer_count);
                    table.print({sides[i].first, sides[i + 1].first}, sides[i].first, sizes, bus);
                }
            } else if (adasum_shared) {
                std::vector<std::string> names;
                for (const auto& s : sides)
                    names.push_back(s.first);
                std::printf("\n%d ranks of one host, fp32 Adasum, %d layers", size, layer_count);
                table.print(names, "adasum_shared_memory", sizes, bus);
                std::printf("\n%-9s %-26s %14s %22s %16s\n", "size", "fastest", "shared / best msg",
                            "automatic / fastest", "automatic runs");
                for (std::size_t b : sizes) {
                    if (table.median(names[0], b) <= 0)
                        continue; // left out by a filter
                    std::string fastest = names[0];
                    double best_message = 0;
                    for (std::size_t k = 0; k + 1 < names.size(); ++k) {
                        if (table.median(names[k], b) < table.median(fastest, b))
                            fastest = names[k];
                        if (k > 0 && (best_message == 0 || table.median(names[k], b) < best_message))
                            best_message = table.median(names[k], b);
                    }
                    std::printf("%-9s %-26s %14.3f %22.3f %16s\n", gradsync_bench::size_text(b).c_str(), fastest.c_str(),
                                best_message / table.median("adasum_shared_memory", b),
                                table.median("adasum_automatic", b) / table.median(fastest, b),
                                automatic_chose[b / sizeof(float)] == gradsync::shared_memory::code ? "shared_memory"
                                                                                                   : "messages");
                }
            } else {
                std::vector<std::string> names;
                for (const auto& s : sides)
                    names.push_back(s.first);
                std::printf("\n%d ranks, fp32 Sum%s, %s", size,
                            bursts      ? ", each call after a burst of other work"
                            : alternate ? (fresh ? ", the sides taking turns every 200 calls, new gradients before each call"
                                                 : ", the sides taking turns every 200 calls")
                                        : "",
                            multiple ? (provided == MPI_THREAD_MULTIPLE ? "MPI_THREAD_MULTIPLE" : "MPI_THREAD_MULTIPLE refused")
                                     : "MPI_Init");
                table.print(names, "mpi_allreduce", sizes, bus);
                if (!svg.empty())
                    draw(svg, table, names, sizes, size);
            }
        } else {
            gradsync_bench::null_reporter quiet;
            benchmark::RunSpecifiedBenchmarks(&quiet);
        }
        kept_reducers.clear();
        comm.reset();
        comm_with_deadline.reset();
    }
    MPI_Finalize();
    return 0;
}
