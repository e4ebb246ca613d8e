// The installed gradsync::gloo and gradsync::redis targets: a one-rank Gloo context through a
// file store and a reducer over it, which leaves the data as it was, and a Redis store that
// finds no server at a port nobody listens on and names it. Exit status 0 when both do.
#include <gloo/rendezvous/file_store.h>
#include <gradsync/comm/gloo/gloo.hpp>
#include <gradsync/comm/gloo/redis_store.hpp>
#include <gradsync/comm/gloo/rendezvous.hpp>
#include <gradsync/gradsync.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <span>
#include <string>
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
    bool named = false;
    try {
        gradsync::redis_store nobody({.port = 1, .timeout = std::chrono::milliseconds(100)});
    } catch (const gradsync::communication_error& e) {
        named = std::string(e.what()).find("127.0.0.1:1") != std::string::npos;
    }
    const bool ok = g == std::vector<float>{1, 2, 3} && named;
    std::printf("gloo consumer: %s\n", ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
}
