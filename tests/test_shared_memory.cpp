// shared_memory over threads of a local_group: what ends a wait on a peer's flag (a peer that
// never calls, a peer that fails, one deadline for every peer), the region each plan maps and
// gives back, that the threads read each other's buffers in place, that hierarchical's rank
// that fails between its node stage's halves leaves before its call returns, and (for the
// race detector) Adasum and hierarchical's node stage on shared memory. Its results on every transport are the
// conformance suite's (tests/conformance/allreduce.hpp); processes that die or live in
// another PID namespace are test_gloo_peers.cpp's.
#include <catch2/catch.hpp>

#include <atomic>
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
#include "failing_sends.hpp"
#include "outcome.hpp"
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
    for (std::size_t seen : during) // 2 plans and the group's position board, one mapping each for the 4 ranks
        CHECK(seen == mapped + 3);
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
        // Rank 1, and maybe the other rank, released too before it came ("of ranks 0 and 1: ").
        CHECK_THAT(out[std::size_t(r)], StartsWith("aborted_error: ") && Contains("1: this rank was released"));
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

TEST_CASE("hierarchical: a rank that fails between the node stage's halves is gone before its call returns", "[shared]")
{
    // Rank 0 fails its cross-node send on call 2, after its node peer (rank 1) may read and
    // write its buffer. Its peer must find it gone and end at once with aborted_error, and
    // write nothing into rank 0's buffer after rank 0's call returned (rank 0 keeps the
    // buffer and looks again after a while; under ASan a late write would be seen too).
    constexpr std::size_t count = 65536;
    gradsync::local_options options;
    options.deadline = std::chrono::seconds(30); // only a wait that missed the departure lasts this long
    gradsync::local_group group(4, options);
    std::atomic<bool> armed{false};
    std::vector<std::string> out(4);
    std::string changed;
    std::latch built(4);
    const std::string escaped = gradsync_test::run_ranks(group, [&](local_communicator& inner) {
        gradsync_test::failing_sends<local_communicator> comm(inner, armed);
        gradsync::reducer<float, gradsync_test::failing_sends<local_communicator>, gradsync::sum, gradsync::hierarchical> reduce(
            comm, count, gradsync::hierarchical{.ranks_per_node = 2});
        std::vector<float> first(count, 1.0f);
        reduce(std::span<float>(first));
        built.arrive_and_wait();
        if (comm.rank() == 0)
            armed = true;
        std::vector<float> data = ref::int_data<float>(2, comm.rank(), count);
        if (comm.rank() == 0) {
            out[0] = thrown([&] { reduce(std::span<float>(data)); });
            const std::vector<float> returned = data;
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            changed = ref::first_difference(data, returned);
            throw gradsync::communication_error("rank 0 is done"); // releases the ranks still waiting
        }
        out[std::size_t(comm.rank())] = thrown([&] { reduce(std::span<float>(data)); });
    });
    CHECK(escaped == "rank 0 is done");
    INFO("rank 0: " << out[0] << "\nrank 1: " << out[1]);
    CHECK_THAT(out[0], StartsWith("communication_error: ") && Contains("planted failure"));
    CHECK_THAT(out[1], StartsWith("aborted_error: ") && Contains("rank 0") && Contains("left the call with an error"));
    CHECK(changed == "");
}

TEST_CASE("one deadline bounds a wait on every peer, however they arrive", "[shared]")
{
    // Rank 1 comes after 0.6 deadlines and rank 2 after 1.2: each within a deadline of the one
    // before, but rank 0's wait for both lasts longer than one deadline, which ends it.
    constexpr auto deadline = std::chrono::milliseconds(1000);
    gradsync::local_options options;
    options.deadline = deadline;
    gradsync::local_group group(3, options);
    std::vector<std::string> out(3);
    double waited = 0;
    group.run([&](local_communicator& comm) {
        shared_reducer reduce(comm, 64);
        std::vector<float> x(64, 1.0f);
        std::this_thread::sleep_for(comm.rank() * deadline * 6 / 10);
        const auto start = std::chrono::steady_clock::now();
        out[std::size_t(comm.rank())] = thrown([&] { reduce(std::span<float>(x)); });
        if (comm.rank() == 0)
            waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    });
    INFO(out[0]);
    CHECK_THAT(out[0], StartsWith("deadline_error: ") && Contains("waiting for the data of rank 2: it did not come within 1"));
    CHECK(waited >= 1.0);
}

TEST_CASE("after a call one rank made alone, new reducers count from rank 0's position: calls out of order are still "
          "named",
          "[shared]")
{
    // Rank 0 makes a call rank 1 never makes (it ends at the deadline), so rank 0 has counted
    // one call more on the board. The next reducers take rank 0's position when they are
    // built, so that two of them called out of order are at the same point of the sequence
    // and named, not left to the deadline.
    gradsync::local_options options;
    options.deadline = std::chrono::milliseconds(300);
    gradsync::local_group group(2, options);
    std::vector<std::string> alone(2), out(2);
    std::vector<std::uint64_t> identity(2);
    group.run([&](local_communicator& comm) {
        std::vector<float> x(64, 1.0f), y(64, 2.0f);
        shared_reducer a(comm, 64);
        if (comm.rank() == 0)
            alone[0] = thrown([&] { a(std::span<float>(x)); });
        else
            std::this_thread::sleep_for(std::chrono::milliseconds(600)); // past rank 0's deadline
        shared_reducer b(comm, 64), c(comm, 64);
        if (comm.rank() == 0) {
            identity[0] = b.identity();
            identity[1] = c.identity();
        }
        out[std::size_t(comm.rank())] = thrown([&] {
            if (comm.rank() == 0) {
                b(std::span<float>(x));
                c(std::span<float>(y));
            } else {
                c(std::span<float>(y));
                b(std::span<float>(x));
            }
        });
    });
    CHECK_THAT(alone[0], StartsWith("deadline_error: "));
    for (int r : {0, 1}) {
        INFO("rank " << r << ": " << out[std::size_t(r)]);
        CHECK_THAT(out[std::size_t(r)], StartsWith("mismatch_error: ") &&
                                            Contains("reducer #" + std::to_string(identity[0])) &&
                                            Contains("reducer #" + std::to_string(identity[1])));
    }
}
