// gradsync over gloo_communicator against Gloo's own allreduce algorithms, on one host:
//   bench_allreduce_gloo [bursts] [--ranks N] [--csv FILE] [--svg FILE] [benchmark flags]
// The program forks its other ranks (2 by default) before anything starts; they meet
// through a file store in a scratch directory, each side on a Gloo context of its own, all
// over loopback TCP. Sides
// (gloo_sides.hpp), on the same buffer (a shared_buffer's slot; only gradsync_in_shared_buffer,
// shared_memory built on it, reads the data there in place), Sum, fp32 then fp16, 4 KiB ... 256 MiB:
//   gradsync_tuned, gradsync_automatic, gradsync_doubling, gradsync_ring,
//       gradsync_recursive_halving, gradsync_shared_memory, gradsync_in_shared_buffer  a
//       persistent reducer with the settings docs/gloo.md gives for Gloo: 1 MiB pipeline
//       segments, a window of 64 and automatic{.small_bytes = 256 KiB, .share_memory = false}
//       (message passing), over a communicator
//       that sends messages of up to 64 KiB eagerly (GRADSYNC_BENCH_SEGMENT_KIB,
//       GRADSYNC_BENCH_WINDOW, GRADSYNC_BENCH_SMALL_KIB and GRADSYNC_BENCH_EAGER_KIB change
//       them);
//   (gradsync_tuned tunes while it is made, untimed: its 120 tuning calls, on a buffer of
//       its own, are a trainer's first; its rule is gradsync_automatic's; rank 0 says on
//       stderr what it chose and what it measured; GRADSYNC_BENCH_TUNED_ROUNDS changes
//       tuned::rounds);
//   gradsync_defaults  automatic{.share_memory = false} with the library's default reducer and
//       communicator
//       options;
//   gradsync_sends_first  gradsync_automatic with pipeline_options::order sends_first, so
//       its exchanges post their sends first as over MPI;
//   each over a gloo_communicator whose sockets have the 512 KiB send buffers docs/gloo.md
//       gives for one host (GRADSYNC_BENCH_SNDBUF_KIB; 0: the kernel's autotuning, which
//       Gloo's sides keep);
//   gloo_ring, gloo_ring_chunked, gloo_halving_doubling, gloo_bcube  the classic algorithm
//       objects (gloo::AllreduceRing and the others);
//   gloo_allreduce_ring, gloo_allreduce_bcube  gloo::allreduce with its options.
// Every side's context, Gloo's sides' too, has its network thread at the nice value
// docs/gloo.md gives for one host, 10 (GRADSYNC_BENCH_NICE; 0: Gloo's).
// Every side is built once per size and type and kept for that size's repetitions.
// Before timing, every side's result on integer data is checked against the exact sum.
// Rank 0 reports: medians of GRADSYNC_BENCH_REPS (15) interleaved repetitions of about 50 ms
// each, twice as many where a repetition is its least, 2 calls (16 MiB up: there one
// side's repetitions spread the most), and per size the best Gloo side against
// gradsync_tuned and gradsync_automatic;
// --csv writes every median, --svg the bus bandwidth of every side against size.
// With `bursts`, the comparison as a trainer sees it (as bench_allreduce_mpi's): fp32,
// 4 KiB ... 16 MiB, 50 calls per repetition (7 repetitions by default), each timed alone
// after a pass over GRADSYNC_BENCH_BURST_MIB (16) of other memory, new gradients written into
// the buffer and a barrier.
#include <gloo/barrier.h>
#include <gloo/rendezvous/file_store.h>

#include <gradsync/comm/gloo/rendezvous.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "gloo_sides.hpp"
#include "line_chart.hpp"
#include "median_table.hpp"
#include "trainer_burst.hpp"

