// One rank of a job across the test cluster's hosts (scripts/cluster.sh), over Gloo or, built
// with GRADSYNC_CLUSTER_MPI, over MPI:
//  - Gloo (started by tests/cluster/run.sh): connects through a file store every host
//    reaches, with Gloo's TCP device on its host's address;
//  - MPI (started by Open MPI's launcher, tests/cluster/run_mpi.sh): MPI_COMM_WORLD, TCP
//    between hosts and shared memory within one.
// It checks every algorithm with Sum, Average and Adasum
// (fp32 and fp16, one layer and a layout of many, hierarchical with its nodes found from the
// host names) against the same algorithm over a local_group of as many threads in this
// process: the same bits, and rank 0's bits on every rank (the local_group's ranks agree, and
// each cluster rank equals its local_group rank). Prints one line per difference; exits 0
// when there is none, 1 otherwise, 2 on bad arguments.
//
//   cluster_rank_gloo RANK SIZE STORE_DIR ADDRESS [--fault OUTCOMES_DIR DEADLINE_S COUNT]
//   cluster_rank_mpi [--fault OUTCOMES_DIR DEADLINE_S COUNT]
// With --fault it runs Sum calls of COUNT elements under a deadline of DEADLINE_S until one
// fails or it is asked to stop (run_until_fault), and writes its outcome to
// OUTCOMES_DIR/rank-R as well as to stdout: a cut-off MPI rank's stdout goes through the
// launcher it can no longer reach. An MPI rank that named an error then ends the job with
// gradsync::mpi_abort, one deadline later.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <gradsync/gradsync.hpp>

#include "engine.hpp"

