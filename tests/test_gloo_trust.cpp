// Who may join a Gloo job (docs/cluster.md, "Who may join"): the store's directory
// (gloo_file_store), a stranger at a rank's ports, and bytes below gradsync's framing on a
// pair's socket. Every rank is a child process, forked before any Gloo object exists, so that
// one libgloo ends is seen from outside; the parent is the test and, where a case has one, the
// stranger. The ranks meet through gloo_file_store in a scratch directory. A child writes its
// outcome to a file there and its stderr to another; one that outlives the case's time is
// killed and fails it: nothing here can hang.
//
// Run alone, every process is on this host's loopback, host h at 127.0.0.h. With
// GRADSYNC_TRUST_ACROSS_HOSTS=1 (the test cluster's cluster.gloo.trust) the same cases run
// across hosts of scripts/cluster.sh (GRADSYNC_CLUSTER, GRADSYNC_CLUSTER_NET): rank r on host
// r + 1 unless a case says otherwise, the stranger on host 4, each process entering its host's
// network namespace before it makes a socket.
#include <catch2/catch.hpp>

#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/address.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gradsync/comm/gloo/file_store.hpp>
#include <gradsync/comm/gloo/gloo.hpp>
#include <gradsync/comm/gloo/rendezvous.hpp>
#include <gradsync/gradsync.hpp>

#include "cluster_hosts.hpp"
#include "scratch_dir.hpp"
#include "summed_exactly.hpp"
#include "thrown.hpp"

namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using gradsync::gloo_communicator;

// The outcome of one rank's body: empty when it did what the case expects.
using outcome = std::string;
// A rank's body, given its rank, its host's address and the job's store.
using rank_body = std::function<outcome(int rank, const std::string& address, gloo::rendezvous::Store& store)>;

// The hosts of a case: this host's loopback, or the test cluster's (see the top).
struct hosts {
    static constexpr int stranger = 4; // the host the stranger runs on

    static const gradsync_test::cluster_hosts& here()
    {
        static const gradsync_test::cluster_hosts h("GRADSYNC_TRUST_ACROSS_HOSTS");
        return h;
    }
};

using gradsync_test::thrown;

bool starts(const std::string& s, const std::string& head) { return s.rfind(head, 0) == 0; }
bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// How one rank ended: its outcome, or the signal that ended it, and what it wrote to stderr.
struct ending {
    outcome said;
    int signal = 0;
    bool reported = false;
    std::string stderr_text;
};

// One job: its scratch directory, the store's path in it, and its ranks' processes.
class job {
public:
    job()
    {
        // Under a umask of 002 the scratch directory would be group-writable, and
        // gloo_file_store refuses a store below such a directory.
        std::filesystem::permissions(dir_.path(), std::filesystem::perms::owner_all);
    }
    job(const job&) = delete;
    job& operator=(const job&) = delete;
    ~job()
    {
        for (pid_t pid : pids_) { // a case that failed before finish(): nothing may outlive it
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
        }
    }

    const std::string& store_path() const noexcept { return store_path_; }

