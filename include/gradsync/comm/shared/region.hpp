// shared_region: memory that every rank of a group maps, made through the group's communicator
// when a plan is built, so that ranks of one host read each other's data where it lies.
//
// Rank 0 makes an anonymous file (file.hpp) and sends every rank its pid, descriptor, key and
// host name; each maps it (or joins its process's mapping) and answers. A rank whose host
// name is not rank 0's does not try: it is another node (as hierarchical counts nodes), even
// where one kernel runs both. Rank 0 closes its descriptor once every rank has answered. A rank
// that cannot map it (another host or PID namespace, /proc hidden, no memory) says why, and
// rank 0 tells every rank the verdict, so the region is usable on every rank or on none.
//
// For ranks of other processes a region holds a watch on each peer's process (a pidfd), so a
// wait can tell a peer that died from one that is slow. The watches are this process's, one
// per peer process however many regions it has (a trainer's buckets, a backend's cached
// reducers), so descriptors stay O(peers), not O(regions).
#pragma once

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <gradsync/comm/communicator.hpp>
#include <gradsync/comm/shared/file.hpp>
#include <gradsync/core/error.hpp>
#include <gradsync/core/tags.hpp>

namespace gradsync {

namespace detail {

// A watch on another process: whether it has exited, through a pidfd where the kernel has
// them, else by kill(pid, 0).
class process_watch {
public:
    explicit process_watch(int pid) noexcept : pid_(pid), fd_(int(::syscall(SYS_pidfd_open, pid, 0))) {}
    process_watch(const process_watch&) = delete;
    process_watch& operator=(const process_watch&) = delete;

    int pid() const noexcept { return pid_; }
    bool exited() const noexcept
    {
        if (fd_.fd >= 0) {
            pollfd p{fd_.fd, POLLIN, 0};
            return ::poll(&p, 1, 0) > 0;
        }
        return ::kill(pid_, 0) != 0 && errno == ESRCH;
    }

    // This process's watch on `pid`, shared by every region that has it as a peer. A watch
    // whose process has exited is not handed out again: the pid may be another process's now.
    static std::shared_ptr<const process_watch> of(int pid)
    {
        static std::mutex lock;
        static std::vector<std::weak_ptr<const process_watch>> all;
        std::lock_guard hold(lock);
        std::erase_if(all, [](const std::weak_ptr<const process_watch>& w) { return w.expired(); });
        for (const auto& w : all)
            if (auto live = w.lock(); live && live->pid() == pid && !live->exited())
                return live;
        auto made = std::make_shared<const process_watch>(pid);
        all.push_back(made);
        return made;
    }

private:
    int pid_;
    descriptor fd_;
};

} // namespace detail

class shared_region {
public:
    // The bytes before data(): the key, and room so that data() starts on a page.
    static constexpr std::size_t header_bytes = 4096;

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
        const auto& watch = watches_[std::size_t(r)];
        return watch && watch->exited();
    }

private:
    struct offer {
        std::uint64_t key;
        std::uint64_t bytes;
        std::int32_t pid;
        std::int32_t fd;    // -1: rank 0 could not make the file
        std::int32_t error; // errno of that
        std::int32_t pad;
        std::array<char, 256> host; // rank 0's host name
    };
    struct answer {
        std::int32_t pid;
        std::int32_t error; // errno of the failed step
        detail::open_step step;
        std::int32_t pad;
    };

    std::shared_ptr<detail::shared_mapping> mapping_;
    int rank_ = 0;
    std::vector<int> pids_;
    std::vector<std::shared_ptr<const detail::process_watch>> watches_; // none for this process's ranks
    std::string why_;
};

template <communicator C>
shared_region shared_region::join(C& comm, std::size_t bytes)
{
    using detail::open_step;
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
        offer o{0, total, std::int32_t(::getpid()), -1, 0, 0, detail::host_name()};
        detail::made_file made = detail::make_shared_file(total); // its descriptor closes when join returns
        if (made.mapping) {
            o.key = made.mapping->key;
            o.fd = made.fd.fd;
            region.mapping_ = std::move(made.mapping);
        }
        o.error = made.error;
        for (int r = 1; r < n; ++r)
            send(o, r);
        std::vector<answer> answers(static_cast<std::size_t>(n));
        answers[0] = {o.pid, o.error, o.fd < 0 ? open_step::not_made : open_step::mapped, 0};
        for (int r = 1; r < n; ++r)
            receive(answers[std::size_t(r)], r);
        verdict[0] = -1;
        for (int r = 0; r < n; ++r) {
            const answer& a = answers[std::size_t(r)];
            if (verdict[0] < 0 && a.step != open_step::mapped)
                verdict[0] = r, verdict[1] = std::int32_t(a.step), verdict[2] = a.error;
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
        answer a{std::int32_t(::getpid()), 0, open_step::mapped, 0};
        if (o.fd < 0) {
            a.step = open_step::not_made;
            a.error = o.error;
        } else if (detail::host_name() != o.host) {
            a.step = open_step::other_host;
        } else {
            a.step = detail::open_shared_file(o.pid, o.fd, o.bytes, o.key, region.mapping_, a.error);
        }
        send(a, 0);
        auto q = comm.irecv(std::as_writable_bytes(std::span(verdict)), 0, tag);
        comm.wait(q);
    }

    region.pids_.assign(verdict.begin() + 3, verdict.end());
    if (verdict[0] >= 0) {
        region.mapping_.reset();
        region.why_ = "rank " + std::to_string(verdict[0]) + " " + detail::describe(open_step(verdict[1])) +
            (verdict[2] ? std::string(" (") + std::strerror(verdict[2]) + ")" : std::string());
        return region;
    }
    region.watches_.resize(std::size_t(n));
    for (int r = 0; r < n; ++r)
        if (!region.same_process(r))
            region.watches_[std::size_t(r)] = detail::process_watch::of(region.pids_[std::size_t(r)]);
    return region;
}

} // namespace gradsync
