// The conformance suites (tests/conformance/adasum.hpp, misuse.hpp and movement.hpp here;
// allreduce.hpp, reductions.hpp and tuned in test_mpi_conformance.cpp, a source of its own so
// that a build compiles the two side by side, left out under the sanitizers: see
// tests/CMakeLists.txt) and the broadcasts over a real transport, for the launcher's N.
// Compiled three times: GRADSYNC_TEST_TRANSPORT_MPI (gradsync::mpi_communicator over
// MPI_COMM_WORLD), GRADSYNC_TEST_TRANSPORT_BOOST_MPI (gradsync::boost_mpi_communicator over
// boost::mpi::communicator()) and GRADSYNC_TEST_TRANSPORT_GLOO (gradsync::gloo_communicator
// over a file store): mpi_transport.hpp.
//
// Every rank runs the same test cases in the same order, and every collective the tests use
// (MPI_Allreduce to agree on outcomes) is called unconditionally, so a failed CHECK on one
// rank never leaves another waiting. The process exit code is non-zero if any rank failed.
#include "mpi_transport.hpp"

#include "conformance/adasum.hpp"
#include "conformance/misuse.hpp"
#include "conformance/movement.hpp"

namespace {

enum class kind { ok, mismatch, usage, communication, other_gradsync, other };

const char* kind_name(kind k)
{
    switch (k) {
    case kind::ok: return "no error";
    case kind::mismatch: return "mismatch_error";
    case kind::usage: return "usage_error";
    case kind::communication: return "communication_error";
    case kind::other_gradsync: return "another gradsync::error";
    case kind::other: return "another exception";
    }
    return "?";
}

template <class F>
kind classify(F&& f, std::string& what)
{
    try {
        f();
        return kind::ok;
    } catch (const gradsync::mismatch_error& e) {
        what = e.what();
        return kind::mismatch;
    } catch (const gradsync::usage_error& e) {
        what = e.what();
        return kind::usage;
    } catch (const gradsync::communication_error& e) {
        what = e.what();
        return kind::communication;
    } catch (const gradsync::error& e) {
        what = e.what();
        return kind::other_gradsync;
    } catch (const std::exception& e) {
        what = e.what();
        return kind::other;
    }
}

template <class T>
bool unchanged(const std::vector<T>& now, const std::vector<T>& before)
{
    return now.size() == before.size() && ref::same_bits(now.data(), before.data(), now.size() * sizeof(T));
}

// The last rank disagrees; every rank must see `expected`, with its buffer intact.
template <class Body>
void expect_everywhere(kind expected, const char* field, Body body)
{
    std::string what;
    bool untouched = false;
    const kind k = classify([&] { body(untouched); }, what);
    const bool all = everywhere(k == expected);
    INFO("rank " << world_rank() << ": " << kind_name(k) << ": " << what);
    CHECK(kind_name(k) == std::string(kind_name(expected)));
    CHECK_THAT(what, Catch::Matchers::Contains(field, Catch::CaseSensitive::No));
    CHECK(untouched);
    CHECK(all);
}

} // namespace

namespace {

// Two calls of one broadcaster for every root and counts 0, 1, N + 1, 1000 and above two
// pipeline segments: whether every one left the root's bits here.
template <class T, class Algorithm>
bool broadcasts_exact(transport& comm)
{
    const int n = comm.size();
    const std::vector<std::size_t> counts{0, 1, std::size_t(n) + 1, 1000, (std::size_t(600) << 10) / sizeof(T) + 7};
    bool exact = true;
    for (int root = 0; root < n; ++root)
        for (const std::size_t count : counts)
            must_succeed("broadcast of " + std::to_string(count) + " elements from rank " + std::to_string(root), [&] {
                gradsync::broadcaster<T, transport, Algorithm> b(comm, count, root);
                for (int call = 1; call <= 2; ++call) {
                    std::vector<T> data = comm.rank() == root ? broadcast_data::root_data<T>(count, root, call)
                                                              : broadcast_data::before<T>(count, comm.rank());
                    b(std::span<T>(data));
                    exact = exact && broadcast_data::differs(data, broadcast_data::root_data<T>(count, root, call)).empty();
                }
            });
    return exact;
}

template <class Algorithm>
void check_broadcasts(transport& comm)
{
    CHECK(everywhere(broadcasts_exact<gradsync::half, Algorithm>(comm)));
    CHECK(everywhere(broadcasts_exact<gradsync::bfloat16, Algorithm>(comm)));
    CHECK(everywhere(broadcasts_exact<float, Algorithm>(comm)));
    CHECK(everywhere(broadcasts_exact<double, Algorithm>(comm)));
    CHECK(everywhere(broadcasts_exact<std::byte, Algorithm>(comm)));
}

} // namespace

