// gloo_communicator without MPI: what needs processes that die, stall or share a context.
// Each case forks its other ranks before any Gloo object exists (a rank is a process, as in a
// real job); they meet through a file store in a scratch directory. A child reports by its
// exit status and, on failure, a line on stderr; the parent, rank 0, checks its own outcome
// with Catch and every child's status. A child that outlives the case's time is killed and
// fails it: nothing here can hang.
#include <catch2/catch.hpp>

#include <gloo/allreduce_ring.h>
#include <gloo/rendezvous/file_store.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gradsync/comm/gloo/gloo.hpp>
#include <gradsync/comm/gloo/rendezvous.hpp>
#include <gradsync/gradsync.hpp>

#include "reference.hpp"
#include "scratch_dir.hpp"
#include "summed_exactly.hpp"
#include "thrown.hpp"

// Under ThreadSanitizer: libgloo is not instrumented, so the hand-off of a buffer from Gloo's
// network thread back to its owner (reference counts inside libgloo) is invisible to it, and
// every buffer Gloo touched would be reported when destroyed. Races between gradsync's own
// threads are still reported.
extern "C" const char* __tsan_default_suppressions() { return "race:libgloo.so\n"; }

namespace {

using std::chrono::milliseconds;
using gradsync::gloo_communicator;

// The outcome of one rank's body: empty when it did what the case expects.
using outcome = std::string;
// Joins the case's context.
using connector = std::function<std::shared_ptr<gloo::Context>(gradsync::gloo_connect_options)>;

// Runs body(rank, connect) on ranks 0..n-1, rank 0 here and the others in child processes.
// Returns rank 0's outcome, then the children's ("" each when it exited 0).
std::vector<outcome> run_ranks(int n, const std::function<outcome(int, const connector&)>& body,
                               std::chrono::seconds limit = std::chrono::seconds(60))
{
    gradsync_test::scratch_dir dir("gradsync_gloo_");
    const std::string store_path = dir.path().string();
    std::vector<pid_t> children;
    auto make_connect = [&](int rank) -> connector {
        return [store_path, rank, n](gradsync::gloo_connect_options o) {
            gloo::rendezvous::FileStore store(store_path);
            return gradsync::gloo_connect(store, rank, n, o);
        };
    };
    auto guarded = [&](int rank) {
        try {
            return body(rank, make_connect(rank));
        } catch (const std::exception& e) {
            return outcome("unexpected exception: ") + e.what();
        }
    };
    for (int r = 1; r < n; ++r) {
        const pid_t pid = ::fork();
        if (pid == 0) {
            const outcome o = guarded(r);
            if (!o.empty())
                std::fprintf(stderr, "rank %d: %s\n", r, o.c_str());
            std::fflush(stderr);
            ::_exit(o.empty() ? 0 : 1);
        }
        children.push_back(pid);
    }
    std::vector<outcome> out{guarded(0)};
    const auto until = std::chrono::steady_clock::now() + limit;
    for (std::size_t i = 0; i < children.size(); ++i) {
        int status = 0;
        pid_t done = 0;
        while ((done = ::waitpid(children[i], &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(milliseconds(10));
        const std::string rank = "rank " + std::to_string(i + 1);
        if (done == 0) {
            ::kill(children[i], SIGKILL);
            ::waitpid(children[i], &status, 0);
            out.push_back(rank + " was still running after the case's time and was killed");
        } else if (WIFSIGNALED(status)) {
            out.push_back(rank + " was killed by signal " + std::to_string(WTERMSIG(status)));
        } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            out.push_back(rank + " failed (see its line on stderr)");
        } else {
            out.push_back("");
        }
    }
    return out;
}

gradsync::gloo_connect_options timeout_of(milliseconds t)
{
    gradsync::gloo_connect_options o;
    o.timeout = t;
    return o;
}

// gloo_options for a case run with eager messages of at most `eager` bytes (0: none).
gradsync::gloo_options eager_options(std::size_t eager, std::size_t depth = 4)
{
    return {.eager_bytes = eager, .eager_depth = depth};
}

using gradsync_test::thrown;

// Returns once every rank has connected: a rank that closes a pair earlier would fail a
// peer's gloo_connect instead of the call under test.
void connected(gloo_communicator& comm)
{
    std::vector<float> one(1, 1.0f);
    gradsync::allreduce(comm, std::span<float>(one), gradsync::sum{}, gradsync::ring{}, std::span<const std::size_t>());
}

bool starts(const std::string& s, const std::string& head) { return s.rfind(head, 0) == 0; }

// What is wrong with this thread's SIGPIPE after it posted and saw a peer fail: it must be
// blocked (gloo/detail/sigpipe.hpp) and not pending, so that unblocking it later cannot end the
// process for a write that already failed.
outcome sigpipe_state()
{
    sigset_t mask, pending;
    if (::pthread_sigmask(SIG_BLOCK, nullptr, &mask) != 0 || ::sigpending(&pending) != 0)
        return "cannot read the signal mask";
    if (sigismember(&mask, SIGPIPE) != 1)
        return "SIGPIPE is not blocked on the thread that posted";
    if (sigismember(&pending, SIGPIPE) == 1)
        return "a SIGPIPE is still pending after the failure was reported";
    return "";
}

void check_all(const std::vector<outcome>& out)
{
    for (std::size_t r = 0; r < out.size(); ++r) {
        INFO("rank " << r);
        CHECK(out[r] == "");
    }
}

} // namespace

TEST_CASE("a rank that dies leaves the others a communication_error, long before the timeout", "[gloo]")
{
    // Three ranks; rank 2 exits once connected, while ranks 0 and 1 run a ring allreduce that
    // needs it. With a minute of timeout, the dead socket must end their waits, not the clock.
    // With eager messages the ring's blocks go eagerly, and the survivors' destructors must
    // not wait for the dead rank either.
    const std::size_t eager = GENERATE(std::size_t(0), std::size_t(256) << 10);
    const auto out = run_ranks(3, [eager](int rank, const connector& connect) -> outcome {
        gloo_communicator comm(connect(timeout_of(milliseconds(60000))), eager_options(eager));
        connected(comm);
        if (rank == 2)
            ::_exit(0);
        std::vector<float> data(100000, 1.0f);
        const auto start = std::chrono::steady_clock::now();
        const std::string e = thrown([&] {
            gradsync::allreduce(comm, std::span<float>(data), gradsync::sum{}, gradsync::ring{},
                                std::span<const std::size_t>());
        });
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (!starts(e, "communication_error: "))
            return "expected a communication_error, got \"" + e + "\" after " + std::to_string(s) + " s";
        return sigpipe_state();
    });
    check_all(out);
}

TEST_CASE("a send Gloo is writing when its receiver dies ends in a communication_error, not at the deadline",
          "[gloo]")
{
    // Gloo gives a failed pair's error to its pending receives and to the sends still waiting
    // for their receivers, but not to a send it has started writing. Rank 1 announces a
    // 64 MiB receive, tells rank 0 its pid and stops itself: rank 0's send fills the socket
    // and stays queued in Gloo. Rank 0, its parent, sees it stopped and kills it.
    const auto out = run_ranks(2, [](int rank, const connector& connect) -> outcome {
        gloo_communicator comm(connect(timeout_of(milliseconds(60000))));
        connected(comm);
        std::vector<std::byte> big(std::size_t(64) << 20);
        pid_t pid = ::getpid();
        const auto pid_bytes = std::as_writable_bytes(std::span(&pid, 1));
        if (rank == 1) {
            auto q = comm.irecv(std::span<std::byte>(big), 0, 2);
            auto s = comm.isend(pid_bytes, 0, 1);
            comm.wait(s);
            ::raise(SIGSTOP);
            return "rank 1 ran on after it stopped itself";
        }
        auto q = comm.irecv(pid_bytes, 1, 1);
        comm.wait(q);
        auto s = comm.isend(std::span<const std::byte>(big), 1, 2);
        siginfo_t info{};
        if (::waitid(P_PID, id_t(pid), &info, WSTOPPED | WNOWAIT) != 0)
            return "rank 1 (pid " + std::to_string(pid) + ") did not stop";
        ::kill(pid, SIGKILL);
        const std::string e = thrown([&] { comm.wait(s); });
        return starts(e, "communication_error: ") ? "" : "expected a communication_error, got \"" + e + "\"";
    });
    CHECK(out[0] == "");
    CHECK(out[1] == "rank 1 was killed by signal " + std::to_string(SIGKILL));
}

TEST_CASE("release() from another thread ends a wait in aborted_error, and the peer's in an error", "[gloo]")
{
    const std::size_t eager = GENERATE(std::size_t(0), std::size_t(1024));
    const auto out = run_ranks(2, [eager](int rank, const connector& connect) -> outcome {
        gloo_communicator comm(connect(timeout_of(milliseconds(30000))), eager_options(eager));
        connected(comm);
        std::vector<std::byte> buf(64);
        if (rank == 1) { // waits for a message rank 0 never sends; rank 0's release closes the pair
            const std::string e = thrown([&] {
                auto q = comm.irecv(std::span<std::byte>(buf), 0, 3);
                comm.wait(q);
            });
            return starts(e, "communication_error: ") ? "" : "rank 1 expected a communication_error, got \"" + e + "\"";
        }
        const auto start = std::chrono::steady_clock::now();
        std::thread releaser([&] {
            std::this_thread::sleep_for(milliseconds(200));
            comm.release();
        });
        const std::string e = thrown([&] {
            auto q = comm.irecv(std::span<std::byte>(buf), 1, 4);
            comm.wait(q);
        });
        releaser.join();
        const auto waited = std::chrono::steady_clock::now() - start;
        if (!starts(e, "aborted_error: ") || e.find("released") == std::string::npos)
            return "expected aborted_error naming the release, got \"" + e + "\"";
        if (waited < milliseconds(200))
            return "the wait ended before the release";
        const std::string later = thrown([&] { auto q = comm.isend(std::span<const std::byte>(buf), 1, 5); });
        return starts(later, "aborted_error: ") ? "" : "a post after release() gave \"" + later + "\"";
    });
    check_all(out);
}

TEST_CASE("a request dropped before its wait fails the communicator and its peer, and nothing lands later", "[gloo]")
{
    const std::size_t eager = GENERATE(std::size_t(0), std::size_t(1024));
    const auto out = run_ranks(2, [eager](int rank, const connector& connect) -> outcome {
        gloo_communicator comm(connect(timeout_of(milliseconds(30000))), eager_options(eager));
        connected(comm);
        std::vector<std::byte> buf(64, std::byte(7));
        if (rank == 0) {
            std::vector<std::byte> other(64);
            auto earlier = comm.irecv(std::span<std::byte>(other), 1, 8); // rank 1 never sends it
            { auto dropped = comm.irecv(std::span<std::byte>(buf), 1, 9); }
            const std::string later = thrown([&] { auto q = comm.isend(std::span<const std::byte>(buf), 1, 10); });
            if (!starts(later, "communication_error: ") || later.find("dropped") == std::string::npos)
                return "a post after a dropped request gave \"" + later + "\"";
            // Gloo tells a wait on a pair closed by this side nothing; it must not last the
            // 30 s of timeout.
            const std::string wait = thrown([&] { comm.wait(earlier); });
            if (!starts(wait, "communication_error: ") || wait.find("closed the connection") == std::string::npos ||
                wait.find("dropped") == std::string::npos)
                return "a wait on the closed pair gave \"" + wait + "\"";
            return "";
        }
        // Rank 1 sends what the dropped receive asked for, then waits on a receive: both must
        // end in an error, since rank 0 closed the pair.
        const std::string e = thrown([&] {
            auto s = comm.isend(std::span<const std::byte>(buf), 0, 9);
            auto q = comm.irecv(std::span<std::byte>(buf), 0, 11);
            comm.wait(q);
            comm.wait(s);
        });
        return starts(e, "communication_error: ") ? "" : "rank 1 expected a communication_error, got \"" + e + "\"";
    });
    check_all(out);
}

TEST_CASE("two communicators on one context, with different slot prefixes, never take each other's messages",
          "[gloo]")
{
    const auto out = run_ranks(2, [](int rank, const connector& connect) -> outcome {
        auto context = connect(timeout_of(milliseconds(30000)));
        gloo_communicator a(context, {.slot_prefix = 0x67}), b(context, {.slot_prefix = 0x68});
        std::vector<std::byte> x(1000), y(1000);
        for (std::size_t i = 0; i < x.size(); ++i) {
            x[i] = rank == 0 ? std::byte(ref::key(1, 0, i)) : std::byte(0);
            y[i] = rank == 0 ? std::byte(ref::key(2, 0, i)) : std::byte(0);
        }
        if (rank == 0) { // same tag, same size: only the prefix tells them apart
            auto sa = a.isend(std::span<const std::byte>(x), 1, 1);
            auto sb = b.isend(std::span<const std::byte>(y), 1, 1);
            a.wait(sa);
            b.wait(sb);
            return "";
        }
        auto rb = b.irecv(std::span<std::byte>(y), 0, 1); // posted first, must still get b's
        auto ra = a.irecv(std::span<std::byte>(x), 0, 1);
        b.wait(rb);
        a.wait(ra);
        for (std::size_t i = 0; i < x.size(); ++i)
            if (x[i] != std::byte(ref::key(1, 0, i)) || y[i] != std::byte(ref::key(2, 0, i)))
                return "byte " + std::to_string(i) + " came through the other communicator";
        return "";
    });
    check_all(out);
}

TEST_CASE("messages whose receives are posted late, per tag and waited in reverse, arrive whole", "[gloo]")
{
    // Rank 0 posts all its sends at once; rank 1 posts its receives only later, tag by tag,
    // and waits in the reverse order. Per pair and tag, messages match in posting order.
    // With eager messages of up to 4 KiB and 2 boxes per peer, four of them go eagerly: more
    // than the boxes, so rank 0's later eager sends wait for rank 1 to take earlier ones.
    const std::size_t eager = GENERATE(std::size_t(0), std::size_t(4096));
    const auto out = run_ranks(2, [eager](int rank, const connector& connect) -> outcome {
        gloo_communicator comm(connect(timeout_of(milliseconds(30000))), eager_options(eager, 2));
        struct message {
            int tag;
            std::size_t bytes;
        };
        const std::vector<message> sent{{1, 0}, {2, 100}, {1, 5000}, {3, 65536}, {2, 65537}, {1, 1}, {3, 7}};
        std::vector<std::vector<std::byte>> bufs;
        for (std::size_t m = 0; m < sent.size(); ++m) {
            bufs.emplace_back(sent[m].bytes);
            for (std::size_t i = 0; i < sent[m].bytes; ++i)
                bufs[m][i] = rank == 0 ? std::byte(ref::key(int(m), 0, i)) : std::byte(0);
        }
        std::vector<gloo_communicator::request> q;
        if (rank == 0) {
            for (std::size_t m = 0; m < sent.size(); ++m)
                q.push_back(comm.isend(std::span<const std::byte>(bufs[m]), 1, sent[m].tag));
            for (auto& r : q)
                comm.wait(r);
            return "";
        }
        std::this_thread::sleep_for(milliseconds(300));
        for (int tag : {3, 2, 1})
            for (std::size_t m = 0; m < sent.size(); ++m)
                if (sent[m].tag == tag)
                    q.push_back(comm.irecv(std::span<std::byte>(bufs[m]), 0, tag));
        for (auto r = q.rbegin(); r != q.rend(); ++r)
            comm.wait(*r);
        for (std::size_t m = 0; m < sent.size(); ++m)
            for (std::size_t i = 0; i < sent[m].bytes; ++i)
                if (bufs[m][i] != std::byte(ref::key(int(m), 0, i)))
                    return "message " + std::to_string(m) + " (tag " + std::to_string(sent[m].tag) + ", " +
                        std::to_string(sent[m].bytes) + " bytes): byte " + std::to_string(i) + " is wrong";
        return "";
    });
    check_all(out);
}

TEST_CASE("a reducer's later calls reuse the unbound buffers of its first", "[gloo]")
{
    // 300000 elements: several pipeline segments per step; 1000: one small message per step.
    for (std::size_t count : {std::size_t(300000), std::size_t(1000)}) {
        const auto out = run_ranks(2, [count](int rank, const connector& connect) -> outcome {
            gloo_communicator comm(connect(timeout_of(milliseconds(30000))));
            gradsync::reducer<float, gloo_communicator, gradsync::sum, gradsync::ring> reduce(comm, count);
            std::vector<float> data(count);
            std::size_t after_first = 0;
            for (int call = 0; call < 5; ++call) {
                for (std::size_t i = 0; i < count; ++i)
                    data[i] = float((i + std::size_t(call)) % 97 + std::size_t(rank));
                reduce(std::span<float>(data));
                for (std::size_t i = 0; i < count; ++i) {
                    const float want = float(2 * ((i + std::size_t(call)) % 97) + 1);
                    if (data[i] != want)
                        return "call " + std::to_string(call) + ": element " + std::to_string(i) + " is " +
                            std::to_string(data[i]) + ", not " + std::to_string(want);
                }
                if (call == 0)
                    after_first = comm.pooled();
                else if (comm.pooled() != after_first)
                    return "call " + std::to_string(call) + " left " + std::to_string(comm.pooled()) +
                        " pooled buffers, the first " + std::to_string(after_first);
            }
            return after_first > 0 ? "" : "nothing was pooled";
        });
        check_all(out);
    }
}

// The process's connected sockets whose send buffer the kernel reports as `bytes`, or
// between `bytes` and `most`.
int sockets_with_send_buffer(int bytes, int most = 0)
{
    int n = 0;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
        const int fd = std::stoi(entry.path().filename().string());
        struct stat st {};
        sockaddr_storage peer{};
        socklen_t peer_len = sizeof peer;
        int value = 0;
        socklen_t len = sizeof value;
        if (::fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) &&
            ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) == 0 &&
            ::getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &value, &len) == 0 && value >= bytes && value <= std::max(bytes, most))
            ++n;
    }
    return n;
}

