// shared_memory over threads of a local_group: what ends a wait on a peer's flag (a peer that
// never calls, a peer that fails), the region each plan maps and gives back, that the
// threads read each other's buffers in place, and (for the race detector) Adasum and
// hierarchical's node stage on shared memory. Its results on every transport are the
// conformance suite's (tests/conformance/allreduce.hpp); processes that die or live in
// another PID namespace are test_gloo_peers.cpp's.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <latch>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gradsync/gradsync.hpp>

#include "adasum_reference.hpp"
#include "reference.hpp"
#include "thrown.hpp"

namespace {

using gradsync::local_communicator;
using shared_reducer = gradsync::reducer<float, local_communicator, gradsync::sum, gradsync::shared_memory>;
using gradsync_test::thrown;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

// The mappings of this process whose file is a memfd of gradsync's.
std::size_t regions_mapped()
{
    std::ifstream maps("/proc/self/maps");
    std::size_t n = 0;
    for (std::string line; std::getline(maps, line);)
        n += line.find("/memfd:gradsync") != std::string::npos;
    return n;
}

std::size_t open_files()
{
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd"))
        ++n;
    return n;
}

} // namespace

TEST_CASE("threads read each other's buffers in place, with no scratch", "[shared]")
{
    for (int n : {1, 2, 3, 8}) {
        gradsync::local_group group(n);
        std::vector<int> direct(std::size_t(n), 0);
        std::vector<std::size_t> scratch(std::size_t(n), 1);
        group.run([&](local_communicator& comm) {
            shared_reducer reduce(comm, 1000);
            direct[std::size_t(comm.rank())] = reduce.plan().direct();
            scratch[std::size_t(comm.rank())] = reduce.plan().scratch_bytes();
        });
        INFO("N " << n);
        CHECK(direct == std::vector<int>(std::size_t(n), 1));
        CHECK(scratch == std::vector<std::size_t>(std::size_t(n), 0));
    }
}

TEST_CASE("Adasum and hierarchical's node stage between threads give the message-passing bits", "[shared]")
{
    // Where the race detector looks: the chains kept in peers' buffers, the triples in the
    // exchange areas read while the next link's are written, the node stage's two halves.
    const std::vector<std::size_t> layers{7, 0, 300, 1, 1000};
    const std::size_t count = 1308;
    for (int n : {2, 3, 5}) {
        gradsync::local_group group(n);
        const std::vector<std::vector<float>> none(static_cast<std::size_t>(n));
        std::vector<std::vector<float>> adasum_shared = none, adasum_ring = none, node_shared = none, ring = none;
        std::vector<int> shares(std::size_t(n), 0);
        group.run([&](local_communicator& comm) {
            const auto r = std::size_t(comm.rank());
            const std::span<const std::size_t> l(layers);
            gradsync::reducer<float, local_communicator, gradsync::adasum, gradsync::shared_memory> a(comm, l);
            gradsync::reducer<float, local_communicator, gradsync::adasum, gradsync::ring> b(comm, l);
            gradsync::reducer<float, local_communicator, gradsync::sum, gradsync::hierarchical> h(comm, count);
            gradsync::reducer<float, local_communicator, gradsync::sum, gradsync::ring> g(comm, count);
            shares[r] = h.plan().node_shares_memory();
            for (std::uint64_t call = 0; call < 2; ++call) { // the second call's flags follow the first's
                adasum_shared[r] = adaref::normal_data<float>(call, comm.rank(), count);
                adasum_ring[r] = adasum_shared[r];
                a(std::span<float>(adasum_shared[r]));
                b(std::span<float>(adasum_ring[r]));
                node_shared[r] = ref::int_data<float>(call, comm.rank(), count);
                ring[r] = node_shared[r];
                h(std::span<float>(node_shared[r]));
                g(std::span<float>(ring[r]));
            }
        });
        INFO("N " << n);
        CHECK(shares == std::vector<int>(std::size_t(n), 1));
        for (std::size_t r = 0; r < std::size_t(n); ++r) {
            CHECK(ref::first_difference(adasum_shared[r], adasum_ring[r]) == "");
            CHECK(ref::first_difference(node_shared[r], ring[r]) == "");
        }
    }
}