namespace {

using gradsync_bench::side;

int rank_ = 0, ranks_ = 2;
bool bursts = false;
gradsync_bench::trainer_burst burst;
gradsync_bench::gloo_world world;
std::shared_ptr<gloo::Context> control;

void barrier()
{
    gloo::BarrierOptions o(control);
    gloo::barrier(o);
}

// Rank r's element i: small integers, so that every sum is exact in fp16 too.
float input(int r, std::size_t i) { return float((i * 7 + std::size_t(r) * 3) % 11); }

template <class T>
void fill(std::size_t count)
{
    for (std::size_t i = 0; i < count; ++i)
        world.data<T>()[i] = T(input(rank_, i));
}

template <class T>
bool exact(std::size_t count)
{
    for (std::size_t i = 0; i < count; ++i) {
        float want = 0;
        for (int r = 0; r < ranks_; ++r)
            want += input(r, i);
        if (float(world.data<T>()[i]) != want)
            return false;
    }
    return true;
}

// One check per side and type, on 1 MiB + a few elements (several segments, uneven blocks).
void check_sides(const std::vector<side>& sides)
{
    const std::size_t count = (std::size_t(1) << 18) + 77;
    for (const side& s : sides)
        for (bool half : {false, true}) {
            half ? fill<gradsync::half>(count) : fill<float>(count);
            barrier();
            s.make(count, half)();
            const bool ok = half ? exact<gradsync::half>(count) : exact<float>(count);
            if (!ok) {
                std::fprintf(stderr, "rank %d: %s (%s) gave a wrong sum\n", rank_, s.name.c_str(), half ? "fp16" : "fp32");
                std::exit(1);
            }
        }
}

// Every side of the size being measured, built once and kept while its repetitions run,
// as a trainer keeps its reducer: a repetition is then a short burst of calls on objects
// already warm, and the sides take turns many times within seconds.
struct prepared_sides {
    bool half = false;
    std::size_t bytes = 0;
    std::map<std::string, std::function<void()>> calls;
} prepared;

// A side's first use at a size builds it and warms it up (warm_up_calls).
void run_side(benchmark::State& state, const side& s, std::size_t bytes, bool half)
{
    if (prepared.bytes != bytes || prepared.half != half)
        prepared = {half, bytes, {}};
    std::function<void()>& call = prepared.calls[s.name];
    if (!call) {
        call = s.make(bytes / (half ? 2 : 4), half);
        for (benchmark::IterationCount i = 0; i < gradsync_bench::warm_up_calls(state); ++i)
            call();
    }
    barrier();
    if (bursts) {
        gradsync_bench::time_after_bursts(state, burst, std::span<float>(world.data<float>(), bytes / 4), barrier, call);
        return;
    }
    for (auto _ : state)
        call();
}

std::string option(int& argc, char** argv, const std::string& flag)
{
    for (int i = 1; i + 1 < argc; ++i)
        if (argv[i] == flag) {
            const std::string value = argv[i + 1];
            std::copy(argv + i + 2, argv + argc, argv + i);
            argc -= 2;
            return value;
        }
    return "";
}

} // namespace