using gradsync_test::summed_exactly;

TEST_CASE("send_buffer_bytes sets the send buffer of the socket to every peer, and the reducer still agrees",
          "[gloo]")
{
    const auto out = run_ranks(3, [](int rank, const connector& connect) -> outcome {
        const std::size_t bytes = 96 << 10;
        const int before = sockets_with_send_buffer(int(2 * bytes)); // Linux doubles SO_SNDBUF
        auto o = timeout_of(milliseconds(30000));
        o.send_buffer_bytes = bytes;
        gloo_communicator comm(connect(o));
        const int after = sockets_with_send_buffer(int(2 * bytes));
        if (after - before != 2)
            return std::to_string(after - before) + " sockets got the send buffer, not 2";
        return summed_exactly(comm, rank, 3, 300000); // several segments of every pipeline step
    });
    check_all(out);
}

// The threads of this process, by id, from the kernel's list.
std::vector<pid_t> threads_of_process()
{
    std::vector<pid_t> ids;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task"))
        ids.push_back(pid_t(std::stoi(entry.path().filename().string())));
    std::sort(ids.begin(), ids.end());
    return ids;
}

TEST_CASE("network_thread_nice lowers the priority of the device's network thread, not the caller's, and the "
          "reducer still agrees",
          "[gloo]")
{
    const auto out = run_ranks(3, [](int rank, const connector& connect) -> outcome {
        const int own = ::getpriority(PRIO_PROCESS, 0);
        const std::vector<pid_t> before = threads_of_process();
        auto o = timeout_of(milliseconds(30000));
        o.network_thread_nice = 7;
        gloo_communicator comm(connect(o));
        std::vector<pid_t> started;
        const std::vector<pid_t> after = threads_of_process();
        std::set_difference(after.begin(), after.end(), before.begin(), before.end(), std::back_inserter(started));
        if (::getpriority(PRIO_PROCESS, 0) != own)
            return "the calling thread's nice value changed from " + std::to_string(own);
        const int lowest = std::min(19, own + 7);
        int lowered = 0;
        for (pid_t id : started) // the device's network thread, and the communicator's watchdog
            lowered += ::getpriority(PRIO_PROCESS, id_t(id)) == lowest;
        if (lowest != own && lowered != 1) // at 19 already, nothing can be lowered
            return std::to_string(lowered) + " of the " + std::to_string(started.size()) +
                " new threads have the nice value " + std::to_string(lowest) + ", not 1";
        return summed_exactly(comm, rank, 3, 300000);
    });
    check_all(out);
}

