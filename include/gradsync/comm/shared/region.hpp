// shared_region: memory that every rank of a group maps, made through the group's communicator
// when a plan is built, so that ranks of one host read each other's data where it lies.
//
// Rank 0 makes an anonymous file (memfd_create) and writes a random key at its start; every
// other rank opens it through /proc/PID/fd/N (rank 0's process and descriptor), maps it and
// checks the key. A rank whose host name is not rank 0's does not try: it is another node (as
// hierarchical counts nodes), even where one kernel runs both. The file has no name (nothing
// in /dev/shm) and the kernel frees it when the last rank unmaps it or exits, SIGKILL
// included, so nothing is ever left behind. Rank 0 closes its descriptor once every rank has
// answered. A rank that cannot map it (another host or PID namespace, /proc hidden, no
// memory) says why, and rank 0 tells every rank the verdict, so the region is
// usable on every rank or on none.
//
// Ranks of one process (threads of a local_group) share one mapping, kept until the last of
// them lets go: the same addresses for all, so they can read each other's buffers by address
// and a race detector sees their flags as one. For ranks of other processes a region holds a
// pidfd, so a wait can tell a peer that died from one that is slow.
#pragma once

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <gradsync/comm/communicator.hpp>
#include <gradsync/core/error.hpp>
#include <gradsync/core/tags.hpp>

namespace gradsync {

class shared_region {
public:
    // The bytes before data(): the key, and room so that data() starts on a page.
    static constexpr std::size_t header_bytes = 4096;

    shared_region() = default;
    shared_region(shared_region&& o) noexcept { *this = std::move(o); }
    shared_region& operator=(shared_region&& o) noexcept
    {
        if (this != &o) {
            close_pidfds();
            mapping_ = std::move(o.mapping_);
            rank_ = o.rank_;
            pids_ = std::move(o.pids_);
            pidfds_ = std::move(o.pidfds_);
            why_ = std::move(o.why_);
        }
        return *this;
    }
    ~shared_region() { close_pidfds(); }

    // Collective: every rank of comm calls it with the same bytes, right after the agreement
    // check (its messages carry tags::agreement, whose order that check already settled).
    template <communicator C>
    static shared_region join(C& comm, std::size_t bytes);

    bool usable() const noexcept { return mapping_ != nullptr; }
    // Why the region is not usable: which rank failed, at what, and the system's reason.
    const std::string& why() const noexcept { return why_; }

    std::byte* data() const noexcept { return mapping_->base + header_bytes; }
    std::size_t size() const noexcept { return mapping_->bytes - header_bytes; }
    // Rank 0's random key, the same on every rank of this region.
    std::uint64_t key() const noexcept { return mapping_->key; }

    // Whether rank r runs in this process, so its addresses are valid here.
    bool same_process(int r) const noexcept { return pids_[std::size_t(r)] == pids_[std::size_t(rank_)]; }
    int pid_of(int r) const noexcept { return pids_[std::size_t(r)]; }
    // Whether rank r's process has exited (never for a rank of this process).
    bool exited(int r) const noexcept
    {
        const int fd = pidfds_[std::size_t(r)];
        if (fd >= 0) {
            pollfd p{fd, POLLIN, 0};
            return ::poll(&p, 1, 0) > 0;
        }
        return !same_process(r) && ::kill(pid_of(r), 0) != 0 && errno == ESRCH;
    }

private:
    struct offer {
        std::uint64_t key;
        std::uint64_t bytes;
        std::int32_t pid;
        std::int32_t fd;   // -1: rank 0 could not make the file
        std::int32_t error; // errno of that
        std::int32_t pad;
        std::array<char, 256> host; // rank 0's host name
    };
    struct answer {
        std::int32_t pid;
        std::int32_t error; // 0: mapped and the key matched
        std::int32_t step;  // which step failed (steps[] below)
        std::int32_t pad;
    };
    static constexpr const char* steps[] = {"mapped rank 0's shared file", "could not make the shared file",
                                            "could not open rank 0's shared file through /proc",
                                            "found rank 0's shared file of another size",
                                            "could not map rank 0's shared file",
                                            "found another key in rank 0's shared file (a process of another host?)",
                                            "has another host name than rank 0"};

    struct mapping {
        std::byte* base;
        std::size_t bytes;
        std::uint64_t key;
        mapping(void* b, std::size_t n, std::uint64_t k) noexcept : base(static_cast<std::byte*>(b)), bytes(n), key(k) {}
        mapping(const mapping&) = delete;
        mapping& operator=(const mapping&) = delete;
        ~mapping() { ::munmap(base, bytes); }
    };

    // This process's mappings by key: a rank joins the one another rank of its process made.
    static std::shared_ptr<mapping> registered(std::uint64_t key, std::shared_ptr<mapping> made = nullptr)
    {
        static std::mutex lock;
        static std::vector<std::weak_ptr<mapping>> all;
        std::lock_guard hold(lock);
        std::erase_if(all, [](const std::weak_ptr<mapping>& m) { return m.expired(); });
        for (const auto& m : all)
            if (auto live = m.lock(); live && live->key == key)
                return live;
        if (made)
            all.push_back(made);
        return made;
    }

    struct descriptor {
        int fd;
        explicit descriptor(int f) noexcept : fd(f) {}
        descriptor(const descriptor&) = delete;
        descriptor& operator=(const descriptor&) = delete;
        ~descriptor()
        {
            if (fd >= 0)
                ::close(fd);
        }
    };

    void close_pidfds() noexcept
    {
        for (int& fd : pidfds_)
            if (fd >= 0)
                ::close(std::exchange(fd, -1));
    }