TEST_CASE("mpi broadcast: every algorithm and element type copies the root's bits", "[broadcast]")
{
    transport comm = make_comm();
    check_broadcasts<gradsync::binomial_tree>(comm);
    check_broadcasts<gradsync::scatter_allgather>(comm);
    check_broadcasts<gradsync::automatic_broadcast>(comm);
}

TEST_CASE("mpi broadcast misuse: a bad or disagreeing root is refused on every rank", "[broadcast]")
{
    transport comm = make_comm();
    const int n = comm.size(), r = comm.rank();
    const auto attempt = [&](int root) {
        return [&comm, root](bool& untouched) {
            std::vector<std::byte> data = broadcast_data::before<std::byte>(100, comm.rank());
            const std::vector<std::byte> before = data;
            try {
                gradsync::broadcast(comm, std::span<std::byte>(data), root);
            } catch (...) {
                untouched = unchanged(data, before);
                throw;
            }
            untouched = unchanged(data, before);
        };
    };
    expect_everywhere(kind::usage, "out of range", attempt(n));
    if (n > 1)
        expect_everywhere(kind::mismatch, "the root", attempt(r == n - 1 ? 1 : 0));
}

// A trainer with a reducer per bucket, or a backend that keeps one per shape, holds many shared
// regions: each watches its peers' processes, and those watches are the process's, one per
// peer, so 2 000 reducers fit under a limit of 1 024 descriptors and all keep shared memory.
TEST_CASE("mpi shared memory: 2 000 reducers under ulimit -n 1024 keep shared memory, with descriptors for the peers "
          "alone",
          "[comm]")
{
    transport comm = make_comm();
    if (comm.size() == 1) {
        SUCCEED("one rank shares nothing");
        return;
    }
    const auto open_files = [] {
        std::size_t n = 0;
        for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd"))
            ++n;
        return n;
    };
    rlimit before{};
    REQUIRE(::getrlimit(RLIMIT_NOFILE, &before) == 0);
    rlimit lowered = before;
    lowered.rlim_cur = std::min<rlim_t>(before.rlim_cur, 1024);
    REQUIRE(::setrlimit(RLIMIT_NOFILE, &lowered) == 0);
    const std::size_t files = open_files();
    std::vector<std::unique_ptr<gradsync::reducer<float, transport, gradsync::sum, gradsync::automatic>>> reducers;
    std::size_t shared = 0, most = files;
    std::string failed;
    try {
        for (int k = 0; k < 2000; ++k) {
            reducers.push_back(
                std::make_unique<gradsync::reducer<float, transport, gradsync::sum, gradsync::automatic>>(comm, 16));
            shared += reducers.back()->plan().chosen() == gradsync::shared_memory::code;
            if (k % 100 == 99)
                most = std::max(most, open_files());
        }
        std::vector<float> x(16, float(comm.rank() + 1));
        (*reducers.back())(std::span<float>(x));
        CHECK(x == std::vector<float>(16, float(comm.size() * (comm.size() + 1) / 2)));
    } catch (const std::exception& e) {
        failed = e.what();
    }
    reducers.clear();
    ::setrlimit(RLIMIT_NOFILE, &before);
    INFO("rank " << comm.rank() << ": " << failed);
    CHECK(failed.empty());
    CHECK(shared == 2000);
    // One watch per peer process, and rank 0's position board: no descriptor per reducer.
    CHECK(most <= files + std::size_t(comm.size()) + 1);
}