// Gloo's classic algorithms size a socket's send buffer to their first message; on a shared
// context a small one leaves every later large message of the pair to crawl through it.
TEST_CASE("a classic Gloo algorithm shrinks its sockets' send buffers, and gloo_limit_send_buffers restores them",
          "[gloo]")
{
    const auto out = run_ranks(2, [](int rank, const connector& connect) -> outcome {
        const auto context = connect(timeout_of(milliseconds(30000)));
        gloo_communicator comm(context);
        connected(comm);
        const int small = 4096, held = 256 << 10;
        // Linux doubles the size asked for and adds a little.
        const int small_before = sockets_with_send_buffer(1, 4 * small);
        std::vector<float> ring_data(small / sizeof(float), float(rank));
        gloo::AllreduceRing<float>(context, {ring_data.data()}, int(ring_data.size())).run();
        if (ring_data[0] != 1.0f)
            return "gloo's ring summed to " + std::to_string(ring_data[0]);
        if (const int shrunk = sockets_with_send_buffer(1, 4 * small) - small_before; shrunk != 1)
            return std::to_string(shrunk) + " sockets were shrunk to the ring's message, not 1";
        const int held_before = sockets_with_send_buffer(2 * held);
        if (const int set = gradsync::gloo_limit_send_buffers(*context, held); set != 1)
            return "gloo_limit_send_buffers set " + std::to_string(set) + " sockets, not 1";
        if (const int restored = sockets_with_send_buffer(2 * held) - held_before; restored != 1)
            return std::to_string(restored) + " sockets hold the restored buffer, not 1";
        return summed_exactly(comm, rank, 2, std::size_t(1) << 20); // 4 MiB, through the restored buffer
    });
    check_all(out);
}

