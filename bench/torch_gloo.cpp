// libtorch's own c10d::ProcessGroupGloo allreduce (Sum, fp32 CPU tensors, called from C++)
// against gradsync's persistent reducer<float, Comm, sum> (automatic) on the same tensors'
// memory (GRADSYNC_BENCH_REPS=5 by default):
//   bench_torch_gloo                 2 ranks as threads of this process, each with its own
//       ProcessGroupGloo and a local_communicator of one local_group: sides gloo and
//       gradsync_local;
//   mpiexec -n 2 bench_torch_gloo    (built with MPI) one rank per process, each with a
//       ProcessGroupGloo and an mpi_communicator on MPI_COMM_WORLD: gloo and gradsync_mpi.
// Every ProcessGroupGloo meets its peers through a c10d::FileStore on a fresh temporary file
// (under mpiexec rank 0 names it and broadcasts the path, so the ranks share one host) and
// talks TCP over 127.0.0.1, with Gloo's 2 worker threads (torch.distributed's default).
// Sizes: the step of Horovod's PyTorch MNIST network (LeNet, 8 parameters, 21840 floats),
// once as one allreduce per parameter (8 calls, as the plain libtorch loop does) and once as
// one flat buffer (Gloo: one tensor; gradsync: one reducer over the 8 layers); then 1, 4, 16
// and 64 MiB in one tensor. Both sides are checked for the exact sum before any timing.
// Google Benchmark runs on one thread, so rank 0 alone drives it. Before each benchmark it
// tells the other ranks which side, size and (fixed) iteration count come next (a barrier
// of the threads, or MPI_Bcast); every rank then makes the same untimed calls, meets the
// others, and makes the timed calls. The last timed iteration ends in a barrier, so the time
// covers every rank's last allreduce. Each (side, size) is registered once per repetition,
// repetitions outermost, so the sides interleave in time; the closing tables give medians
// and ratio = Gloo's time / gradsync's time.
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <gradsync/gradsync.hpp>
#if GRADSYNC_BENCH_MPI
#include <gradsync/comm/mpi/mpi.hpp>

#include <mpi.h>
#endif

#include <unistd.h>

#include <algorithm>
#include <array>
#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "median_table.hpp"

namespace {

// Parameter sizes of the network of Horovod's PyTorch MNIST example (examples/torch/lenet.hpp):
// conv1 weight and bias, conv2, fc1, fc2.
const std::vector<std::size_t> lenet = {250, 10, 5000, 20, 16000, 50, 500, 10};

struct size_case {
    std::string suffix;               // appended to the side's name
    std::string text;                 // for messages and the tables' titles
    std::vector<std::size_t> tensors; // elements of each tensor: one allreduce each
    bool flat_lenet = false;          // one tensor whose gradsync reducer has LeNet's layers
};

std::vector<size_case> size_cases()
{
    std::vector<size_case> cases = {
        {"_per_param", "LeNet step, one allreduce per parameter (8 calls, 21840 floats)", lenet},
        {"_flat", "LeNet step, one flat buffer of 21840 floats (gradsync: 8 layers)",
         {std::accumulate(lenet.begin(), lenet.end(), std::size_t(0))}, true},
    };
    for (std::size_t mib : {1, 4, 16, 64})
        cases.push_back({"", gradsync_bench::size_text(mib << 20), {(mib << 20) / sizeof(float)}});
    return cases;
}

std::size_t bytes_of(const size_case& c)
{
    return std::accumulate(c.tensors.begin(), c.tensors.end(), std::size_t(0)) * sizeof(float);
}

constexpr int gloo_side = 0, gradsync_side = 1;

using command = std::array<long long, 3>; // side, size case, iterations; side < 0: the end

// The two threads of one process: a command is written by rank 0 before a barrier and read
// by the others after it.
class thread_meeting {
public:
    explicit thread_meeting(int ranks) : sync_(ranks) {}
    void barrier() { sync_.arrive_and_wait(); }
    command exchange(int rank, command c)
    {
        if (rank == 0)
            next_ = c;
        sync_.arrive_and_wait();
        return next_;
    }
    [[noreturn]] void fail()
    {
        std::fflush(stdout);
        std::_Exit(EXIT_FAILURE); // the peer may be blocked inside Gloo: end the process at once
    }

private:
    std::barrier<> sync_;
    command next_{};
};

#if GRADSYNC_BENCH_MPI
class mpi_meeting {
public:
    void barrier() { MPI_Barrier(MPI_COMM_WORLD); }
    command exchange(int, command c)
    {
        MPI_Bcast(c.data(), int(c.size()), MPI_LONG_LONG, 0, MPI_COMM_WORLD);
        return c;
    }
    [[noreturn]] void fail()
    {
        std::fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, EXIT_FAILURE);
        std::abort();
    }
};
#endif

