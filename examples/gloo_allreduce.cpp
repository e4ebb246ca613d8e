// One rank of a job that reduces gradients over Gloo, without MPI. Start one process per rank,
// by a shell loop on one host:
//
//   for r in 0 1 2 3; do ./gloo_allreduce --rank $r --size 4 --store /tmp/job1 & done; wait
//
// or by hand on several hosts, the store on a file system they share and each rank's own
// address given with --hostname (docs/gloo.md). Each rank fills three layers with values it
// and every other rank can compute, reduces them with the chosen policy three times with one
// reducer, checks every element against the exact result and prints a line; the exit status
// says whether every element was right.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <gradsync/comm/gloo/file_store.hpp>
#include <gradsync/comm/gloo/gloo.hpp>
#include <gradsync/comm/gloo/rendezvous.hpp>
#include <gradsync/gradsync.hpp>

namespace {

const std::vector<std::size_t> layers{1000, 24, 65536};

// Small integers: their sums and halvings are exact in fp32, so the check is equality.
float gradient(int rank, std::size_t i, int call) { return float((rank + 1) * 2 + int(i % 7) + call); }

struct arguments {
    int rank = -1, size = 0;
    std::string store, hostname = "127.0.0.1", policy = "sum";
};

[[noreturn]] void usage(const char* why)
{
    std::fprintf(stderr,
                 "gloo_allreduce: %s\n"
                 "usage: gloo_allreduce --rank R --size N --store DIR [--hostname ADDRESS] [--policy sum|average]\n",
                 why);
    std::exit(2);
}

arguments parse(int argc, char** argv)
{
    arguments a;
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        if (i + 1 >= argc)
            usage(("missing value after " + flag).c_str());
        const char* value = argv[++i];
        if (flag == "--rank")
            a.rank = std::atoi(value);
        else if (flag == "--size")
            a.size = std::atoi(value);
        else if (flag == "--store")
            a.store = value;
        else if (flag == "--hostname")
            a.hostname = value;
        else if (flag == "--policy")
            a.policy = value;
        else
            usage(("unknown option " + flag).c_str());
    }
    if (a.size < 1 || a.rank < 0 || a.rank >= a.size)
        usage("--rank R and --size N with 0 <= R < N are required");
    if (a.store.empty())
        usage("--store DIR is required");
    if (a.policy != "sum" && a.policy != "average")
        usage("--policy is sum or average");
    return a;
}

template <class Policy>
int run(gradsync::gloo_communicator& comm, const arguments& a)
{
    std::size_t count = 0;
    for (std::size_t n : layers)
        count += n;
    gradsync::reducer<float, gradsync::gloo_communicator, Policy> reduce(comm, layers);
    std::vector<float> grad(count);
    std::size_t wrong = 0;
    double seconds = 0;
    for (int call = 0; call < 3; ++call) {
        for (std::size_t i = 0; i < count; ++i)
            grad[i] = gradient(a.rank, i, call);
        const auto start = std::chrono::steady_clock::now();
        reduce(std::span<float>(grad));
        seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        for (std::size_t i = 0; i < count; ++i) {
            float want = 0;
            for (int r = 0; r < a.size; ++r)
                want += gradient(r, i, call);
            if (a.policy == "average")
                want /= float(a.size);
            wrong += grad[i] != want;
        }
    }
    std::printf("rank %d of %d: %s of %zu fp32 in %zu layers, 3 calls, %.3f ms per call, %s\n", a.rank, a.size,
                a.policy.c_str(), count, layers.size(), seconds / 3 * 1e3,
                wrong ? (std::to_string(wrong) + " elements WRONG").c_str() : "every element exact");
    return wrong ? 1 : 0;
}

} // namespace

int main(int argc, char** argv)
{
    const arguments a = parse(argc, argv);
    try {
        const auto store = gradsync::gloo_file_store(a.store); // refuses a directory others could write
        gradsync::gloo_connect_options connect;
        connect.hostname = a.hostname;
        gradsync::gloo_communicator comm(gradsync::gloo_connect(*store, a.rank, a.size, connect));
        return a.policy == "average" ? run<gradsync::average>(comm, a) : run<gradsync::sum>(comm, a);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "gloo_allreduce (rank %d of %d): %s\n", a.rank, a.size, e.what());
        return 1;
    }
}