TEST_CASE("mpi communicator: non-overtaking order, zero-byte messages, size mismatches", "[comm]")
{
    transport comm = make_comm();
    const int n = comm.size(), r = comm.rank();
    if (n == 1) {
        SUCCEED("needs two ranks");
        return;
    }
    // Rank 0 and rank 1 talk; the others only join the collectives.
    std::string what;
    bool ok = true;
    SECTION("messages on one tag arrive in posting order, zero-byte ones included")
    {
        // Equal sizes, distinct contents: only the order can make them land right. A zero-byte
        // message sits in the middle of the stream; eager-sized and larger ones alternate.
        constexpr int count = 12;
        auto size_of = [](int i) { return i == 5 ? std::size_t(0) : (i % 2 ? std::size_t(64) : std::size_t(100000)); };
        auto byte_of = [](int i, std::size_t j) { return std::byte(ref::key(std::uint64_t(i), 1, j)); };
        std::vector<std::vector<std::byte>> buf(count);
        for (int i = 0; i < count; ++i) {
            buf[std::size_t(i)].resize(size_of(i));
            for (std::size_t j = 0; j < size_of(i); ++j)
                buf[std::size_t(i)][j] = r == 0 ? byte_of(i, j) : std::byte(0);
        }
        const kind k = classify(
            [&] {
                std::vector<transport::request> q;
                if (r == 0)
                    for (int i = 0; i < count; ++i)
                        q.push_back(comm.isend(std::span<const std::byte>(buf[std::size_t(i)]), 1, 5));
                else if (r == 1)
                    for (int i = 0; i < count; ++i)
                        q.push_back(comm.irecv(std::span<std::byte>(buf[std::size_t(i)]), 0, 5));
                for (auto it = q.rbegin(); it != q.rend(); ++it) // completion order is irrelevant
                    comm.wait(*it);
            },
            what);
        ok = k == kind::ok;
        if (r == 1)
            for (int i = 0; i < count; ++i)
                for (std::size_t j = 0; j < size_of(i); ++j)
                    ok = ok && buf[std::size_t(i)][j] == byte_of(i, j);
        INFO("rank " << r << ": " << kind_name(k) << " " << what);
        CHECK(ok);
    }
    SECTION("a receive longer or shorter than the send is a communication_error")
    {
        // A communicator of its own per size, with a deadline: Gloo never delivers a message
        // of another size, so its receive ends at the deadline (and takes the context down).
        for (std::size_t recv_size : {std::size_t(4), std::size_t(16)}) {
            transport comm = make_comm(MPI_COMM_WORLD, {.deadline = std::chrono::seconds(1)});
            std::vector<std::byte> buf(r == 0 ? 8 : recv_size, std::byte(1));
            kind k = kind::ok;
            if (r == 0)
                k = classify([&] { auto q = comm.isend(std::span<const std::byte>(buf), 1, 6); comm.wait(q); }, what);
            if (r == 1)
                k = classify([&] { auto q = comm.irecv(std::span<std::byte>(buf), 0, 6); comm.wait(q); }, what);
            INFO("rank " << r << ", receive of " << recv_size << " bytes for 8 sent: " << kind_name(k) << " " << what);
            if (r == 1)
                CHECK(kind_name(k) == std::string(kind_name(kind::communication)));
            else
                CHECK((k == kind::ok || k == kind::communication)); // the sender may or may not be told
            ok = ok && (r == 1 ? k == kind::communication : true);
        }
    }
    CHECK(everywhere(ok));
}

TEST_CASE("mpi communicator: a peer out of range is an error, and a usage_error", "[.peers]")
{
    // core/error.hpp files a peer out of range under usage_error (local_group throws that). MPI
    // itself reads -2 as MPI_PROC_NULL, a send that silently goes nowhere, -1 as
    // MPI_ANY_SOURCE, and reports other bad ranks as MPI_ERR_RANK. Receives from -1 are left
    // out: if accepted they would wait for any message.
    transport comm = make_comm();
    const int n = comm.size(), r = comm.rank();
    std::vector<std::byte> buf(8, std::byte(1));
    bool ok = true;
    auto probe = [&](bool send, int peer) {
        std::string what;
        const kind k = classify(
            [&] {
                auto q = send ? comm.isend(std::span<const std::byte>(buf), peer, 7)
                              : comm.irecv(std::span<std::byte>(buf), peer, 7);
                comm.wait(q);
            },
            what);
        INFO("rank " << r << ": " << (send ? "isend to" : "irecv from") << " peer " << peer << ": " << kind_name(k)
                     << " " << what);
        CHECK(k != kind::ok); // never silently accepted
        CHECK(kind_name(k) == std::string(kind_name(kind::usage)));
        ok = ok && k == kind::usage;
    };
    for (int peer : {n, n + 5, -1, -2, -7})
        probe(true, peer);
    for (int peer : {n, -2, -7})
        probe(false, peer);
    CHECK(everywhere(ok));
}