TEST_CASE("misuse is a usage_error naming what is wrong", "[gloo]")
{
    const auto out = run_ranks(1, [](int, const connector& connect) -> outcome {
        auto context = connect(timeout_of(milliseconds(30000)));
        std::string all;
        auto expect = [&](const std::string& what, const std::string& word, auto f) {
            const std::string e = thrown(f);
            if (!starts(e, "usage_error: ") || e.find(word) == std::string::npos)
                all += what + " gave \"" + e + "\"; ";
        };
        expect("a null context", "null", [] { gloo_communicator c(nullptr); });
        expect("eager messages without boxes", "eager_depth",
               [&] { gloo_communicator c(context, {.eager_bytes = 64, .eager_depth = 0}); });
        expect("eager messages above the largest", "eager_bytes",
               [&] { gloo_communicator c(context, {.eager_bytes = gloo_communicator::max_eager_bytes + 1}); });
        expect("a negative deadline", "deadline", [&] { gloo_communicator c(context, {.deadline = milliseconds(-1)}); });
        for (int prefix : {0, 1, 4, 8})
            expect("slot prefix " + std::to_string(prefix), "Gloo's own",
                   [&] { gloo_communicator c(context, {.slot_prefix = std::uint8_t(prefix)}); });
        gloo_communicator comm(context);
        std::vector<std::byte> buf(8);
        expect("a send to itself", "itself", [&] { auto q = comm.isend(std::span<const std::byte>(buf), 0, 1); });
        expect("a peer out of range", "out of range", [&] { auto q = comm.irecv(std::span<std::byte>(buf), 1, 1); });
        expect("a negative tag", "negative", [&] { auto q = comm.irecv(std::span<std::byte>(buf), 0, -3); });
        expect("rank out of range in gloo_connect", "rank", [&] {
            gloo::rendezvous::FileStore store(std::filesystem::temp_directory_path().string());
            gradsync::gloo_connect(store, 2, 2);
        });
        expect("a send buffer too large for a socket option", "INT_MAX", [&] {
            gloo::rendezvous::FileStore store(std::filesystem::temp_directory_path().string());
            gradsync::gloo_connect(store, 0, 2, {.send_buffer_bytes = std::size_t(1) << 31});
        });
        expect("a send buffer of 0 bytes", "send buffer", [&] { gradsync::gloo_limit_send_buffers(*context, 0); });
        for (int nice : {-1, 20})
            expect("network_thread_nice " + std::to_string(nice), "network_thread_nice", [&] {
                gloo::rendezvous::FileStore store(std::filesystem::temp_directory_path().string());
                gradsync::gloo_connect(store, 0, 2, {.network_thread_nice = nice});
            });
        return all;
    });
    check_all(out);
}