    // Starts `rank` in a child process on `host` (by default host rank + 1) running body.
    void start(int rank, const rank_body& body, int host = 0)
    {
        if (host == 0)
            host = rank + 1;
        const pid_t pid = ::fork();
        if (pid == 0) {
            // Where libgloo ends the process, it says why on stderr. Catch's handler of SIGABRT,
            // inherited, would report such an end as the parent's test failing.
            ::signal(SIGABRT, SIG_DFL);
            const int err = ::open(file("stderr", rank).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
            if (err >= 0)
                ::dup2(err, STDERR_FILENO);
            outcome said;
            try {
                hosts::here().enter(host);
                auto store = gradsync::gloo_file_store(store_path_);
                said = body(rank, hosts::here().address(host), *store);
            } catch (const std::exception& e) {
                said = std::string("unexpected exception: ") + e.what();
            }
            std::ofstream(file("outcome", rank)) << said;
            ::_exit(0);
        }
        pids_.push_back(pid);
        ranks_.push_back(rank);
    }

    // The process of a rank started and not yet finished.
    pid_t pid(int rank) const
    {
        return pids_.at(std::size_t(std::find(ranks_.begin(), ranks_.end(), rank) - ranks_.begin()));
    }

    // Waits for every rank, each at most until `limit` from now, and kills what is left.
    std::vector<ending> finish(seconds limit)
    {
        const auto until = std::chrono::steady_clock::now() + limit;
        std::vector<ending> out(pids_.size());
        for (std::size_t i = 0; i < pids_.size(); ++i) {
            int status = 0;
            pid_t done = 0;
            while ((done = ::waitpid(pids_[i], &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < until)
                std::this_thread::sleep_for(milliseconds(10));
            ending& e = out[std::size_t(ranks_[i])];
            if (done == 0) {
                ::kill(pids_[i], SIGKILL);
                ::waitpid(pids_[i], &status, 0);
                e.said = "still running after " + std::to_string(limit.count()) + " s, killed";
            } else if (WIFSIGNALED(status)) {
                e.signal = WTERMSIG(status);
            } else {
                std::ifstream in(file("outcome", ranks_[i]));
                e.reported = bool(in);
                e.said = e.reported ? std::string(std::istreambuf_iterator<char>(in), {}) : "exited without an outcome";
            }
            std::ifstream err(file("stderr", ranks_[i]));
            e.stderr_text.assign(std::istreambuf_iterator<char>(err), {});
        }
        pids_.clear();
        ranks_.clear();
        return out;
    }

private:
    std::string file(const char* what, int rank) const
    {
        return dir_.file(what + std::string(".") + std::to_string(rank)).string();
    }

    gradsync_test::scratch_dir dir_{"gradsync_trust_"};
    std::string store_path_ = dir_.file("store").string(); // made 0700 by gloo_file_store
    std::vector<pid_t> pids_;
    std::vector<int> ranks_;
};

// One rank's end, for a failure's message.
std::string described(const ending& e)
{
    return "\"" + e.said + "\", signal " + std::to_string(e.signal) + ", stderr: " + e.stderr_text;
}

// Checks that every rank said "" (it did what the case expects).
void check_all(const std::vector<ending>& out)
{
    for (std::size_t r = 0; r < out.size(); ++r) {
        INFO("rank " << r << ": " << described(out[r]));
        CHECK(out[r].reported);
        CHECK(out[r].said == "");
    }
}

gradsync::gloo_connect_options at(const std::string& host, milliseconds timeout)
{
    gradsync::gloo_connect_options o;
    o.hostname = host;
    o.timeout = timeout;
    return o;
}

using gradsync_test::summed_exactly;

// The addresses `rank` published for its pairs: gloo::rendezvous::Context::connectFullMesh
// sets "<prefix>/<rank>" to one address per peer, in rank order.
std::vector<sockaddr_storage> published(gloo::rendezvous::Store& store, int rank, int size)
{
    gloo::rendezvous::PrefixStore prefixed("gradsync", store);
    const std::string key = std::to_string(rank);
    prefixed.wait({key}, seconds(30));
    const std::vector<char> all = prefixed.get(key);
    const std::size_t each = all.size() / std::size_t(size - 1);
    std::vector<sockaddr_storage> out;
    for (std::size_t p = 0; p + 1 < std::size_t(size); ++p) {
        const auto from = all.begin() + std::ptrdiff_t(p * each);
        const gloo::transport::tcp::Address address(std::vector<char>(from, from + std::ptrdiff_t(each)));
        out.push_back(address.getSockaddr());
    }
    return out;
}

int port_of(const sockaddr_storage& a) { return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port); }

// Whether a TCP socket in the network of process `pid` listens on `port` (its net/tcp, state
// 0A).
bool listening_on(pid_t pid, int port)
{
    std::ifstream tcp("/proc/" + std::to_string(pid) + "/net/tcp");
    std::string line;
    std::getline(tcp, line); // the header
    while (std::getline(tcp, line)) {
        std::istringstream fields(line);
        std::string slot, local, remote, state;
        fields >> slot >> local >> remote >> state;
        if (state == "0A" && std::stoi(local.substr(local.find(':') + 1), nullptr, 16) == port)
            return true;
    }
    return false;
}

// A connected socket to `to`, as a stranger makes it; -1 when refused.
int connect_to(const sockaddr_storage& to)
{
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof(sockaddr_in)) == 0)
        return fd;
    ::close(fd);
    return -1;
}

