// The installed gradsync::gloo target: a one-rank Gloo context through a file store and a
// reducer over it, which leaves the data as it was. Exit status 0 when it does.
#include <gloo/rendezvous/file_store.h>
#include <gradsync/comm/gloo/gloo.hpp>
#include <gradsync/comm/gloo/rendezvous.hpp>
#include <gradsync/gradsync.hpp>

#include <cstdio>
#include <filesystem>
#include <span>
#include <vector>

int main(int argc, char** argv)
{
    if (argc != 2)
        return 2;
    std::filesystem::create_directories(argv[1]);
    gloo::rendezvous::FileStore store(argv[1]);
    gradsync::gloo_communicator comm(gradsync::gloo_connect(store, 0, 1));
    std::vector<float> g{1, 2, 3};
    gradsync::reducer<float, gradsync::gloo_communicator, gradsync::average> reduce(comm, g.size());
    reduce(std::span<float>(g));
    const bool ok = g == std::vector<float>{1, 2, 3};
    std::printf("gloo consumer: %s\n", ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
}