c10::intrusive_ptr<c10d::ProcessGroupGloo> make_gloo(const std::string& store_path, int rank, int ranks)
{
    auto options = c10d::ProcessGroupGloo::Options::create();
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    options->threads = 2; // what torch.distributed sets: 2 per device
    return c10::make_intrusive<c10d::ProcessGroupGloo>(c10::make_intrusive<c10d::FileStore>(store_path, ranks),
                                                       rank, ranks, options);
}

// One rank's tensors and reducers. Constructing it is collective (ProcessGroupGloo's
// rendezvous, the reducers' planning): every rank builds one.
template <class Comm>
class rank_state {
    using reducer_type = gradsync::reducer<float, Comm, gradsync::sum>;

    struct call {
        std::vector<at::Tensor> tensor; // Gloo's argument: the one tensor of this call
        std::span<float> data;          // the same memory, for gradsync
        reducer_type* reduce;
    };

public:
    rank_state(Comm& comm, const std::string& store_path, const std::vector<size_case>& cases)
        : gloo_(make_gloo(store_path, comm.rank(), comm.size()))
    {
        std::size_t largest = 0;
        for (const size_case& c : cases)
            if (c.suffix.empty())
                largest = std::max(largest, c.tensors.front());
        const at::Tensor big = at::empty({std::int64_t(largest)}, at::kFloat); // shared by the MiB sizes
        for (const size_case& c : cases) {
            std::vector<call>& calls = calls_.emplace_back();
            for (std::size_t n : c.tensors) {
                const at::Tensor t = c.suffix.empty() ? big.narrow(0, 0, std::int64_t(n))
                                                      : at::empty({std::int64_t(n)}, at::kFloat);
                reducers_.emplace_back(comm, c.flat_lenet ? lenet : std::vector<std::size_t>{n});
                calls.push_back({{t}, {t.data_ptr<float>(), n}, &reducers_.back()});
            }
        }
    }

    // One step of `side` on size case `c`: every tensor's allreduce, complete on this rank.
    void step(int side, std::size_t c)
    {
        for (call& k : calls_[c])
            if (side == gloo_side)
                gloo_->allreduce(k.tensor)->wait();
            else
                (*k.reduce)(k.data);
    }

    // Fills rank r's tensors so that the sum over the ranks is exact in fp32, steps once,
    // and returns an empty string when every element holds that sum, else what differs.
    std::string check(int side, std::size_t c, int rank, int ranks)
    {
        const auto value = [](std::size_t k, std::size_t i, int r) { return float((i + 3 * k) % 8) + 0.25f * float(r); };
        for (std::size_t k = 0; k < calls_[c].size(); ++k)
            for (std::size_t i = 0; i < calls_[c][k].data.size(); ++i)
                calls_[c][k].data[i] = value(k, i, rank);
        step(side, c);
        for (std::size_t k = 0; k < calls_[c].size(); ++k)
            for (std::size_t i = 0; i < calls_[c][k].data.size(); ++i) {
                float expected = 0;
                for (int r = 0; r < ranks; ++r)
                    expected += value(k, i, r);
                if (calls_[c][k].data[i] != expected)
                    return "tensor " + std::to_string(k) + " element " + std::to_string(i) + " is " +
                           std::to_string(calls_[c][k].data[i]) + ", expected " + std::to_string(expected);
            }
        return {};
    }

private:
    c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo_;
    std::deque<reducer_type> reducers_; // a deque: reducers do not move
    std::vector<std::vector<call>> calls_;
};

// Untimed calls before each side's timed ones, as many (at least 10), as in
// bench_allreduce_mpi: there the first calls at a new size ran slower.
long long warm_up(long long iterations) { return std::max(10LL, iterations); }

// Runs one benchmark's calls on one rank; rank 0 passes Google Benchmark's state.
template <class Comm, class Meeting>
void run_job(rank_state<Comm>& st, Meeting& meet, int side, std::size_t c, long long iterations,
             benchmark::State* state)
{
    for (long long i = 0; i < warm_up(iterations); ++i)
        st.step(side, c);
    meet.barrier();
    if (state) {
        long long done = 0;
        for (auto _ : *state) {
            st.step(side, c);
            if (++done == iterations)
                meet.barrier(); // inside the timing: every rank's last call is complete
        }
    } else {
        for (long long i = 0; i < iterations; ++i)
            st.step(side, c);
        meet.barrier();
    }
}