bool send_all(int fd, std::span<const std::byte> bytes)
{
    return ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == ssize_t(bytes.size());
}

// Gloo's TCP preamble, as it goes on the wire before every message (Op::preamble in
// gloo/transport/tcp/pair.h, which Debian's headers cannot compile: it includes a header they
// leave out), and its opcodes (Op::Opcode).
struct preamble {
    std::size_t nbytes, opcode, slot, offset, length, roffset;
};
enum : std::size_t { send_buffer = 0, send_unbound_buffer = 1, notify_send_ready = 2, notify_recv_ready = 3 };

// `count` preambles of seeded random bytes whose opcode is none of Gloo's four.
std::vector<preamble> random_preambles(std::size_t count)
{
    std::mt19937_64 random(20220518);
    std::vector<preamble> out(count);
    for (preamble& p : out) {
        p = {random(), random(), random(), random(), random(), random()};
        p.opcode |= std::size_t(1) << 63;
    }
    return out;
}

// The socket of `context`'s pair to `peer`: the connected one whose local address is the
// pair's.
int pair_socket(gloo::Context& context, int peer)
{
    const auto& address = context.getPair(peer)->address();
    const auto& self = dynamic_cast<const gloo::transport::tcp::Address&>(address).getSockaddr();
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
        const int fd = std::stoi(entry.path().filename().string());
        sockaddr_storage local{}, remote{};
        socklen_t local_len = sizeof local, remote_len = sizeof remote;
        if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) == 0 &&
            ::getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &remote_len) == 0 &&
            gradsync::detail::same_endpoint(local, self))
            return fd;
    }
    return -1;
}

template <class T>
void append(std::vector<std::byte>& bytes, std::span<const T> what)
{
    const auto b = std::as_bytes(what);
    bytes.insert(bytes.end(), b.begin(), b.end());
}

using after_garbage_fn = std::function<outcome(int rank, gloo_communicator&, gloo::rendezvous::Store&)>;

// Two ranks connect and sum once; then rank 1 writes `bytes` on its pair's socket to rank 0,
// below gradsync's framing and while Gloo writes nothing there, and each rank runs `then`.
std::vector<ending> after_garbage(const std::vector<std::byte>& bytes, const after_garbage_fn& then)
{
    job j;
    for (int r = 0; r < 2; ++r)
        j.start(r, [&](int rank, const std::string& address, gloo::rendezvous::Store& store) -> outcome {
            auto context = gradsync::gloo_connect(store, rank, 2, at(address, milliseconds(30000)));
            gloo_communicator comm(context, {.deadline = seconds(3)});
            if (outcome o = summed_exactly(comm, rank, 2, 100000); !o.empty())
                return "before the garbage: " + o;
            if (rank == 1) {
                const int fd = pair_socket(*context, 0);
                if (fd < 0)
                    return "no socket of the pair to rank 0 among the process's descriptors";
                if (!send_all(fd, bytes))
                    return "writing the garbage failed";
            }
            return then(rank, comm, store);
        });
    return j.finish(seconds(60));
}

