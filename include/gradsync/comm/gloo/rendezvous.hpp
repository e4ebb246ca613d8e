// gloo_connect: a connected gloo::Context for gloo_communicator, made the way every Gloo job
// makes one: a TCP device, a store all ranks reach, and connectFullMesh.
//
// The store is where the ranks find each other's addresses. gloo::rendezvous::FileStore over
// a directory serves ranks on one host (or on hosts sharing a file system); TCP stores
// (PyTorch's c10d::TCPStore behind an adapter) or gloo::rendezvous::RedisStore serve several
// hosts. Keys are written under `prefix`, so jobs, or several contexts of one job, can share
// one store. Every rank must call with the same size and prefix; it returns once every rank
// is connected.
//
// gloo_limit_send_buffers sets the send buffer (SO_SNDBUF) of a context's TCP sockets, which
// Gloo neither exposes nor sizes for unbound buffers (docs/gloo.md, "Performance"). Each pair
// has a socket of its own, found among the process's descriptors (/proc/self/fd) as the
// connected socket whose local address is the pair's.
//
// The device is made with SIGPIPE blocked on the calling thread, where it stays blocked, and
// its network thread inherits that (gloo/detail/sigpipe.hpp): a write to a peer that is gone then
// fails instead of ending the process.
//
// network_thread_nice lowers the priority of the device's network thread. Why: that thread
// takes a pair's lock with a try-lock and, on level-triggered epoll, comes straight back while
// the lock is held, so it spins while a posting thread writes a message through the same
// pair; where ranks outnumber idle cores it can take the core from that posting thread, its
// own or a peer's, for a scheduler slice. At a lower priority it yields to the threads it
// waits for (docs/gloo.md, "Performance", has the figures). The thread inherits its maker's
// nice value, and Linux keeps one per thread, so the device is made on a short-lived thread
// whose value is raised: the caller's stays as it was.
#pragma once

#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <dirent.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <gradsync/comm/gloo/detail/sigpipe.hpp>
#include <gradsync/core/error.hpp>