int main(int argc, char** argv)
{
    bursts = argc > 1 && std::string(argv[1]) == "bursts";
    if (bursts)
        argv[1] = argv[0], --argc, ++argv;
    if (const std::string n = option(argc, argv, "--ranks"); !n.empty())
        ranks_ = std::max(2, std::atoi(n.c_str()));
    const std::string csv = option(argc, argv, "--csv"), svg = option(argc, argv, "--svg");
    gradsync_bench::gloo_settings settings;
    if (const char* seg = std::getenv("GRADSYNC_BENCH_SEGMENT_KIB"))
        settings.options.pipeline.segment_bytes = std::size_t(std::atoi(seg)) << 10;
    if (const char* win = std::getenv("GRADSYNC_BENCH_WINDOW"))
        settings.options.pipeline.window = std::atoi(win);
    if (const char* small = std::getenv("GRADSYNC_BENCH_SMALL_KIB"))
        settings.automatic.small_bytes = std::size_t(std::atoi(small)) << 10;
    if (const char* rounds = std::getenv("GRADSYNC_BENCH_TUNED_ROUNDS"))
        settings.tuned.rounds = std::atoi(rounds);
    if (const char* sndbuf = std::getenv("GRADSYNC_BENCH_SNDBUF_KIB"))
        settings.send_buffer_bytes = std::size_t(std::atoi(sndbuf)) << 10;
    if (const char* nice = std::getenv("GRADSYNC_BENCH_NICE"))
        settings.network_thread_nice = std::atoi(nice);
    if (const char* eager = std::getenv("GRADSYNC_BENCH_EAGER_KIB"))
        settings.communicator.eager_bytes = std::size_t(std::atoi(eager)) << 10;
    const char* reps_env = std::getenv("GRADSYNC_BENCH_REPS");
    const int reps = reps_env ? std::max(1, std::atoi(reps_env)) : bursts ? 7 : 15;
    if (bursts) {
        const char* mib_env = std::getenv("GRADSYNC_BENCH_BURST_MIB");
        burst = gradsync_bench::trainer_burst(std::size_t(mib_env ? std::max(1, std::atoi(mib_env)) : 16) << 20);
    }
    const std::vector<bool> types = bursts ? std::vector<bool>{false} : std::vector<bool>{false, true};

    char dir_template[] = "/tmp/gradsync-bench-gloo-XXXXXX";
    if (!::mkdtemp(dir_template)) {
        std::perror("mkdtemp");
        return 1;
    }
    const std::string dir = dir_template;
    std::vector<pid_t> children;
    for (int r = 1; r < ranks_; ++r) {
        const pid_t pid = ::fork();
        if (pid == 0) {
            rank_ = r;
            children.clear();
            break;
        }
        children.push_back(pid);
    }

    const std::vector<side> sides = gradsync_bench::all_sides(world, settings);
    {
        gloo::rendezvous::FileStore store(dir);
        gradsync::gloo_connect_options o;
        o.timeout = std::chrono::seconds(120);
        o.prefix = "control";
        control = gradsync::gloo_connect(store, rank_, ranks_, o);
        for (const side& s : sides) {
            o.prefix = s.name;
            o.send_buffer_bytes = s.gloo ? 0 : settings.send_buffer_bytes; // Gloo's sides keep Gloo's sockets
            o.network_thread_nice = settings.network_thread_nice;
            auto context = gradsync::gloo_connect(store, rank_, ranks_, o);
            if (s.gloo)
                world.contexts[s.name] = std::move(context);
            else
                world.comms[s.name] = std::make_unique<gradsync::gloo_communicator>(
                    std::move(context), s.name == "gradsync_defaults" ? gradsync::gloo_options{} : settings.communicator);
        }
    }

    std::vector<std::size_t> sizes;
    for (std::size_t b = 4096; b <= (std::size_t(bursts ? 16 : 256) << 20); b *= b < (std::size_t(16) << 20) ? 2 : 4)
        sizes.push_back(b);
    world.storage = std::make_unique<gradsync::shared_buffer>(*world.comms.at("gradsync_in_shared_buffer"), sizes.back());
    check_sides(sides);
    std::fill_n(world.data<std::byte>(), sizes.back(), std::byte(0));

    // Per size, the repetitions take turns through the sides (in side_order's shuffled order).
    gradsync_bench::side_order order(sides.size(), true);
    for (bool half : types)
        for (std::size_t bytes : sizes) {
            const benchmark::IterationCount calls = bursts ? 50 : gradsync_bench::iterations_for(bytes, 1e9, 60e-6, 0.05);
            for (int rep = 0; rep < (calls == 2 ? 2 * reps : reps); ++rep)
                for (std::size_t k : order.next()) {
                    const side& s = sides[k];
                    benchmark::internal::Benchmark* b = benchmark::RegisterBenchmark(
                        gradsync_bench::bench_name(s.name + (half ? "_fp16" : "_fp32"), bytes, rep).c_str(),
                        [&s, bytes, half](benchmark::State& st) { run_side(st, s, bytes, half); });
                    b->Iterations(calls)->Unit(benchmark::kMicrosecond);
                    if (bursts)
                        b->UseManualTime();
                    else
                        b->UseRealTime();
                }
        }
    benchmark::Initialize(&argc, argv);
    if (rank_ != 0) {
        gradsync_bench::null_reporter quiet;
        benchmark::RunSpecifiedBenchmarks(&quiet);
    } else {
        gradsync_bench::median_table table;
        benchmark::RunSpecifiedBenchmarks(&table);
        const double bus = 2.0 * (ranks_ - 1) / ranks_;
        std::ofstream csv_out;
        if (!csv.empty()) {
            csv_out.open(csv);
            csv_out << "type,side,bytes,median_s,busbw_GBps\n";
        }
        gradsync_examples::line_chart chart;
        chart.title = std::to_string(ranks_) + " ranks over loopback TCP: gradsync over Gloo against Gloo's algorithms" +
            (bursts ? ", each call after a burst of other work" : "");
        chart.x_label = bursts ? "message size (fp32, Sum)" : "message size (fp32 and fp16, Sum)";
        chart.y_label = "bus bandwidth, GB/s";
        chart.y_scale = gradsync_examples::axis_scale::log2;
        for (std::size_t b : sizes) {
            chart.x.push_back(double(b));
            chart.x_tick_labels.push_back(gradsync_bench::size_text(b));
        }
        const char* palette[] = {"#d62728", "#ff7f0e", "#bcbd22", "#1f77b4", "#17becf", "#2ca02c", "#9467bd",
                                 "#8c564b", "#7f7f7f", "#e377c2", "#000000", "#aec7e8", "#98df8a"};
        for (bool half : types) {
            const std::string type = half ? "fp16" : "fp32";
            std::vector<std::string> names;
            for (const side& s : sides)
                names.push_back(s.name + "_" + type);
            std::printf("\n%d ranks, %s Sum%s", ranks_, type.c_str(), bursts ? ", each call after a burst of other work" : "");
            table.print(names, "gradsync_tuned_" + type, sizes, bus);
            std::printf("\n%s: best Gloo side against gradsync_tuned and gradsync_automatic (ratio > 1: gradsync is "
                        "faster)\n",
                        type.c_str());
            std::printf("%-9s %-24s %12s %12s %8s %12s %8s\n", "size", "best Gloo side", "gloo_us", "tuned_us", "ratio",
                        "automatic_us", "ratio");
            for (std::size_t b : sizes) {
                std::string best;
                double best_t = 0;
                for (const side& s : sides)
                    if (s.gloo) {
                        const double t = table.median(s.name + "_" + type, b);
                        if (t > 0 && (best.empty() || t < best_t))
                            best = s.name, best_t = t;
                    }
                const double tuned = table.median("gradsync_tuned_" + type, b);
                const double automatic = table.median("gradsync_automatic_" + type, b);
                if (best.empty() || tuned <= 0 || automatic <= 0)
                    continue;
                std::printf("%-9s %-24s %12.2f %12.2f %8.3f %12.2f %8.3f\n", gradsync_bench::size_text(b).c_str(),
                            best.c_str(), best_t * 1e6, tuned * 1e6, best_t / tuned, automatic * 1e6,
                            best_t / automatic);
            }
            for (std::size_t k = 0; k < sides.size(); ++k) {
                gradsync_examples::chart_series series{.name = sides[k].name + " " + type, .colour = palette[k % std::size(palette)],
                                                       .dashed = half};
                for (std::size_t b : sizes) {
                    const double t = table.median(names[k], b);
                    const double busbw = t > 0 ? double(b) / t * 1e-9 * bus : 0.0;
                    series.y.push_back(t > 0 ? busbw : std::nan(""));
                    if (csv_out)
                        csv_out << type << ',' << sides[k].name << ',' << b << ',' << t << ',' << busbw << '\n';
                }
                chart.series.push_back(std::move(series));
            }
        }
        if (!svg.empty()) {
            std::ofstream out(svg);
            gradsync_examples::write_line_chart_svg(out, chart);
        }
    }
    prepared = {};
    world = {};
    control.reset();
    for (pid_t pid : children) {
        int status = 0;
        ::waitpid(pid, &status, 0);
    }
    if (rank_ == 0)
        std::filesystem::remove_all(dir);
    return 0;
}
