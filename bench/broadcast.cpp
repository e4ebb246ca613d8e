// gradsync's broadcaster against Open MPI's MPI_Bcast and Gloo's broadcast, run on 2 ranks:
//   mpiexec -n 2 bench_broadcast
// Sides, each broadcasting the same byte buffer from rank 0, 4 KiB ... 64 MiB:
//   mpi_bcast          MPI_Bcast over MPI_COMM_WORLD;
//   gradsync_mpi       a persistent broadcaster<std::byte, mpi_communicator>, automatic;
//   gloo_broadcast     gloo::broadcast over a Gloo context of its own (loopback TCP);
//   gradsync_gloo      a persistent broadcaster over a gloo_communicator on a context of its
//                      own, with the settings docs/gloo.md gives for one host (messages of up
//                      to 64 KiB go eagerly, 512 KiB socket send buffers).
// The Gloo contexts meet through a file store in a directory rank 0 makes. Before timing,
// every side's result is checked against the root's bytes. Every side is registered once per
// repetition (GRADSYNC_BENCH_REPS, 9 by default), repetitions outermost, in an order
// shuffled for each, so the sides interleave in time; each repetition is about 50 ms of
// calls after as many untimed ones. Rank 0 prints the medians and, per size, the ratios
// mpi_bcast / gradsync_mpi and gloo_broadcast / gradsync_gloo (> 1: gradsync is faster).
#include <gloo/broadcast.h>
#include <gloo/rendezvous/file_store.h>

#include <gradsync/comm/gloo/gloo.hpp>
#include <gradsync/comm/gloo/rendezvous.hpp>
#include <gradsync/comm/mpi/mpi.hpp>
#include <gradsync/gradsync.hpp>

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <unistd.h>

#include "median_table.hpp"

namespace {

std::vector<std::byte> buffer;
std::unique_ptr<gradsync::mpi_communicator> mpi_comm;
std::unique_ptr<gradsync::gloo_communicator> gloo_comm;
std::shared_ptr<gloo::Context> gloo_context;
int rank_ = 0;

// Broadcasters, one per (side, size), kept for the whole program as a trainer keeps its own.
std::map<std::string, std::shared_ptr<void>> kept;

template <class Comm>
std::function<void()> gradsync_side(Comm& comm, const std::string& name, std::size_t bytes)
{
    using broadcaster = gradsync::broadcaster<std::byte, Comm>;
    std::shared_ptr<void>& k = kept[name + std::to_string(bytes)];
    if (!k)
        k = std::make_shared<broadcaster>(comm, bytes, 0);
    auto* b = static_cast<broadcaster*>(k.get());
    return [b, bytes] { (*b)(std::span<std::byte>(buffer.data(), bytes)); };
}

std::function<void()> make_side(const std::string& name, std::size_t bytes)
{
    if (name == "mpi_bcast")
        return [bytes] { MPI_Bcast(buffer.data(), int(bytes), MPI_BYTE, 0, MPI_COMM_WORLD); };
    if (name == "gloo_broadcast")
        return [bytes] {
            gloo::BroadcastOptions o(gloo_context);
            o.setOutput(reinterpret_cast<unsigned char*>(buffer.data()), bytes);
            o.setRoot(0);
            gloo::broadcast(o);
        };
    if (name == "gradsync_mpi")
        return gradsync_side(*mpi_comm, name, bytes);
    return gradsync_side(*gloo_comm, name, bytes);
}

// Rank 0's byte i, written before a side's check; the other ranks start from zeros.
std::byte root_byte(std::size_t i) { return std::byte((i * 131 + 7) % 251); }

bool check(const std::string& name, std::size_t bytes)
{
    for (std::size_t i = 0; i < bytes; ++i)
        buffer[i] = rank_ == 0 ? root_byte(i) : std::byte(0);
    make_side(name, bytes)();
    for (std::size_t i = 0; i < bytes; ++i)
        if (buffer[i] != root_byte(i))
            return false;
    return true;
}

void run_side(benchmark::State& state, const std::string& name, std::size_t bytes)
{
    const std::function<void()> call = make_side(name, bytes);
    for (benchmark::IterationCount i = 0; i < gradsync_bench::warm_up_calls(state); ++i)
        call();
    MPI_Barrier(MPI_COMM_WORLD);
    for (auto _ : state)
        call();
}

} // namespace