TEST_CASE("mpi: a message of 2^31 + 13 bytes from rank 0 to rank 1 arrives intact", "[.large_message]")
{
    using gradsync_test::large_buffer; // large_message.hpp
    using gradsync_test::large_message_byte;
    using gradsync_test::large_message_bytes;
    using gradsync_test::large_message_samples;
    transport comm = make_comm();
    if (comm.size() != 2) {
        SUCCEED("runs with exactly two ranks");
        return;
    }
    const std::size_t n = large_message_bytes;
    const std::vector<std::size_t> samples = large_message_samples();
    large_buffer buffer;
    for (std::size_t p : samples)
        buffer[p] = comm.rank() == 0 ? large_message_byte(p) : ~large_message_byte(p);
    std::string what;
    const kind k = classify(
        [&] {
            auto q = comm.rank() == 0 ? comm.isend(std::span<const std::byte>(buffer.data(), n), 1, 11)
                                      : comm.irecv(std::span<std::byte>(buffer.data(), n), 0, 11);
            comm.wait(q);
        },
        what);
    std::size_t bad = 0, first_bad = n;
    if (comm.rank() == 1)
        for (std::size_t p : samples)
            if (buffer[p] != large_message_byte(p) && bad++ == 0)
                first_bad = p;
    const bool all = everywhere(k == kind::ok && bad == 0);
    INFO("rank " << comm.rank() << ": " << kind_name(k) << " " << what << "; first bad sample at " << first_bad);
    CHECK(kind_name(k) == std::string(kind_name(kind::ok)));
    CHECK(bad == 0);
    CHECK(all);
}

// [deadline]: calls that can never complete. Each case runs on a duplicate of
// MPI_COMM_WORLD of its own, whose stale messages (the calls that failed) reach no later
// case, and with a deadline on the communicator; every rank must end in a gradsync::error
// within it (the CTest timeout fails a hang), and no rank may return data.
namespace {

constexpr auto case_deadline = std::chrono::seconds(2);

// Never freed: the failed calls leave sends that no receive will match, and MPICH hands a
// freed communicator's context to the next duplicate, where they would meet a later case.
struct world_copy {
    MPI_Comm comm = MPI_COMM_NULL;
    world_copy() { MPI_Comm_dup(MPI_COMM_WORLD, &comm); }
};

// A duplicate of the world with the case's deadline, and where this rank is in it.
struct deadline_world {
    world_copy copy;
    transport comm{make_comm(copy.comm, {.deadline = case_deadline})};
    int rank = comm.rank(), last = comm.size() - 1;
};

using reducer_t = gradsync::reducer<float, transport, gradsync::sum, gradsync::ring>;

struct ending {
    kind k = kind::ok;
    std::string what;
    double seconds = 0;
};

template <class F>
ending run_timed(F&& f)
{
    ending e;
    const auto start = std::chrono::steady_clock::now();
    e.k = classify(std::forward<F>(f), e.what);
    e.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return e;
}

// a(x) then b(y), or b(y) then a(x) where b_first, timed; then every rank waits for the others,
// so that none leaves (closing its connections) before all have ended.
template <class A, class B>
ending called_in_order(bool b_first, A& a, B& b, std::vector<float>& x, std::vector<float>& y)
{
    const ending e = run_timed([&] {
        if (b_first) {
            b(std::span<float>(y));
            a(std::span<float>(x));
        } else {
            a(std::span<float>(x));
            b(std::span<float>(y));
        }
    });
    MPI_Barrier(MPI_COMM_WORLD);
    return e;
}

// Whether e is a wait that reached its deadline, which it then lasted at least. Over Gloo a
// rank whose wait times out closes its connections, so a peer may end first, on the closed
// connection, at whatever time that comes.
bool reached_deadline(const ending& e)
{
    const bool own = e.what.find("deadline") != std::string::npos &&
        e.seconds >= std::chrono::duration<double>(case_deadline).count();
#if defined(GRADSYNC_TEST_TRANSPORT_GLOO)
    return own || e.what.find("by peer") != std::string::npos;
#else
    return own;
#endif
}

} // namespace