template <class Comm, class Meeting>
void run_rank(Comm& comm, Meeting& meet, const std::string& store_path, const std::string& gradsync_name,
              const std::string& mode, int reps)
{
    const int rank = comm.rank(), ranks = comm.size();
    const std::vector<size_case> cases = size_cases();
    rank_state<Comm> st(comm, store_path, cases);
    const std::string side_names[] = {"gloo", gradsync_name};

    for (std::size_t c = 0; c < cases.size(); ++c)
        for (int side : {gloo_side, gradsync_side})
            if (const std::string wrong = st.check(side, c, rank, ranks); !wrong.empty()) {
                std::fprintf(stderr, "bench_torch_gloo: %s does not give the sum on rank %d, %s: %s\n",
                             side_names[side].c_str(), rank, cases[c].text.c_str(), wrong.c_str());
                meet.fail();
            }
    meet.barrier();

    if (rank != 0) {
        for (command cmd = meet.exchange(rank, {}); cmd[0] >= 0; cmd = meet.exchange(rank, {}))
            run_job(st, meet, int(cmd[0]), std::size_t(cmd[1]), cmd[2], nullptr);
        return;
    }
    std::printf("gloo and %s give the exact sum at every size on %d ranks\n", gradsync_name.c_str(), ranks);
    for (int rep = 0; rep < reps; ++rep)
        for (std::size_t c = 0; c < cases.size(); ++c) {
            // About 0.2 s of Gloo, the slower side here: some 300 us per call plus 1 GB/s.
            const long long iterations = gradsync_bench::iterations_for(
                bytes_of(cases[c]), 1e9, 300e-6 * double(cases[c].tensors.size()), 0.2);
            for (int side : {gloo_side, gradsync_side})
                benchmark::RegisterBenchmark(
                    gradsync_bench::bench_name(side_names[side] + cases[c].suffix, bytes_of(cases[c]), rep).c_str(),
                    [&, side, c, iterations](benchmark::State& s) {
                        meet.exchange(rank, {side, static_cast<long long>(c), iterations});
                        run_job(st, meet, side, c, iterations, &s);
                    })
                    ->Iterations(iterations)
                    ->UseRealTime()
                    ->Unit(benchmark::kMicrosecond);
        }
    gradsync_bench::median_table table;
    benchmark::RunSpecifiedBenchmarks(&table);
    benchmark::ClearRegisteredBenchmarks();
    meet.exchange(rank, {-1, 0, 0});

    const double bus = 2.0 * (ranks - 1) / ranks;
    std::vector<std::size_t> sizes;
    for (const size_case& c : cases) {
        if (!c.suffix.empty()) {
            std::printf("\n%d ranks (%s), fp32 Sum, %s", ranks, mode.c_str(), c.text.c_str());
            table.print({"gloo" + c.suffix, gradsync_name + c.suffix}, "gloo" + c.suffix, {bytes_of(c)}, bus);
        } else {
            sizes.push_back(bytes_of(c));
        }
    }
    std::printf("\n%d ranks (%s), fp32 Sum, one tensor", ranks, mode.c_str());
    table.print({"gloo", gradsync_name}, "gloo", sizes, bus);
}

// A fresh, empty file for the FileStore.
std::string temporary_file()
{
    std::string path = (std::filesystem::temp_directory_path() / "bench_torch_gloo.XXXXXX").string();
    const int fd = mkstemp(path.data());
    if (fd < 0) {
        std::perror("bench_torch_gloo: mkstemp");
        std::exit(EXIT_FAILURE);
    }
    close(fd);
    return path;
}

#if GRADSYNC_BENCH_MPI
bool under_mpiexec() { return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE"); }
#endif

} // namespace

int main(int argc, char** argv)
{
    const char* reps_env = std::getenv("GRADSYNC_BENCH_REPS");
    const int reps = reps_env ? std::max(1, std::atoi(reps_env)) : 5;
#if GRADSYNC_BENCH_MPI
    if (under_mpiexec()) {
        MPI_Init(&argc, &argv);
        benchmark::Initialize(&argc, argv);
        int rank = 0;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        std::string path = rank == 0 ? temporary_file() : std::string();
        int length = int(path.size());
        MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD);
        path.resize(std::size_t(length));
        MPI_Bcast(path.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD);
        {
            gradsync::mpi_communicator comm(MPI_COMM_WORLD);
            mpi_meeting meet;
            run_rank(comm, meet, path, "gradsync_mpi", "MPI processes", reps);
        }
        MPI_Barrier(MPI_COMM_WORLD); // every FileStore is closed
        if (rank == 0)
            std::filesystem::remove(path);
        MPI_Finalize();
        return 0;
    }
#endif
    benchmark::Initialize(&argc, argv);
    constexpr int ranks = 2;
    const std::string path = temporary_file();
    gradsync::local_group group(ranks);
    thread_meeting meet(ranks);
    group.run([&](gradsync::local_communicator& comm) {
        run_rank(comm, meet, path, "gradsync_local", "threads of one process", reps);
    });
    std::filesystem::remove(path);
    return 0;
}