// Eager messages of one tag from rank 1 to rank 0, `sizes` bytes each (pattern key(m, 1, i)).
void send_eager(gloo_communicator& comm, int tag, const std::vector<std::size_t>& sizes)
{
    std::vector<std::vector<std::byte>> bufs;
    std::vector<gloo_communicator::request> q;
    for (std::size_t m = 0; m < sizes.size(); ++m) {
        bufs.emplace_back(sizes[m]);
        for (std::size_t i = 0; i < sizes[m]; ++i)
            bufs[m][i] = std::byte(ref::key(int(m), 1, i));
    }
    for (auto& b : bufs)
        q.push_back(comm.isend(std::span<const std::byte>(b), 0, tag));
    for (auto& r : q)
        comm.wait(r);
}

// Receives what send_eager sent, in order, and checks every byte.
outcome receive_eager(gloo_communicator& comm, int tag, const std::vector<std::size_t>& sizes)
{
    for (std::size_t m = 0; m < sizes.size(); ++m) {
        std::vector<std::byte> b(sizes[m]);
        auto q = comm.irecv(std::span<std::byte>(b), 1, tag);
        comm.wait(q);
        for (std::size_t i = 0; i < sizes[m]; ++i)
            if (b[i] != std::byte(ref::key(int(m), 1, i)))
                return "message " + std::to_string(m) + ": byte " + std::to_string(i) + " is wrong";
    }
    return "";
}

