// One rank of data_parallel training across the test cluster's hosts (scripts/cluster.sh),
// over Gloo or, built with GRADSYNC_CLUSTER_MPI, over MPI (started as cluster_rank.cpp's
// ranks are). Each rank makes LeNet-5 from a seed of its own (broadcast_start makes the
// replicas equal), then runs a few steps of SGD on its own batches with data_parallel, with
// Average and with Adasum. The same training runs over a local_group of as many threads in
// this process; the rank's parameters must have the bits of its thread's, and every thread's
// the bits of thread 0's. Prints the parameters' hash; exits 0 when every check held, 1
// otherwise, 2 on bad arguments.
//
// Across hosts no memory is shared, and the threads are told not to share it either. With
// `one_host` (cluster_lenet_mpi launched on this host alone), the processes' gradients must lie
// in a shared_buffer, reduced there in place, and the threads share memory as well.
//
//   cluster_lenet_gloo RANK SIZE STORE_DIR ADDRESS
//   cluster_lenet_mpi [one_host]
#include "../torch_harness.hpp"

#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "engine.hpp"

namespace {

constexpr int steps = 3;

// FNV-1a over the bytes of every parameter, in order.
std::uint64_t hash_of(const std::vector<float>& v)
{
    std::uint64_t h = 0xcbf29ce484222325u;
    const auto* p = reinterpret_cast<const unsigned char*>(v.data());
    for (std::size_t i = 0; i < v.size() * sizeof(float); ++i)
        h = (h ^ p[i]) * 0x100000001b3u;
    return h;
}

// Rank `rank`'s own start. Made before any training thread runs: libtorch's generator is one
// for the process.
gradsync_test::lenet start_of(int rank)
{
    torch::manual_seed(std::uint64_t(100 + rank));
    return gradsync_test::lenet();
}

// Rank `rank`'s training from `model`, its own batches, `steps` reduced SGD steps; returns the
// parameters, and sets whether the gradients lay in memory the ranks share.
template <class Policy, class Comm>
std::vector<float> train(Comm& comm, gradsync_test::lenet model, int rank,
                         const std::vector<std::vector<gradsync_test::batch>>& inputs, gradsync::automatic algorithm,
                         bool& shared)
{
    gradsync::data_parallel<float, Comm, Policy> dp(comm, *model, {}, algorithm);
    shared = dp.gradients_shared();
    torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    for (int s = 0; s < steps; ++s) {
        dp.zero_grad();
        gradsync_test::backward(model, inputs[std::size_t(s)][std::size_t(rank)]);
        dp.synchronize();
        sgd.step();
    }
    return gradsync_test::flat_of(model->parameters());
}

template <class Policy>
int check(communicator& comm, const char* name, bool one_host)
{
    const int rank = comm.rank(), size = comm.size();
    const auto inputs = gradsync_test::batches(steps, size);
    std::vector<std::vector<float>> threads(static_cast<std::size_t>(size));
    std::vector<gradsync_test::lenet> starts;
    for (int r = 0; r < size; ++r)
        starts.push_back(start_of(r));
    gradsync::local_group group(size);
    group.run([&](gradsync::local_communicator& c) {
        const std::size_t r = std::size_t(c.rank());
        bool shared = false;
        // Across hosts automatic shares no memory; the threads share it unless told not to.
        threads[r] = train<Policy>(c, starts[r], c.rank(), inputs, gradsync::automatic{.share_memory = one_host}, shared);
    });
    bool shared = false;
    const std::vector<float> mine = train<Policy>(comm, start_of(rank), rank, inputs, {}, shared);
    int failures = 0;
    if (shared != (one_host && size > 1)) {
        std::printf("rank %d: %s: the gradients %s in shared memory\n", rank, name, shared ? "lay" : "did not lie");
        ++failures;
    }
    if (!gradsync_test::same_bits(threads[std::size_t(rank)], threads[0])) {
        std::printf("rank %d: %s: over threads, rank %d's parameters differ from rank 0's\n", rank, name, rank);
        ++failures;
    }
    if (!gradsync_test::same_bits(mine, threads[std::size_t(rank)])) {
        std::printf("rank %d: %s: over processes, not the parameters of the same training over threads\n", rank, name);
        ++failures;
    }
    std::printf("rank %d of %d: %s, %d steps, gradients %s, parameter hash %016llx over processes, %016llx over "
                "threads\n",
                rank, size, name, steps, shared ? "shared" : "not shared", static_cast<unsigned long long>(hash_of(mine)),
                static_cast<unsigned long long>(hash_of(threads[std::size_t(rank)])));
    return failures;
}

int run(communicator& comm, bool one_host)
{
    const int failures =
        check<gradsync::average>(comm, "average", one_host) + check<gradsync::adasum>(comm, "adasum", one_host);
    return failures == 0 ? 0 : 1;
}

} // namespace

#if GRADSYNC_CLUSTER_MPI
int main(int argc, char** argv)
{
    const bool one_host = argc == 2 && std::string(argv[1]) == "one_host";
    if (argc != 1 && !one_host) {
        std::fprintf(stderr, "usage: cluster_lenet_mpi [one_host]\n");
        return 2;
    }
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided); // data_parallel's thread
    int status = 1;
    try {
        communicator comm(MPI_COMM_WORLD, {.deadline = std::chrono::seconds(60)});
        status = run(comm, one_host);
    } catch (const std::exception& e) {
        std::printf("%s\n", e.what());
        gradsync::mpi_abort(MPI_COMM_WORLD, 1, std::chrono::seconds(2));
    }
    MPI_Finalize();
    return status;
}
#else
int main(int argc, char** argv)
{
    if (argc != 5) {
        std::fprintf(stderr, "usage: cluster_lenet_gloo RANK SIZE STORE_DIR ADDRESS\n");
        return 2;
    }
    try {
        const auto store = gradsync::gloo_file_store(argv[3]);
        gradsync::gloo_connect_options connect;
        connect.hostname = argv[4];
        communicator comm(gradsync::gloo_connect(*store, std::stoi(argv[1]), std::stoi(argv[2]), connect),
                          {.deadline = std::chrono::seconds(60)});
        return run(comm, false);
    } catch (const std::exception& e) {
        std::printf("%s\n", e.what());
        return 1;
    }
}
#endif