TEST_CASE("mpi order: reducers called in different orders end in an error on every rank, never in wrong data",
          "[deadline]")
{
    if (world_size() == 1) {
        SUCCEED("one rank calls in one order");
        return;
    }
    deadline_world world;
    const int r = world.rank;
    reducer_t a(world.comm, 64), b(world.comm, 64);
    std::vector<float> x(64, float(r + 1)), y(64, float(10 * (r + 1)));
    // Odd ranks call b first: pairing a's call with b's would add y into x.
    const ending e = called_in_order(r % 2, a, b, x, y);
    INFO("rank " << r << " after " << e.seconds << " s: " << kind_name(e.k) << ": " << e.what);
    CHECK(e.k != kind::ok);
    CHECK(e.k != kind::other);
    const bool named = e.k == kind::mismatch && e.what.find("reducer #") != std::string::npos &&
        e.what.find("same order") != std::string::npos;
    CHECK((named || reached_deadline(e)));
#if !defined(GRADSYNC_TEST_TRANSPORT_GLOO) // Gloo cannot look at a peer's next message
    CHECK(!everywhere(!named)); // some rank saw the other reducer's message and said so
#endif
    CHECK(everywhere(e.k != kind::ok));
}

// One host: a reducer through shared memory (automatic) and one by messages (ring), called in
// different orders, with no deadline: the ranks in the shared one see the odd rank's position
// on the host's board, and the odd rank's receive sees its peer's, so every rank names both
// reducers (docs/semantics.md, "Call order"); a wait for ever would fail by the CTest timeout.
TEST_CASE("mpi order: shared memory and messages mixed up end in a mismatch_error on every rank, with no deadline",
          "[deadline]")
{
    if (world_size() == 1) {
        SUCCEED("one rank calls in one order");
        return;
    }
    world_copy copy;
    transport comm = make_comm(copy.comm, {});
    const int r = comm.rank(), last = comm.size() - 1;
    gradsync::reducer<float, transport, gradsync::sum, gradsync::automatic> a(comm, 1000);
    reducer_t b(comm, 1000);
    if (a.plan().chosen() != gradsync::shared_memory::code) {
        SUCCEED("the ranks do not share a host");
        return;
    }
    std::vector<float> x(1000, float(r + 1)), y(1000, float(10 * (r + 1)));
    const ending e = called_in_order(r == last, a, b, x, y);
    INFO("rank " << r << " after " << e.seconds << " s: " << kind_name(e.k) << ": " << e.what);
    CHECK(e.k == kind::mismatch);
    CHECK_THAT(e.what, Catch::Matchers::Contains("reducer #" + std::to_string(a.identity())) &&
                           Catch::Matchers::Contains("reducer #" + std::to_string(b.identity())) &&
                           Catch::Matchers::Contains("same order"));
}

// Rank 0 fails between hierarchical's node stage halves, after its node peer may have
// started on its slot: the peer finds it gone at once, instead of waiting out the deadline.
TEST_CASE("mpi deadline: hierarchical's rank that fails between its node stage's halves ends its node peer's call at "
          "once",
          "[deadline]")
{
    if (world_size() != 4) {
        SUCCEED("the case needs 2 nodes of 2 ranks");
        return;
    }
    deadline_world world;
    std::atomic<bool> armed{false};
    gradsync_test::failing_sends<transport> comm(world.comm, armed);
    gradsync::reducer<float, gradsync_test::failing_sends<transport>, gradsync::sum, gradsync::hierarchical> reduce(
        comm, 65536, gradsync::hierarchical{.ranks_per_node = 2});
    if (!reduce.plan().node_shares_memory()) {
        SUCCEED("the node's ranks do not share memory");
        return;
    }
    std::vector<float> data(65536, 1.0f);
    reduce(std::span<float>(data));
    armed = true;
    const ending e = run_timed([&] { reduce(std::span<float>(data)); });
    MPI_Barrier(MPI_COMM_WORLD);
    INFO("rank " << world.rank << " after " << e.seconds << " s: " << kind_name(e.k) << ": " << e.what);
    if (world.rank == 0) {
        CHECK(e.k == kind::communication);
        CHECK_THAT(e.what, Catch::Matchers::Contains("planted failure"));
    } else if (world.rank == 1) {
        CHECK(e.k == kind::other_gradsync);
        CHECK_THAT(e.what, Catch::Matchers::Contains("rank 0: that rank left the call with an error"));
    } else {
        CHECK(e.k != kind::ok);
    }
}