namespace {

// Rank r's gradient: normal values, a different stream per rank, layer and size.
template <class T>
std::vector<T> gradient(int rank, std::size_t count)
{
    std::mt19937_64 g(0x9e3779b9u + std::uint64_t(rank) * 7919 + count);
    std::normal_distribution<float> d(0.0f, 1.0f + float(rank % 3));
    std::vector<T> v(count);
    for (T& x : v)
        x = T(d(g));
    return v;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b)
{
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

struct job {
    int rank, size, per_node;
    communicator& comm;
    int failures = 0;

    // `across` runs on the cluster, `local` (the same algorithm with the nodes and the sharing
    // of memory spelt out) over threads.
    template <class T, class Policy, class Algorithm>
    void check(const char* type, Algorithm across, Algorithm local, const std::vector<std::size_t>& layers)
    {
        std::size_t count = 0;
        for (std::size_t l : layers)
            count += l;
        const std::string what = std::string(Algorithm::name) + " " + Policy::name + " " + type + ", " +
                                 std::to_string(layers.size()) + " layers";
        // The reference: the same algorithm and nodes over threads of this process.
        std::vector<std::vector<T>> threads(static_cast<std::size_t>(size));
        gradsync::local_group group(size);
        group.run([&](gradsync::local_communicator& c) {
            std::vector<T> v = gradient<T>(c.rank(), count);
            gradsync::allreduce(c, std::span<T>(v), Policy{}, local, layers);
            threads[std::size_t(c.rank())] = std::move(v);
        });
        std::vector<T> mine = gradient<T>(rank, count);
        try {
            gradsync::allreduce(comm, std::span<T>(mine), Policy{}, across, layers);
        } catch (const std::exception& e) {
            std::printf("rank %d: %s: %s\n", rank, what.c_str(), e.what());
            ++failures;
            return;
        }
        if (!same_bits(threads[std::size_t(rank)], threads[0])) {
            std::printf("rank %d: %s: over threads, rank %d differs from rank 0\n", rank, what.c_str(), rank);
            ++failures;
        }
        if (!same_bits(mine, threads[std::size_t(rank)])) {
            std::printf("rank %d: %s: across hosts, not the bits of the same algorithm over threads\n", rank,
                        what.c_str());
            ++failures;
        }
    }

    template <class T, class Policy>
    void every_algorithm(const char* type, const std::vector<std::size_t>& layers)
    {
        check<T, Policy>(type, gradsync::ring{}, gradsync::ring{}, layers);
        check<T, Policy>(type, gradsync::recursive_halving{}, gradsync::recursive_halving{}, layers);
        check<T, Policy>(type, gradsync::recursive_doubling{}, gradsync::recursive_doubling{}, layers);
        check<T, Policy>(type, gradsync::hierarchical{}, gradsync::hierarchical{.ranks_per_node = per_node}, layers);
        // Across hosts automatic shares no memory; the threads share it unless told not to.
        check<T, Policy>(type, gradsync::automatic{}, gradsync::automatic{.share_memory = false}, layers);
    }

    template <class T>
    void every_policy(const char* type)
    {
        const std::vector<std::size_t> one{100003}, many{1, 0, 4096, 77, 30000, 5, 2048, 12345};
        for (const auto* layers : {&one, &many}) {
            every_algorithm<T, gradsync::sum>(type, *layers);
            every_algorithm<T, gradsync::average>(type, *layers);
            every_algorithm<T, gradsync::adasum>(type, *layers);
        }
    }
};

} // namespace

// The fault mode (--fault OUTCOMES_DIR DEADLINE_S COUNT): Sum by recursive halving of COUNT
// small integers, call after call, each result checked exactly, with a deadline of
// DEADLINE_S, until a call fails (the test cut a link, killed a rank, ...) or the test asks
// the ranks to stop by making OUTCOMES_DIR/stop. Ranks agree on stopping through the call
// itself: one more element carries 1 from each rank that saw the file, so all stop after the
// same call. Reports the outcome and when it came (milliseconds since the epoch), for
// tests/cluster/fault.sh to hold against the time of the fault: exits 3 on a gradsync error,
// 0 when asked to stop, 1 on a wrong result, 4 when neither came within 120 s. Writes its
// process id to OUTCOMES_DIR/pid-R and says "under way" once its first call is done, so the
// fault comes after every rank started.
struct fault_mode {
    std::string outcomes;
    std::chrono::seconds deadline;
    std::size_t count;
};

// A launcher ending the job (Open MPI's, after another rank's MPI_Abort) sends SIGTERM first:
// the handler records that and when, with async-signal-safe calls only, so that the test
// tells a rank the launcher ended from one that hung.
namespace {
char terminated_path[4096];
int terminated_rank = 0;
bool reported = false; // an outcome was written
} // namespace

// A library may also end the process itself with exit(): recorded with the status, so that
// the test tells that from a hang or a crash.
extern "C" void on_exit_unreported(int status, void*)
{
    if (reported)
        return;
    const long long now =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    std::ofstream(terminated_path, std::ios::app)
        << "rank " << terminated_rank << ": exited at " << now << " with status " << status
        << ", inside a library, before any outcome\n";
}

extern "C" void on_sigterm(int)
{
    timespec t{};
    ::clock_gettime(CLOCK_REALTIME, &t);
    char line[96];
    char* end = line + sizeof line;
    char* p = end;
    const auto put = [&](unsigned long long v) {
        do
            *--p = char('0' + v % 10);
        while (v /= 10);
    };
    const char tail[] = " by SIGTERM\n";
    p -= sizeof tail - 1;
    std::memcpy(p, tail, sizeof tail - 1);
    put((unsigned long long)t.tv_sec * 1000 + (unsigned long long)t.tv_nsec / 1000000);
    const char mid[] = ": terminated at ";
    p -= sizeof mid - 1;
    std::memcpy(p, mid, sizeof mid - 1);
    put((unsigned long long)terminated_rank);
    p -= 5;
    std::memcpy(p, "rank ", 5);
    const int fd = ::open(terminated_path, O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd >= 0) {
        [[maybe_unused]] const auto written = ::write(fd, p, std::size_t(end - p));
        ::close(fd);
    }
    ::_exit(143);
}

int run_until_fault(int rank, int size, communicator& comm, const fault_mode& mode)
{
    std::snprintf(terminated_path, sizeof terminated_path, "%s/rank-%d", mode.outcomes.c_str(), rank);
    terminated_rank = rank;
    ::signal(SIGTERM, on_sigterm);
    ::on_exit(on_exit_unreported, nullptr);
    const float want = float(size * (size + 1) / 2);
    std::vector<float> data(mode.count + 1);
    gradsync::reducer<float, communicator, gradsync::sum, gradsync::recursive_halving> reduce(comm, data.size());
    const auto start = std::chrono::steady_clock::now();
    long calls = 0;
    const auto report = [&](const std::string& what) {
        const long long now = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
        const std::string line = "rank " + std::to_string(rank) + ": " + what.substr(0, what.find(':')) + " at " +
                                 std::to_string(now) + " after " + std::to_string(calls) + " calls" +
                                 (what.find(':') == std::string::npos ? "" : what.substr(what.find(':'))) + "\n";
        std::fputs(line.c_str(), stdout);
        std::fflush(stdout);
        std::ofstream(mode.outcomes + "/rank-" + std::to_string(rank), std::ios::app) << line;
        reported = true;
    };
    const auto failed = [&](const char* what, const std::exception& e) {
        report(std::string(what) + ": " + e.what());
        return 3;
    };
    while (std::chrono::steady_clock::now() - start < std::chrono::seconds(120)) {
        std::fill(data.begin(), data.end() - 1, float(rank + 1));
        data.back() = std::ifstream(mode.outcomes + "/stop").good() ? 1.0f : 0.0f;
        try {
            reduce(std::span<float>(data));
        } catch (const gradsync::deadline_error& e) {
            return failed("deadline_error", e);
        } catch (const gradsync::communication_error& e) {
            return failed("communication_error", e);
        } catch (const gradsync::error& e) {
            return failed("error", e);
        } catch (const std::exception& e) {
            return failed("unnamed", e);
        }
        if (++calls == 1) {
            std::ofstream(mode.outcomes + "/pid-" + std::to_string(rank)) << ::getpid() << "\n";
            std::printf("rank %d: under way\n", rank);
            std::fflush(stdout);
        }
        for (std::size_t i = 0; i + 1 < data.size(); ++i)
            if (data[i] != want) {
                report("wrong data: " + std::to_string(data[i]) + " at " + std::to_string(i) + ", not " +
                       std::to_string(want));
                return 1;
            }
        if (data.back() > 0.0f) {
            report("stopped");
            return 0;
        }
    }
    report("no outcome in 120 s");
    return 4;
}

// --fault OUTCOMES_DIR DEADLINE_S COUNT from argv[first] on; false when they are not there.
bool parse_fault(int argc, char** argv, int first, fault_mode& mode)
{
    if (argc != first + 4 || std::string(argv[first]) != "--fault")
        return false;
    mode = {argv[first + 1], std::chrono::seconds(std::stoi(argv[first + 2])),
            std::size_t(std::stoull(argv[first + 3]))};
    return true;
}

// Every check, on this rank; 0 when all held.
int run(int rank, int size, communicator& comm)
{
    // The nodes as hierarchical{0} finds them.
    const int per_node = comm.ranks_per_node();
    job j{rank, size, per_node, comm};
    j.every_policy<float>("fp32");
    j.every_policy<gradsync::half>("fp16");
    std::printf("rank %d of %d: %d ranks per node, %d difference(s)\n", rank, size, per_node, j.failures);
    return j.failures == 0 ? 0 : 1;
}

#if GRADSYNC_CLUSTER_MPI
int main(int argc, char** argv)
{
    fault_mode mode;
    const bool fault = parse_fault(argc, argv, 1, mode);
    if (argc != 1 && !fault) {
        std::fprintf(stderr, "usage: cluster_rank_mpi [--fault OUTCOMES_DIR DEADLINE_S COUNT]\n");
        return 2;
    }
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    int rank = 0, size = 0, status = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    try {
        communicator comm(MPI_COMM_WORLD, {.deadline = fault ? mode.deadline : std::chrono::seconds(20)});
        status = fault ? run_until_fault(rank, size, comm, mode) : run(rank, size, comm);
    } catch (const std::exception& e) {
        std::printf("rank %d: %s\n", rank, e.what());
        status = 3;
    }
    // Out of step with its peers after an error: end the job, within a bound even when the
    // launcher is out of reach (docs/cluster.md, "When a link fails"). A fault's test first
    // gives every other rank one deadline to name its own error: their waits on the lost peer
    // began up to a step apart, and the abort ends them all.
    if (status == 3) {
        if (fault)
            std::this_thread::sleep_for(mode.deadline);
        gradsync::mpi_abort(MPI_COMM_WORLD, status, std::chrono::seconds(2));
    }
    MPI_Finalize();
    return status;
}
#else
int main(int argc, char** argv)
{
    fault_mode mode;
    const bool fault = parse_fault(argc, argv, 5, mode);
    if (argc != 5 && !fault) {
        std::fprintf(stderr, "usage: cluster_rank_gloo RANK SIZE STORE_DIR ADDRESS [--fault OUTCOMES_DIR DEADLINE_S COUNT]\n");
        return 2;
    }
    const int rank = std::stoi(argv[1]), size = std::stoi(argv[2]);
    try {
        auto store = gradsync::gloo_file_store(argv[3]); // refuses a directory others could write
        gradsync::gloo_connect_options connect;
        connect.hostname = argv[4];
        connect.timeout = std::chrono::seconds(30);
        communicator comm(gradsync::gloo_connect(*store, rank, size, connect),
                          {.deadline = fault ? mode.deadline : std::chrono::seconds(20)});
        return fault ? run_until_fault(rank, size, comm, mode) : run(rank, size, comm);
    } catch (const std::exception& e) {
        std::printf("rank %d: %s\n", rank, e.what());
        return 1;
    }
}
#endif