TEST_CASE("eager mailboxes drain when destroyed: the next communicator on the context, same prefix, gets every "
          "message",
          "[gloo]")
{
    // The first communicator leaves receives posted ahead on both sides and one message that
    // no receive took. Had its destructor not filled them, the second communicator's messages
    // on the same slots would land in the first one's boxes, and its receives would wait.
    const auto out = run_ranks(2, [](int rank, const connector& connect) -> outcome {
        auto context = connect(timeout_of(milliseconds(30000)));
        {
            gloo_communicator first(context, eager_options(512, 3));
            if (rank == 1)
                send_eager(first, 4, {100, 200});
            else if (outcome o = receive_eager(first, 4, {100}); !o.empty())
                return "first communicator: " + o;
        }
        gloo_communicator second(context, eager_options(512, 3));
        const std::vector<std::size_t> sizes{1, 512, 0, 300, 17, 512, 64};
        if (rank == 1) {
            send_eager(second, 4, sizes);
            return "";
        }
        if (outcome o = receive_eager(second, 4, sizes); !o.empty())
            return "second communicator: " + o;
        return "";
    });
    check_all(out);
}

TEST_CASE("an eager message whose size differs from its receive's is a communication_error, without waiting out the "
          "deadline",
          "[gloo]")
{
    const auto out = run_ranks(2, [](int rank, const connector& connect) -> outcome {
        gloo_communicator comm(connect(timeout_of(milliseconds(30000))), eager_options(1024));
        connected(comm);
        if (rank == 1) {
            send_eager(comm, 5, {100});
            return "";
        }
        std::vector<std::byte> b(200);
        const std::string e = thrown([&] {
            auto q = comm.irecv(std::span<std::byte>(b), 1, 5);
            comm.wait(q);
        });
        if (!starts(e, "communication_error: ") || e.find("100 bytes") == std::string::npos)
            return "expected a communication_error naming the 100 bytes sent, got \"" + e + "\"";
        return "";
    });
    check_all(out);
}