// What a message of 4096 bytes 0xA5 (no zero byte), sent from rank 1 to rank 0 with tag 7,
// did: rank 0's wait and rank 1's send, as thrown() names them. Rank 1 stays until rank 0's
// wait has ended, so that its leaving is not what ends that wait.
outcome message_after_garbage(int rank, gloo_communicator& comm, gloo::rendezvous::Store& store)
{
    std::vector<std::byte> message(4096, std::byte(0xA5));
    if (rank == 1) {
        const std::string e = thrown([&] {
            auto q = comm.isend(std::span<const std::byte>(message), 0, 7);
            comm.wait(q);
        });
        store.wait({"rank 0 done"}, seconds(30));
        return e;
    }
    std::vector<std::byte> got(message.size());
    const std::string e = thrown([&] {
        auto q = comm.irecv(std::span<std::byte>(got), 1, 7);
        comm.wait(q);
    });
    store.set("rank 0 done", {'1'});
    return e.empty() && got != message ? "the message arrived with other bytes" : e;
}

} // namespace

TEST_CASE("gloo_file_store creates a missing directory 0700, takes 0700 and 0755, and refuses what another user "
          "could write",
          "[gloo_file_store]")
{
    gradsync_test::scratch_dir dir("gradsync_store_");
    namespace fs = std::filesystem;
    fs::permissions(dir.path(), fs::perms::owner_all);
    const auto mode = [](const fs::path& p) {
        struct stat st {};
        ::stat(p.c_str(), &st);
        return st.st_mode & 07777;
    };
    // What gloo_file_store(path) threw, or "" when it returned a store that works.
    int keys = 0; // FileStore refuses to set a key twice
    const auto refusal = [&keys](const fs::path& path) {
        return thrown([&] {
            auto store = gradsync::gloo_file_store(path.string());
            const std::string key = "key" + std::to_string(++keys);
            store->set(key, {'v'});
            if (store->get(key) != std::vector<char>{'v'})
                throw std::runtime_error("the store gave back another value");
        });
    };
    const auto refused = [&](const fs::path& path, const std::string& why) {
        const std::string e = refusal(path);
        INFO(e);
        CHECK(starts(e, "usage_error: gradsync::gloo_file_store(\"" + path.string()));
        CHECK(has(e, why));
    };

    const fs::path store = dir.file("store");
    CHECK(refusal(store) == "");
    CHECK(mode(store) == 0700);
    CHECK(refusal(store.string() + "/") == ""); // again, now that it exists
    fs::permissions(store, fs::perms(0755));
    CHECK(refusal(store) == "");

    fs::permissions(store, fs::perms(0777));
    refused(store, "mode 0777");
    fs::permissions(store, fs::perms(0770));
    refused(store, "mode 0770");
    fs::permissions(store, fs::perms(0700));

    fs::create_directory_symlink(store, dir.file("link"));
    refused(dir.file("link"), "symbolic link");
    refused(dir.file("link").string() + "/", "symbolic link");
    std::ofstream(dir.file("plain")) << "x";
    refused(dir.file("plain"), "not a directory");
    refused(dir.file("missing") / "store", "cannot create the directory");

    if (::geteuid() == 0) { // root can give a directory away
        const fs::path theirs = dir.file("theirs");
        fs::create_directory(theirs);
        fs::permissions(theirs, fs::perms(0700));
        REQUIRE(::chown(theirs.c_str(), 12345, 12345) == 0);
        refused(theirs, "owned by uid 12345");
    } else { // root's own directory
        refused("/", "owned by uid 0");
    }

    // Above the store: a directory anyone can write lets them rename the store away, unless
    // it is sticky, like /tmp.
    const fs::path open = dir.file("open"), sticky = dir.file("sticky");
    fs::create_directory(open);
    fs::permissions(open, fs::perms(0777));
    refused(open / "store", "lies under \"" + open.string() + "\" (mode 0777)");
    fs::create_directory(sticky);
    fs::permissions(sticky, fs::perms(01777));
    CHECK(refusal(sticky / "store") == "");
    refused(sticky, "mode 1777"); // but never as the store itself
}