TEST_CASE("mpi deadline: a rank that skips a call leaves the others a deadline_error", "[deadline]")
{
    if (world_size() == 1) {
        SUCCEED("one rank waits for no one");
        return;
    }
    deadline_world world;
    const int r = world.rank, last = world.last;
    reducer_t a(world.comm, 64);
    std::vector<float> x(64, 1.0f);
    const ending e = run_timed([&] {
        a(std::span<float>(x));
        if (r != last)
            a(std::span<float>(x));
    });
    MPI_Barrier(MPI_COMM_WORLD); // no rank leaves, closing its connections, before all have ended
    INFO("rank " << r << " after " << e.seconds << " s: " << kind_name(e.k) << ": " << e.what);
    if (r == last) {
        CHECK(e.k == kind::ok);
    } else {
        CHECK(e.k == kind::communication);
        CHECK_THAT(e.what, Catch::Matchers::Contains("reducer #") && Catch::Matchers::Contains("call 2") &&
                               Catch::Matchers::Contains("rank "));
        CHECK(reached_deadline(e));
    }
}

TEST_CASE("mpi deadline: a rank whose buffer has the wrong size leaves the others a deadline_error", "[deadline]")
{
    if (world_size() == 1) {
        SUCCEED("one rank waits for no one");
        return;
    }
    deadline_world world;
    const int r = world.rank, last = world.last;
    reducer_t a(world.comm, 100);
    std::vector<float> x(r == last ? 99 : 100, 1.0f);
    const std::vector<float> before = x;
    const ending e = run_timed([&] { a(std::span<float>(x)); });
    MPI_Barrier(MPI_COMM_WORLD); // no rank leaves, closing its connections, before all have ended
    INFO("rank " << r << " after " << e.seconds << " s: " << kind_name(e.k) << ": " << e.what);
    if (r == last) {
        CHECK(e.k == kind::usage);
        CHECK_THAT(e.what, Catch::Matchers::Contains("99"));
        CHECK(unchanged(x, before));
    } else {
        CHECK(e.k == kind::communication);
        CHECK(reached_deadline(e));
    }
}

int main(int argc, char** argv)
{
    // Alive past MPI_Finalize (the environment's destructor for Boost.MPI), as in most MPI
    // programs: its destructor must leave the finalized MPI alone.
#if defined(GRADSYNC_TEST_TRANSPORT_BOOST_MPI)
    std::optional<transport> outliving;
    boost::mpi::environment env(argc, argv, boost::mpi::threading::funneled);
    outliving.emplace(boost::mpi::communicator());
#elif defined(GRADSYNC_TEST_TRANSPORT_MPI)
    std::optional<transport> outliving;
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    outliving.emplace(MPI_COMM_WORLD);
#else
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    char dir[256] = {};
    if (world_rank() == 0) {
        const std::string pattern = (std::filesystem::temp_directory_path() / "gradsync-gloo-XXXXXX").string();
        std::snprintf(dir, sizeof dir, "%s", pattern.c_str());
        if (!::mkdtemp(dir)) {
            std::perror("mkdtemp");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    gloo_store_dir = dir;
#endif
    const int rank = world_rank();
    // Ranks other than 0 report into a file that is shown only if that rank failed.
    std::filesystem::path log;
    if (rank != 0)
        log = std::filesystem::temp_directory_path() /
            ("gradsync-test-mpi-" + std::to_string(::getpid()) + "-rank" + std::to_string(rank) + ".log");
    const int failed = gradsync_test::run_catch(argc, argv, log.empty() ? nullptr : log.c_str());
    conformance::suite_comm.reset();
    if (!log.empty()) {
        if (failed != 0) {
            std::ifstream in(log);
            std::ostringstream text;
            text << in.rdbuf();
            std::cerr << "==== rank " << rank << " ====\n" << text.str() << std::flush;
        }
        std::error_code ignored;
        std::filesystem::remove(log, ignored);
    }
    int worst = 0;
    MPI_Allreduce(&failed, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
#if defined(GRADSYNC_TEST_TRANSPORT_GLOO)
    if (rank == 0) {
        std::error_code ignored;
        std::filesystem::remove_all(gloo_store_dir, ignored);
    }
#endif
#if !defined(GRADSYNC_TEST_TRANSPORT_BOOST_MPI)
    MPI_Finalize();
#endif
    return worst == 0 ? 0 : 1;
}