TEST_CASE("an eager message stamped for another call is a foreign_message_error", "[gloo]")
{
    const auto out = run_ranks(2, [](int rank, const connector& connect) -> outcome {
        gloo_communicator comm(connect(timeout_of(milliseconds(30000))), eager_options(1024));
        connected(comm);
        const int bits = gradsync::tags::stamp_bits(comm.tag_limit());
        const int call1 = gradsync::tags::stamped(gradsync::tags::reducer, 9, 1, bits),
                  call2 = gradsync::tags::stamped(gradsync::tags::reducer, 9, 2, bits);
        if (rank == 1) {
            send_eager(comm, call2, {64});
            return "";
        }
        std::vector<std::byte> b(64);
        const std::string e = thrown([&] {
            auto q = comm.irecv(std::span<std::byte>(b), 1, call1);
            comm.wait(q);
        });
        if (!starts(e, "foreign_message_error: ") || e.find(std::to_string(call2)) == std::string::npos)
            return "expected a foreign_message_error naming tag " + std::to_string(call2) + ", got \"" + e + "\"";
        return "";
    });
    check_all(out);
}

TEST_CASE("every algorithm sums exactly over eager messages, 3 ranks", "[gloo]")
{
    // 3 ranks fold, so every algorithm's small blocks and hand-offs go through the mailboxes.
    const auto out = run_ranks(3, [](int rank, const connector& connect) -> outcome {
        gloo_communicator comm(connect(timeout_of(milliseconds(30000))), eager_options(std::size_t(64) << 10));
        for (std::size_t count : {std::size_t(1), std::size_t(1000), std::size_t(20000)}) {
            std::vector<double> data(count);
            const auto check = [&](const char* algorithm) -> outcome {
                for (std::size_t i = 0; i < count; ++i)
                    if (data[i] != double(3 * (i % 89) + 3))
                        return std::string(algorithm) + ", " + std::to_string(count) + " elements: element " +
                            std::to_string(i) + " is " + std::to_string(data[i]);
                return "";
            };
            const auto fill = [&] {
                for (std::size_t i = 0; i < count; ++i)
                    data[i] = double(i % 89 + std::size_t(rank));
            };
            const std::span<const std::size_t> one;
            fill();
            gradsync::allreduce(comm, std::span<double>(data), gradsync::sum{}, gradsync::ring{}, one);
            if (outcome o = check("ring"); !o.empty())
                return o;
            fill();
            gradsync::allreduce(comm, std::span<double>(data), gradsync::sum{}, gradsync::recursive_halving{}, one);
            if (outcome o = check("recursive_halving"); !o.empty())
                return o;
            fill();
            gradsync::allreduce(comm, std::span<double>(data), gradsync::sum{}, gradsync::recursive_doubling{}, one);
            if (outcome o = check("recursive_doubling"); !o.empty())
                return o;
        }
        return "";
    });
    check_all(out);
}

// shared_memory between processes: the region is made through this communicator, and what
// ends a wait on a peer's flag.
namespace {

using shared_reducer = gradsync::reducer<float, gloo_communicator, gradsync::sum, gradsync::shared_memory>;

// The names of this process's mappings of gradsync's regions, as /proc/self/maps shows them.
std::vector<std::string> regions_mapped()
{
    std::ifstream maps("/proc/self/maps");
    std::vector<std::string> names;
    for (std::string line; std::getline(maps, line);)
        if (const auto at = line.find("/memfd:gradsync"); at != std::string::npos)
            names.push_back(line.substr(at));
    return names;
}

} // namespace