    // Ranks on hosts of other names share no memory, even where one kernel runs them all
    // (network and UTS namespaces standing in for hosts): the nodes hierarchical sees.
    static std::array<char, 256> host_name() noexcept
    {
        std::array<char, 256> name{};
        ::gethostname(name.data(), name.size() - 1);
        return name;
    }

    static std::uint64_t fresh_key()
    {
        std::random_device device;
        const auto now = std::uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
        return ((std::uint64_t(device()) << 32) ^ device() ^ now ^ (std::uint64_t(::getpid()) << 17)) | 1;
    }

    // Maps fd, checks its size and key; 0 or the failed step (errno set).
    int map(int fd, std::uint64_t bytes, std::uint64_t key)
    {
        struct stat st {};
        if (::fstat(fd, &st) != 0 || std::uint64_t(st.st_size) != bytes) {
            errno = errno ? errno : EINVAL;
            return 3;
        }
        void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
            return 4;
        auto m = std::make_shared<mapping>(p, bytes, key);
        std::uint64_t seen = 0;
        std::memcpy(&seen, m->base, sizeof seen);
        if (seen != key) {
            errno = EINVAL;
            return 5;
        }
        mapping_ = registered(key, std::move(m));
        return 0;
    }

    std::shared_ptr<mapping> mapping_;
    int rank_ = 0;
    std::vector<int> pids_;
    std::vector<int> pidfds_;
    std::string why_;
};

template <communicator C>
shared_region shared_region::join(C& comm, std::size_t bytes)
{
    const int n = comm.size(), me = comm.rank();
    const int tag = tags::agreement;
    shared_region region;
    region.rank_ = me;
    const std::uint64_t total = std::uint64_t(header_bytes) + bytes;
    auto send = [&](const auto& v, int peer) {
        auto r = comm.isend(std::as_bytes(std::span(&v, 1)), peer, tag);
        comm.wait(r);
    };
    auto receive = [&](auto& v, int peer) {
        auto r = comm.irecv(std::as_writable_bytes(std::span(&v, 1)), peer, tag);
        comm.wait(r);
    };

    // verdict: [first failing rank or -1, its step, its errno, pid of every rank]
    std::vector<std::int32_t> verdict(std::size_t(3 + n), 0);
    if (me == 0) {
        offer o{fresh_key(), total, std::int32_t(::getpid()), -1, 0, 0, host_name()};
        const descriptor made{int(::syscall(SYS_memfd_create, "gradsync", MFD_CLOEXEC))};
        const int fd = made.fd;
        if (fd < 0 || ::ftruncate(fd, off_t(total)) != 0) {
            o.error = errno;
        } else {
            o.fd = fd;
            void* p = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (p == MAP_FAILED) {
                o.error = errno;
                o.fd = -1;
            } else {
                auto m = std::make_shared<mapping>(p, total, o.key);
                std::memcpy(m->base, &o.key, sizeof o.key);
                region.mapping_ = registered(o.key, std::move(m));
            }
        }
        for (int r = 1; r < n; ++r)
            send(o, r);
        std::vector<answer> answers(static_cast<std::size_t>(n));
        answers[0] = {o.pid, o.fd < 0 ? o.error : 0, o.fd < 0 ? 1 : 0, 0};
        for (int r = 1; r < n; ++r)
            receive(answers[std::size_t(r)], r);
        verdict[0] = -1;
        for (int r = 0; r < n; ++r) {
            const answer& a = answers[std::size_t(r)];
            if (verdict[0] < 0 && a.step != 0)
                verdict[0] = r, verdict[1] = a.step, verdict[2] = a.error;
            verdict[std::size_t(3 + r)] = a.pid;
        }
        auto all = std::as_bytes(std::span(verdict));
        for (int r = 1; r < n; ++r) {
            auto q = comm.isend(all, r, tag);
            comm.wait(q);
        }
    } else {
        offer o{};
        receive(o, 0);
        answer a{std::int32_t(::getpid()), 0, 0, 0};
        if (o.fd < 0) {
            a.step = 1;
            a.error = o.error;
        } else if (host_name() != o.host) {
            a.step = 6;
        } else if (!(region.mapping_ = registered(o.key))) { // no rank of this process mapped it yet
            const std::string path = "/proc/" + std::to_string(o.pid) + "/fd/" + std::to_string(o.fd);
            errno = 0;
            const descriptor opened{::open(path.c_str(), O_RDWR | O_CLOEXEC)};
            if (opened.fd < 0) {
                a.step = 2;
                a.error = errno;
            } else {
                a.step = region.map(opened.fd, o.bytes, o.key);
                if (a.step != 0)
                    a.error = errno;
            }
        }
        send(a, 0);
        auto q = comm.irecv(std::as_writable_bytes(std::span(verdict)), 0, tag);
        comm.wait(q);
    }

    region.pids_.assign(verdict.begin() + 3, verdict.end());
    if (verdict[0] >= 0) {
        region.mapping_.reset();
        region.why_ = "rank " + std::to_string(verdict[0]) + " " + steps[verdict[1]] +
            (verdict[2] ? std::string(" (") + std::strerror(verdict[2]) + ")" : std::string());
        return region;
    }
    region.pidfds_.assign(std::size_t(n), -1);
    for (int r = 0; r < n; ++r)
        if (!region.same_process(r))
            region.pidfds_[std::size_t(r)] = int(::syscall(SYS_pidfd_open, region.pids_[std::size_t(r)], 0));
    return region;
}

} // namespace gradsync