TEST_CASE("after the mesh is connected no rank listens: a stranger at the published ports is refused, and the "
          "sums stay exact",
          "[gloo]")
{
    constexpr int n = 3;
    hosts::here().enter(hosts::stranger);
    job j;
    for (int r = 0; r < n; ++r)
        j.start(r, [](int rank, const std::string& address, gloo::rendezvous::Store& store) -> outcome {
            gloo_communicator comm(gradsync::gloo_connect(store, rank, n, at(address, milliseconds(30000))),
                                   {.deadline = seconds(20)});
            if (outcome o = summed_exactly(comm, rank, n, 100000); !o.empty())
                return "before the stranger: " + o;
            store.set("ready/" + std::to_string(rank), {'1'});
            store.wait({"stranger_done"}, seconds(30));
            if (outcome o = summed_exactly(comm, rank, n, 100000); !o.empty())
                return "after the stranger: " + o;
            return "";
        });
    auto store = gradsync::gloo_file_store(j.store_path());
    std::vector<std::string> ready;
    for (int r = 0; r < n; ++r)
        ready.push_back("ready/" + std::to_string(r));
    store->wait(ready, seconds(30));
    std::string accepted;
    const auto garbage = random_preambles(16);
    for (int r = 0; r < n; ++r)
        for (const sockaddr_storage& a : published(*store, r, n))
            if (const int fd = connect_to(a); fd >= 0) {
                accepted += "rank " + std::to_string(r) + "'s port " + std::to_string(port_of(a)) + "; ";
                send_all(fd, std::as_bytes(std::span(garbage)));
                ::close(fd);
            }
    store->set("stranger_done", {'1'});
    check_all(j.finish(seconds(60)));
    INFO("ports that let the stranger in: " << accepted);
    CHECK(accepted.empty());
}