TEST_CASE("shared_memory: a peer killed by SIGKILL ends the wait in a communication_error naming it, and its "
          "region has no name to leave behind",
          "[gloo][shared]")
{
    const auto out = run_ranks(2, [](int rank, const connector& connect) -> outcome {
        gloo_communicator comm(connect(timeout_of(milliseconds(60000)))); // no deadline: only the exit ends the wait
        shared_reducer reduce(comm, 4096);
        if (reduce.plan().direct())
            return "processes read each other's buffers by address";
        // The region, and the position board of the reducer's communicator, are anonymous files
        // (memfds): no name in /dev/shm or anywhere else, so the kernel frees them with the
        // last process that maps them, killed or not.
        if (regions_mapped() != std::vector<std::string>(2, "/memfd:gradsync (deleted)"))
            return "the region and the board are not two anonymous files";
        std::vector<float> x(4096, 1.0f);
        reduce(std::span<float>(x));
        if (x != std::vector<float>(4096, 2.0f))
            return "the first call did not sum";
        if (rank == 1)
            ::kill(::getpid(), SIGKILL);
        const std::string e = thrown([&] { reduce(std::span<float>(x)); });
        return starts(e, "communication_error: ") &&
                e.find("call 2: waiting for the data of rank 1: its process (pid ") != std::string::npos &&
                e.find(") has exited") != std::string::npos
            ? ""
            : "expected a communication_error naming rank 1's exit, got \"" + e + "\"";
    });
    CHECK(out[0] == "");
    CHECK(out[1] == "rank 1 was killed by signal " + std::to_string(SIGKILL));
    CHECK(regions_mapped().empty());
}

TEST_CASE("shared_memory: a peer that stalls ends the wait in deadline_error naming it, and its late call finds "
          "the waiter gone",
          "[gloo][shared]")
{
    const auto out = run_ranks(2, [](int rank, const connector& connect) -> outcome {
        gradsync::gloo_options options;
        options.deadline = milliseconds(300);
        gloo_communicator comm(connect(timeout_of(milliseconds(30000))), options);
        shared_reducer reduce(comm, 4096);
        std::vector<float> x(4096, 1.0f);
        if (rank == 1) {
            std::this_thread::sleep_for(milliseconds(1000));
            const std::string e = thrown([&] { reduce(std::span<float>(x)); });
            return starts(e, "aborted_error: ") && e.find("of rank 0: that rank left the call with an error") != std::string::npos
                ? ""
                : "rank 1 expected aborted_error naming rank 0, got \"" + e + "\"";
        }
        const std::string e = thrown([&] { reduce(std::span<float>(x)); });
        // Rank 1 reads rank 0's region after rank 0's call failed: the plan stays until then.
        std::this_thread::sleep_for(milliseconds(1500));
        return starts(e, "deadline_error: ") &&
                e.find("call 1: waiting for the data of rank 1: it did not come within 0.3") != std::string::npos
            ? ""
            : "rank 0 expected deadline_error naming rank 1, got \"" + e + "\"";
    });
    check_all(out);
}

TEST_CASE("shared_memory: ranks in another PID namespace (as in another container) get a usage_error on every "
          "rank, naming the rank and the reason",
          "[gloo][shared]")
{
    if (::geteuid() != 0) {
        WARN("not root: no PID namespace to try");
        return;
    }
    const auto out = run_ranks(2, [](int rank, const connector& connect) -> outcome {
        auto attempt = [&]() -> outcome {
            gloo_communicator comm(connect(timeout_of(milliseconds(30000))));
            const std::string e = thrown([&] { shared_reducer reduce(comm, 4096); });
            const std::string want = "usage_error: gradsync::shared_memory (rank " + std::to_string(rank) +
                " of 2): the ranks cannot share memory: rank 1 could not open rank 0's shared file through /proc (";
            return starts(e, want) ? "" : "expected \"" + want + "...\", got \"" + e + "\"";
        };
        if (rank == 0)
            return attempt();
        // Rank 1 runs in a PID namespace of its own, with its own /proc, in a grandchild.
        if (::unshare(CLONE_NEWPID | CLONE_NEWNS) != 0)
            return std::string("unshare: ") + std::strerror(errno);
        const pid_t pid = ::fork();
        if (pid == 0) {
            if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
                ::mount("proc", "/proc", "proc", 0, nullptr) != 0)
                ::_exit(2);
            const outcome o = attempt();
            if (!o.empty())
                std::fprintf(stderr, "rank 1, in its PID namespace: %s\n", o.c_str());
            ::_exit(o.empty() ? 0 : 1);
        }
        int status = 0;
        ::waitpid(pid, &status, 0);
        return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "" : "rank 1's attempt failed (see its line)";
    });
    check_all(out);
}