namespace gradsync {

struct gloo_connect_options {
    // The address other ranks reach this one at (the device's interface); a host name or
    // numeric address. 127.0.0.1 keeps a job on one host.
    std::string hostname = "127.0.0.1";
    // A network interface (e.g. "eth0") whose address is used instead of hostname's, as
    // GLOO_SOCKET_IFNAME names one for PyTorch's gloo backend; empty: hostname.
    std::string interface{};
    // Gloo's own timeout: connecting, and every wait that has no deadline of its own.
    std::chrono::milliseconds timeout{30000};
    std::string prefix = "gradsync";
    // SO_SNDBUF of every socket of the context (gloo_limit_send_buffers); 0: the kernel's
    // autotuning, as Gloo leaves it. docs/gloo.md gives the value for ranks on one host.
    std::size_t send_buffer_bytes = 0;
    // Added to the nice value of the device's network thread, 0 to 19 (capped at 19); 0: the
    // caller's, as Gloo leaves it. docs/gloo.md gives the value for ranks on one host.
    int network_thread_nice = 0;
};

namespace detail {

inline bool same_endpoint(const sockaddr_storage& a, const sockaddr_storage& b) noexcept
{
    if (a.ss_family != b.ss_family)
        return false;
    if (a.ss_family == AF_INET) {
        const auto& x = reinterpret_cast<const sockaddr_in&>(a);
        const auto& y = reinterpret_cast<const sockaddr_in&>(b);
        return x.sin_port == y.sin_port && x.sin_addr.s_addr == y.sin_addr.s_addr;
    }
    if (a.ss_family == AF_INET6) {
        const auto& x = reinterpret_cast<const sockaddr_in6&>(a);
        const auto& y = reinterpret_cast<const sockaddr_in6&>(b);
        return x.sin6_port == y.sin6_port && std::memcmp(&x.sin6_addr, &y.sin6_addr, sizeof x.sin6_addr) == 0;
    }
    return false;
}

// A TCP device whose network thread has SIGPIPE blocked and a nice value `nice` above the
// caller's. A thread inherits its maker's signal mask, so blocking it on the caller covers
// the short-lived maker and the network thread alike.
inline std::shared_ptr<gloo::transport::Device> make_gloo_device(const gloo::transport::tcp::attr& attr, int nice)
{
    block_sigpipe();
    if (nice == 0)
        return gloo::transport::tcp::CreateDevice(attr);
    std::shared_ptr<gloo::transport::Device> device;
    std::exception_ptr failure;
    std::thread maker([&] {
        try {
            errno = 0;
            const int own = ::getpriority(PRIO_PROCESS, 0); // this thread's: Linux keeps one per thread
            if ((own == -1 && errno != 0) || ::setpriority(PRIO_PROCESS, 0, std::min(19, own + nice)) != 0)
                throw std::runtime_error(std::string("setting the network thread's nice value: ") +
                                         std::strerror(errno));
            device = gloo::transport::tcp::CreateDevice(attr);
        } catch (...) {
            failure = std::current_exception();
        }
    });
    maker.join();
    if (failure)
        std::rethrow_exception(failure);
    return device;
}

} // namespace detail

// Sets SO_SNDBUF to `bytes` (Linux doubles it) on the socket of each of the context's TCP
// pairs; returns how many it set: size - 1 when every pair is a connected TCP pair and
// /proc/self/fd can be read. Pairs of other transports are left alone.
inline int gloo_limit_send_buffers(gloo::Context& context, std::size_t bytes)
{
    if (bytes == 0 || bytes > std::size_t(INT_MAX))
        throw usage_error("gradsync::gloo_limit_send_buffers: " + std::to_string(bytes) +
                          " bytes is not a send buffer size (1 to INT_MAX)");
    std::vector<sockaddr_storage> mine;
    for (int p = 0; p < context.size; ++p)
        if (p != context.rank)
            if (const auto& pair = context.getPair(p))
                if (auto* address = dynamic_cast<const gloo::transport::tcp::Address*>(&pair->address()))
                    mine.push_back(address->getSockaddr());
    DIR* dir = ::opendir("/proc/self/fd");
    if (!dir)
        return 0;
    const int value = int(bytes);
    int set = 0;
    while (const dirent* entry = ::readdir(dir)) {
        char* end = nullptr;
        const long fd = std::strtol(entry->d_name, &end, 10);
        struct stat st {};
        sockaddr_storage local{}, peer{};
        socklen_t local_len = sizeof local, peer_len = sizeof peer;
        if (*end != '\0' || end == entry->d_name || fd == ::dirfd(dir) || ::fstat(int(fd), &st) != 0 ||
            !S_ISSOCK(st.st_mode) || ::getsockname(int(fd), reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
            ::getpeername(int(fd), reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0)
            continue;
        for (const sockaddr_storage& m : mine)
            if (detail::same_endpoint(local, m) &&
                ::setsockopt(int(fd), SOL_SOCKET, SO_SNDBUF, &value, sizeof value) == 0) {
                ++set;
                break;
            }
    }
    ::closedir(dir);
    return set;
}

inline std::shared_ptr<gloo::Context> gloo_connect(gloo::rendezvous::Store& store, int rank, int size,
                                                   const gloo_connect_options& options = {})
{
    const std::string who = "gradsync::gloo_connect (rank " + std::to_string(rank) + " of " + std::to_string(size) + ")";
    if (size < 1 || rank < 0 || rank >= size)
        throw usage_error(who + ": rank must be in [0, size) and size at least 1");
    if (options.timeout.count() <= 0)
        throw usage_error(who + ": the timeout must be positive");
    if (options.network_thread_nice < 0 || options.network_thread_nice > 19)
        throw usage_error(who + ": network_thread_nice " + std::to_string(options.network_thread_nice) +
                          " is not a nice increment (0 to 19)");
    if (options.send_buffer_bytes > std::size_t(INT_MAX))
        throw usage_error(who + ": send_buffer_bytes " + std::to_string(options.send_buffer_bytes) +
                          " is larger than a socket option holds (INT_MAX)");
    std::shared_ptr<gloo::rendezvous::Context> context;
    try {
        gloo::transport::tcp::attr attr;
        if (options.interface.empty())
            attr.hostname = options.hostname;
        else
            attr.iface = options.interface;
        auto device = detail::make_gloo_device(attr, options.network_thread_nice);
        gloo::rendezvous::PrefixStore prefixed(options.prefix, store);
        context = std::make_shared<gloo::rendezvous::Context>(rank, size);
        context->setTimeout(options.timeout);
        context->connectFullMesh(prefixed, device);
        // Return only once every rank is connected. Gloo's listening side accepts a peer's
        // connection in the background: a rank that returned first and destroyed its context
        // at once would close a socket a slower rank had still to take up, and fail that
        // rank's connecting with "Connection closed by peer".
        const std::string done = "connected/";
        prefixed.set(done + std::to_string(rank), {'1'});
        std::vector<std::string> everyone;
        for (int i = 0; i < size; ++i)
            everyone.push_back(done + std::to_string(i));
        prefixed.wait(everyone, options.timeout);
    } catch (const std::exception& e) {
        throw communication_error(who + ": connecting through the store failed: " + e.what());
    }
    if (options.send_buffer_bytes) {
        const int set = gloo_limit_send_buffers(*context, options.send_buffer_bytes);
        if (set != size - 1)
            throw communication_error(who + ": send_buffer_bytes was set on " + std::to_string(set) + " of the " +
                                      std::to_string(size - 1) + " sockets (is /proc mounted?)");
    }
    return context;
}

} // namespace gradsync