int main(int argc, char** argv)
{
    MPI_Init(&argc, &argv);
    int size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    {
        // The store's directory: rank 0's, sent to the others.
        char dir[64] = "/tmp/gradsync-bench-bcast-XXXXXX";
        if (rank_ == 0 && !::mkdtemp(dir))
            MPI_Abort(MPI_COMM_WORLD, 1);
        MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
        {
            gloo::rendezvous::FileStore store(dir);
            gradsync::gloo_connect_options o;
            o.prefix = "gloo_broadcast";
            gloo_context = gradsync::gloo_connect(store, rank_, size, o);
            o.prefix = "gradsync_gloo";
            o.send_buffer_bytes = std::size_t(512) << 10;
            gloo_comm = std::make_unique<gradsync::gloo_communicator>(
                gradsync::gloo_connect(store, rank_, size, o),
                gradsync::gloo_options{.eager_bytes = std::size_t(64) << 10});
        }
        mpi_comm = std::make_unique<gradsync::mpi_communicator>(MPI_COMM_WORLD);

        std::vector<std::size_t> sizes;
        for (std::size_t b = 4096; b <= (std::size_t(64) << 20); b *= 4)
            sizes.push_back(b);
        buffer.assign(sizes.back(), std::byte(0));
        const std::vector<std::string> sides{"mpi_bcast", "gradsync_mpi", "gloo_broadcast", "gradsync_gloo"};
        for (const std::string& s : sides)
            if (!check(s, (std::size_t(1) << 20) + 77)) {
                std::fprintf(stderr, "rank %d: %s did not copy the root's bytes\n", rank_, s.c_str());
                MPI_Abort(MPI_COMM_WORLD, 1);
            }

        const char* reps_env = std::getenv("GRADSYNC_BENCH_REPS");
        const int reps = reps_env ? std::max(1, std::atoi(reps_env)) : 9;
        gradsync_bench::side_order order(sides.size(), true);
        for (int rep = 0; rep < reps; ++rep)
            for (std::size_t bytes : sizes)
                for (std::size_t k : order.next()) {
                    const std::string& name = sides[k];
                    benchmark::RegisterBenchmark(gradsync_bench::bench_name(name, bytes, rep).c_str(),
                                                 [&name, bytes](benchmark::State& s) { run_side(s, name, bytes); })
                        ->Iterations(gradsync_bench::iterations_for(bytes, 2e9, 10e-6, 0.05))
                        ->Unit(benchmark::kMicrosecond)
                        ->UseRealTime();
                }
        benchmark::Initialize(&argc, argv);
        if (rank_ == 0) {
            gradsync_bench::median_table table;
            benchmark::RunSpecifiedBenchmarks(&table);
            std::printf("\n%d ranks, broadcast from rank 0", size);
            table.print(sides, "gradsync_mpi", sizes, 1.0);
            std::printf("\nratio = other / gradsync on the same transport (> 1: gradsync is faster)\n");
            std::printf("%-9s %12s %12s %8s %12s %12s %8s\n", "size", "mpi_bcast", "gradsync_mpi", "ratio",
                        "gloo_bcast", "gradsync_gloo", "ratio");
            for (std::size_t b : sizes) {
                const double m = table.median("mpi_bcast", b), gm = table.median("gradsync_mpi", b);
                const double g = table.median("gloo_broadcast", b), gg = table.median("gradsync_gloo", b);
                std::printf("%-9s %12.2f %12.2f %8.3f %12.2f %12.2f %8.3f\n", gradsync_bench::size_text(b).c_str(),
                            m * 1e6, gm * 1e6, gm > 0 ? m / gm : 0.0, g * 1e6, gg * 1e6, gg > 0 ? g / gg : 0.0);
            }
        } else {
            gradsync_bench::null_reporter quiet;
            benchmark::RunSpecifiedBenchmarks(&quiet);
        }
        kept.clear();
        gloo_comm.reset();
        gloo_context.reset();
        mpi_comm.reset();
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank_ == 0)
            std::filesystem::remove_all(dir);
    }
    MPI_Finalize();
    return 0;
}
