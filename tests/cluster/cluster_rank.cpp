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
//   cluster_rank_gloo RANK SIZE STORE_DIR ADDRESS [--fault]
//   cluster_rank_mpi
// With --fault it runs calls until one fails instead (run_until_fault, a deadline of 3 s).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <gradsync/gradsync.hpp>

#if GRADSYNC_CLUSTER_MPI
#include <mpi.h>

#include <gradsync/comm/mpi.hpp>
using communicator = gradsync::mpi_communicator;
#else
#include <gloo/rendezvous/file_store.h>

#include <gradsync/comm/gloo.hpp>
#include <gradsync/comm/gloo_rendezvous.hpp>
using communicator = gradsync::gloo_communicator;
#endif

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

    // `across` runs on the cluster, `local` (the same algorithm with the nodes spelt out) over
    // threads.
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
        check<T, Policy>(type, gradsync::automatic{}, gradsync::automatic{}, layers);
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

// The fault mode: Sum by recursive halving of 4 MiB of small integers, call after call, each
// result checked exactly, until a call fails (someone cuts a link). Prints the error's class
// and when it came (milliseconds since the epoch), for tests/cluster/fault.sh to hold against
// the time of the cut; exits 3 then, 1 on a wrong result, 4 when nothing failed in 60 s.
// Says "under way" once its first call is done, so the cut comes after every rank started.
int run_until_fault(int rank, int size, communicator& comm)
{
    const std::size_t count = std::size_t(1) << 20;
    const float want = float(size * (size + 1) / 2);
    std::vector<float> data(count);
    gradsync::reducer<float, communicator, gradsync::sum, gradsync::recursive_halving> reduce(comm, count);
    const auto start = std::chrono::steady_clock::now();
    long calls = 0;
    const auto report = [&](const char* what, const std::exception& e) {
        const long long now = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
        std::printf("rank %d: %s at %lld after %ld calls: %s\n", rank, what, now, calls, e.what());
        return 3;
    };
    while (std::chrono::steady_clock::now() - start < std::chrono::seconds(60)) {
        std::fill(data.begin(), data.end(), float(rank + 1));
        try {
            reduce(std::span<float>(data));
        } catch (const gradsync::deadline_error& e) {
            return report("deadline_error", e);
        } catch (const gradsync::communication_error& e) {
            return report("communication_error", e);
        } catch (const gradsync::error& e) {
            return report("error", e);
        } catch (const std::exception& e) {
            return report("unnamed", e);
        }
        if (++calls == 1) {
            std::printf("rank %d: under way\n", rank);
            std::fflush(stdout);
        }
        for (float x : data)
            if (x != want) {
                std::printf("rank %d: wrong data after %ld calls: %g, not %g\n", rank, calls, double(x), double(want));
                return 1;
            }
    }
    std::printf("rank %d: no call failed in 60 s (%ld calls)\n", rank, calls);
    return 4;
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
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    int rank = 0, size = 0, status = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    try {
        communicator comm(MPI_COMM_WORLD, {.deadline = std::chrono::seconds(20)});
        status = run(rank, size, comm);
    } catch (const std::exception& e) {
        std::printf("rank %d: %s\n", rank, e.what());
    }
    MPI_Finalize();
    return status;
}
#else
int main(int argc, char** argv)
{
    const bool fault = argc == 6 && std::string(argv[5]) == "--fault";
    if (argc != 5 && !fault) {
        std::fprintf(stderr, "usage: cluster_rank_gloo RANK SIZE STORE_DIR ADDRESS [--fault]\n");
        return 2;
    }
    const int rank = std::stoi(argv[1]), size = std::stoi(argv[2]);
    try {
        gloo::rendezvous::FileStore store(argv[3]);
        gradsync::gloo_connect_options connect;
        connect.hostname = argv[4];
        connect.timeout = std::chrono::seconds(30);
        communicator comm(gradsync::gloo_connect(store, rank, size, connect),
                          {.deadline = std::chrono::seconds(fault ? 3 : 20)});
        return fault ? run_until_fault(rank, size, comm) : run(rank, size, comm);
    } catch (const std::exception& e) {
        std::printf("rank %d: %s\n", rank, e.what());
        return 1;
    }
}
#endif