TEST_CASE("each plan maps its region once per process and gives it back, with no file left open", "[shared]")
{
    const std::size_t mapped = regions_mapped(), files = open_files();
    gradsync::local_group group(4);
    std::vector<std::size_t> during(4);
    group.run([&](local_communicator& comm) {
        shared_reducer a(comm, 100), b(comm, 100000);
        std::vector<float> x(100000, 1.0f);
        b(std::span<float>(x));
        during[std::size_t(comm.rank())] = regions_mapped();
    });
    for (std::size_t seen : during) // 2 plans, one mapping each for the 4 ranks of this process
        CHECK(seen == mapped + 2);
    CHECK(regions_mapped() == mapped);
    CHECK(open_files() == files);
}

TEST_CASE("a peer that never calls ends the wait in deadline_error naming it", "[shared]")
{
    gradsync::local_options options;
    options.deadline = std::chrono::milliseconds(200);
    gradsync::local_group group(3, options);
    std::vector<std::string> out(3);
    group.run([&](local_communicator& comm) {
        shared_reducer reduce(comm, 64);
        if (comm.rank() == 2)
            return; // built the plan, never calls it
        std::vector<float> x(64, 1.0f);
        out[std::size_t(comm.rank())] = thrown([&] { reduce(std::span<float>(x)); });
    });
    for (int r : {0, 1}) {
        INFO("rank " << r);
        CHECK_THAT(out[std::size_t(r)],
                   StartsWith("deadline_error: gradsync::reducer (rank " + std::to_string(r) + " of 3): reducer #") &&
                       Contains("gradsync::shared_memory (rank " + std::to_string(r) +
                                " of 3): call 1: waiting for the data of rank 2: it did not come within 0.2"));
    }
    CHECK(out[2].empty());
}

TEST_CASE("a peer that fails releases the ranks waiting on its flag", "[shared]")
{
    gradsync::local_group group(3); // no deadline: only the release ends the waits
    std::vector<std::string> out(3);
    std::latch built(3); // rank 1 fails once every rank has built its plan, not during it
    const std::string escaped = [&] {
        try {
            group.run([&](local_communicator& comm) {
                shared_reducer reduce(comm, 64);
                built.arrive_and_wait();
                if (comm.rank() == 1)
                    throw std::runtime_error("rank 1's own failure");
                std::vector<float> x(64, 1.0f);
                out[std::size_t(comm.rank())] = thrown([&] { reduce(std::span<float>(x)); });
            });
        } catch (const std::exception& e) {
            return std::string(e.what());
        }
        return std::string();
    }();
    CHECK(escaped == "rank 1's own failure");
    for (int r : {0, 2}) {
        INFO("rank " << r);
        CHECK_THAT(out[std::size_t(r)], StartsWith("aborted_error: ") && Contains("of rank 1: this rank was released"));
    }
}

TEST_CASE("a call after a peer left one with an error is refused, and no buffer is read after it is gone", "[shared]")
{
    gradsync::local_options options;
    options.deadline = std::chrono::milliseconds(100);
    gradsync::local_group group(2, options);
    std::vector<std::string> first(2), second(2);
    group.run([&](local_communicator& comm) {
        shared_reducer reduce(comm, 4096);
        {
            // Rank 1 comes late: rank 0's deadline ends its call, and rank 0's buffer,
            // published, goes out of scope right after (ASan would see a late read).
            std::vector<float> x(4096, 2.0f);
            if (comm.rank() == 0)
                first[0] = thrown([&] { reduce(std::span<float>(x)); });
        }
        if (comm.rank() == 1)
            std::this_thread::sleep_for(std::chrono::milliseconds(1000)); // well past rank 0's deadline
        std::vector<float> y(4096, 3.0f);
        second[std::size_t(comm.rank())] = thrown([&] { reduce(std::span<float>(y)); });
    });
    CHECK_THAT(first[0], StartsWith("deadline_error: ") && Contains("waiting for the data of rank 1"));
    CHECK_THAT(second[0], StartsWith("usage_error: ") && Contains("refused: call 1 failed"));
    // Rank 1's first call finds rank 0 gone from the call it waited in.
    CHECK_THAT(second[1], StartsWith("aborted_error: ") && Contains("the data of rank 0: that rank left the call with an error"));
}