TEST_CASE("a stranger who reaches a rank's listening port during rendezvous takes its pair and fails the job with a "
          "communication_error on both ranks, but at the connecting side is dropped",
          "[gloo]")
{
    // Gloo's pair listens on the side of the lower address and accepts the first connection
    // that comes, without asking who it is. Hosts 1 and 2 decide which side rank 0 is.
    const bool rank0_listens = GENERATE(true, false);
    const int host0 = rank0_listens ? 1 : 2, host1 = rank0_listens ? 2 : 1;
    hosts::here().enter(hosts::stranger);
    const rank_body body = [&](int rank, const std::string& address, gloo::rendezvous::Store& store) -> outcome {
        std::string sums;
        const std::string e = thrown([&] {
            auto context = gradsync::gloo_connect(store, rank, 2, at(address, milliseconds(3000)));
            gloo_communicator comm(context, {.deadline = seconds(20)});
            sums = summed_exactly(comm, rank, 2, 100000);
        });
        return e.empty() ? sums : e;
    };
    job j;
    j.start(0, body, host0);
    auto store = gradsync::gloo_file_store(j.store_path());
    const sockaddr_storage port = published(*store, 0, 2)[0];
    const int stranger = connect_to(port);
    REQUIRE(stranger >= 0);
    // Whole preambles of no opcode Gloo knows: read and skipped (see the case below).
    const auto garbage = random_preambles(16);
    CHECK(send_all(stranger, std::as_bytes(std::span(garbage))));
    // Gloo closes the listening socket once it has accepted: rank 1 comes after that.
    const auto until = std::chrono::steady_clock::now() + seconds(10);
    while (listening_on(j.pid(0), port_of(port)) && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(milliseconds(10));
    REQUIRE_FALSE(listening_on(j.pid(0), port_of(port)));
    j.start(1, body, host1);
    const auto out = j.finish(seconds(60));
    ::close(stranger);
    for (std::size_t r = 0; r < out.size(); ++r) {
        INFO("rank " << r << ": " << described(out[r]));
        REQUIRE(out[r].reported);
    }
    if (!rank0_listens) { // rank 0 connects to rank 1 and closes the stranger's socket
        CHECK(out[0].said == "");
        CHECK(out[1].said == "");
        return;
    }
    // Rank 0's pair took the stranger for rank 1; only gloo_connect's last step, every rank
    // saying it is connected, stops it. Rank 1 finds rank 0's port closed.
    INFO("rank 0: " << out[0].said << "\nrank 1: " << out[1].said);
    CHECK(starts(out[0].said, "communication_error: "));
    CHECK(has(out[0].said, "connected/1"));
    CHECK(starts(out[1].said, "communication_error: "));
    CHECK(has(out[1].said, "refused"));
}

TEST_CASE("whole Gloo preambles of no opcode Gloo knows, and notices for a slot no one uses, from a connected peer "
          "are skipped: the sums stay exact",
          "[gloo]")
{
    std::vector<std::byte> bytes;
    append(bytes, std::span<const preamble>(random_preambles(16)));
    const std::vector<preamble> notices{{sizeof(preamble), notify_send_ready, 12345, 0, 8, 0},
                                        {sizeof(preamble), notify_recv_ready, 12345, 0, 8, 0}};
    append(bytes, std::span(notices));
    check_all(after_garbage(bytes, [](int rank, gloo_communicator& comm, gloo::rendezvous::Store&) {
        return summed_exactly(comm, rank, 2, 100000);
    }));
}

TEST_CASE("bytes that stop Gloo reading a pair (a partial preamble, a bound-buffer message for a slot with no "
          "buffer) lose the message after them: the receiver's wait ends in a deadline_error naming it",
          "[gloo]")
{
    // A partial preamble shifts Gloo's reading of everything after it: with these messages
    // the shifted fields spell unknown opcodes, skipped, or SEND_BUFFER (zero), on which, as
    // on the bound-buffer message, Gloo waits for a buffer that never comes, reading nothing
    // more from the pair. Other bytes after a partial preamble can spell the message of the
    // case below, which aborts.
    const bool partial = GENERATE(true, false);
    std::vector<std::byte> bytes;
    if (partial) {
        const auto random = random_preambles(1);
        append(bytes, std::as_bytes(std::span(random)).first(5));
    } else {
        const std::vector<preamble> to_no_buffer{{sizeof(preamble) + 8, send_buffer, 12345, 0, 8, 0}};
        append(bytes, std::span(to_no_buffer));
        bytes.resize(bytes.size() + 8);
    }
    const auto out = after_garbage(bytes, message_after_garbage);
    for (std::size_t r = 0; r < out.size(); ++r) {
        INFO("rank " << r << ": " << described(out[r]));
        REQUIRE(out[r].reported);
    }
    INFO("rank 0: " << out[0].said);
    CHECK(starts(out[0].said, "deadline_error: "));
    CHECK(has(out[0].said, "4096 bytes from rank 1"));
    CHECK(out[1].said == ""); // Gloo wrote the message: the sender cannot tell
}

TEST_CASE("a peer's unbound-buffer message for a slot with no receive posted aborts the receiving process inside "
          "libgloo, and the sender gets a communication_error",
          "[gloo]")
{
    // Gloo's network thread reads the message, finds no receive for its slot and throws
    // (gloo/transport/tcp/pair.cc, Pair::prepareRead); nothing catches it on that thread, so
    // std::terminate ends the process. gradsync cannot intercept it.
    std::vector<std::byte> bytes;
    const std::vector<preamble> unasked{{sizeof(preamble) + 8, send_unbound_buffer, 12345, 0, 8, 0}};
    append(bytes, std::span(unasked));
    bytes.resize(bytes.size() + 8);
    const auto out = after_garbage(bytes, [](int rank, gloo_communicator& comm, gloo::rendezvous::Store&) -> outcome {
        const std::string e = thrown([&] { summed_exactly(comm, rank, 2, 100000); });
        return rank == 0 ? "rank 0 ran on: \"" + e + "\"" : e;
    });
    INFO("rank 0: " << described(out[0]));
    CHECK(out[0].signal == SIGABRT);
    CHECK(has(out[0].stderr_text, "gloo::EnforceNotMet"));
    CHECK(has(out[0].stderr_text, "pair.cc"));
    CHECK(has(out[0].stderr_text, "localPendingRecv_"));
    INFO("rank 1: " << described(out[1]));
    CHECK(starts(out[1].said, "communication_error: "));
}
