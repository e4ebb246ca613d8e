// The transport under test for test_mpi.cpp and test_mpi_conformance.cpp, one program per
// transport: GRADSYNC_TEST_TRANSPORT_MPI (gradsync::mpi_communicator over MPI_COMM_WORLD),
// GRADSYNC_TEST_TRANSPORT_BOOST_MPI (gradsync::boost_mpi_communicator over
// boost::mpi::communicator()) or GRADSYNC_TEST_TRANSPORT_GLOO (gradsync::gloo_communicator
// over a file store); the collective helpers the tests agree on outcomes with; and the
// conformance suites' harness (conformance/harness.hpp) over it.
#pragma once

#include <catch2/catch.hpp>

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib> // mkdtemp, getenv
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <sys/resource.h> // setrlimit
#include <unistd.h>       // getpid

#if defined(GRADSYNC_TEST_TRANSPORT_BOOST_MPI)
#include <boost/mpi/communicator.hpp>
#include <boost/mpi/environment.hpp>
#include <gradsync/comm/mpi/boost_mpi.hpp>
using transport = gradsync::boost_mpi_communicator;
inline transport make_comm() { return transport(boost::mpi::communicator()); }
inline transport make_comm(MPI_Comm c, gradsync::mpi_options o)
{
    return transport(boost::mpi::communicator(c, boost::mpi::comm_attach), o);
}
#elif defined(GRADSYNC_TEST_TRANSPORT_GLOO)
#include <gloo/rendezvous/file_store.h>
#include <gradsync/comm/gloo/gloo.hpp>
#include <gradsync/comm/gloo/rendezvous.hpp>
#include <gradsync/comm/mpi/mpi.hpp> // mpi_options: the deadline the tests ask for
using transport = gradsync::gloo_communicator;
// MPI only launches the ranks and agrees on outcomes; the transport under test is Gloo, over
// a file store in a directory rank 0 makes. Every communicator gets a context of its own,
// connected under a prefix of its own with Gloo's default timeout: the deadline asked for
// bounds the communicator's waits, not the connecting, where a rank that had nothing to wait
// for in the last case may arrive a whole deadline before the others.
inline std::filesystem::path gloo_store_dir;
inline transport make_comm(MPI_Comm c, gradsync::mpi_options o)
{
    static int contexts = 0;
    int rank = 0, size = 0;
    MPI_Comm_rank(c, &rank);
    MPI_Comm_size(c, &size);
    gloo::rendezvous::FileStore store(gloo_store_dir.string());
    gradsync::gloo_connect_options connect;
    connect.prefix = "context" + std::to_string(contexts++);
    const char* eager = std::getenv("GRADSYNC_TEST_GLOO_EAGER"); // bytes; the suite then runs eagerly
    return transport(gradsync::gloo_connect(store, rank, size, connect),
                     {.deadline = std::chrono::duration_cast<std::chrono::milliseconds>(o.deadline),
                      .eager_bytes = eager ? std::size_t(std::strtoull(eager, nullptr, 10)) : 0});
}
inline transport make_comm() { return make_comm(MPI_COMM_WORLD, {}); }
#elif defined(GRADSYNC_TEST_TRANSPORT_MPI)
#include <gradsync/comm/mpi/mpi.hpp>
using transport = gradsync::mpi_communicator;
inline transport make_comm() { return transport(MPI_COMM_WORLD); }
inline transport make_comm(MPI_Comm c, gradsync::mpi_options o) { return transport(c, o); }
#else
#error "define GRADSYNC_TEST_TRANSPORT_MPI, GRADSYNC_TEST_TRANSPORT_BOOST_MPI or GRADSYNC_TEST_TRANSPORT_GLOO"
#endif

#include <gradsync/gradsync.hpp>

#include "broadcast_data.hpp"
#include "catch_session.hpp"
#include "failing_sends.hpp"
#include "conformance/harness.hpp"
#include "large_message.hpp"
#include "reference.hpp"

inline int world_rank()
{
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

inline int world_size()
{
    int n = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
}

// Collective: true on every rank iff true on every rank.
inline bool everywhere(bool mine)
{
    int in = mine ? 1 : 0, out = 0;
    MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return out == 1;
}

// Collective: true iff every rank passed the same value.
inline bool same_everywhere(std::uint64_t h)
{
    std::uint64_t lo = 0, hi = 0;
    MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    return lo == hi;
}

// Runs a library call that should succeed. If it throws, the other ranks are (or soon will
// be) blocked in a collective this rank will never join, so say what happened and abort the
// whole job: a failed test instead of a hang until the timeout.
template <class F>
void must_succeed(const std::string& context, F&& f)
{
    try {
        f();
    } catch (const std::exception& e) {
        std::cerr << "rank " << world_rank() << ": " << context << ": unexpected exception: " << e.what() << std::endl;
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

template <class F>
void for_each_type(F&& f)
{
    f(gradsync::half{});
    f(gradsync::bfloat16{});
    f(float{});
    f(double{});
}

namespace conformance {

// The suite's communicator: made at its first case, destroyed before MPI_Finalize (a Gloo
// communicator's destructor with eager messages is collective).
inline std::unique_ptr<transport> suite_comm;

// The suite's harness (conformance/harness.hpp) over the transport: this process is one rank
// of the launcher's N, checks its own results and compares checksums with the others.
struct harness {
    using comm_type = transport;
    static constexpr bool in_process = false;

    static std::vector<int> sizes(const std::vector<int>&) { return {world_size()}; }

    // One communicator for every case of the suite, as a trainer keeps one: a Gloo context
    // connects in about a tenth of a second, and the suite runs hundreds of cases.
    template <class Body>
    static std::string run(int n, Body&& body)
    {
        if (!suite_comm)
            suite_comm.reset(new transport(make_comm())); // no move: a transport need not move
        transport& comm = *suite_comm;
        REQUIRE(comm.size() == n);
        REQUIRE(comm.rank() == world_rank());
        must_succeed(Catch::getResultCapture().getCurrentTestName(), [&] { body(comm); });
        return "";
    }

    static int checked_rank() { return world_rank(); }

    static std::vector<int> checked_ranks(int) { return {world_rank()}; }

    template <class T>
    static std::string identical(const per_rank<T>& out)
    {
        const std::vector<T>& mine = out[std::size_t(world_rank())];
        if (same_everywhere(ref::fnv1a(mine.data(), mine.size() * sizeof(T))))
            return "";
        return "rank " + std::to_string(world_rank()) + "'s checksum is not every rank's";
    }
};

} // namespace conformance
