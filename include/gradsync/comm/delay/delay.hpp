// delay_communicator: any communicator behind an emulated network link, so that a cluster's
// alpha-beta costs can be reproduced on one machine.
//
// Cost model: every rank owns one outgoing link; messages leave it one after another. A
// message of n bytes posted at time t occupies the link for alpha + beta*n:
//     due = max(t, link_free) + alpha + beta*n,   link_free = due
// The send's wait() completes at `due` (the link is busy until then) and the matching
// receive's wait() no earlier than `due` (its arrival). Incoming traffic is not limited
// (full duplex), so a pairwise exchange costs one message time and a ring allreduce of M
// bytes over N ranks 2(N-1) alpha + 2(N-1)/N M beta, plus the real compute time.
//
// Arrival time: every payload is preceded by an 8-byte header holding `due` (nanoseconds of
// std::chrono::steady_clock) on the same peer and tag; the non-overtaking rule pairs each
// header with its payload. steady_clock is CLOCK_MONOTONIC, which all processes of one host
// share, so the scheme also holds for MPI ranks on one host (not across hosts, whose clocks
// differ). Each message thus costs two messages of the inner transport. Header slots come
// from a pool that grows to the most messages ever in flight, so requests stay movable and
// a warm communicator allocates nothing per message. Waits sleep (sleep_until_due below).
//
// Preconditions: alpha and beta finite and non-negative; both sides of every message are
// delay_communicators (a header must meet a header). Like the communicators it wraps, it is
// driven by one thread at a time. rank(), size(), eager_limit(), tag_limit(), receives_first(),
// ranks_per_node(), check_thread_support() and release() are the inner communicator's, and its
// errors pass through. It never shares memory (may_share_memory() is false): its messages
// are the link.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <gradsync/comm/communicator.hpp>
#include <gradsync/core/error.hpp>

namespace gradsync {

// Parameters of the emulated link.
struct emulated_link {
    double alpha = 0; // seconds per message
    double beta = 0;  // seconds per byte
};

namespace detail {

// Sleeps until shortly before `due`, then spins until it: the kernel's timer slack (50 us by
// default) would make a plain sleep late, and a longer spin would take the core that a rank
// running as a thread beside this one needs. The spin does not yield: on a loaded machine a
// yield can hand the core away for a whole scheduler tick. Never returns before `due`.
inline void sleep_until_due(std::chrono::steady_clock::time_point due)
{
    constexpr auto spin = std::chrono::microseconds(50);
    if (std::chrono::steady_clock::now() + spin < due)
        std::this_thread::sleep_until(due - spin);
    while (std::chrono::steady_clock::now() < due) {
    }
}

} // namespace detail

template <communicator C>
class delay_communicator {
    using clock = std::chrono::steady_clock;

public:
    class request {
    public:
        request() = default;
        request(request&& o) noexcept(std::is_nothrow_move_constructible_v<typename C::request>)
            : header_(std::move(o.header_)), payload_(std::move(o.payload_)), slot_(std::exchange(o.slot_, nullptr))
        {
        }
        request& operator=(request&& o) noexcept(std::is_nothrow_move_assignable_v<typename C::request>)
        {
            header_ = std::move(o.header_);
            payload_ = std::move(o.payload_);
            slot_ = std::exchange(o.slot_, nullptr);
            return *this;
        }

    private:
        friend class delay_communicator;
        typename C::request header_;
        typename C::request payload_;
        // The header's slot in the owner's pool; null once waited (or never posted). A
        // request dropped before its wait() retires the slot: the transport may still
        // write into it, so it is never handed out again.
        std::int64_t* slot_ = nullptr;
    };

    delay_communicator(C& inner, emulated_link link) : inner_(&inner), link_(link)
    {
        if (!(std::isfinite(link.alpha) && link.alpha >= 0 && std::isfinite(link.beta) && link.beta >= 0))
            throw usage_error("gradsync::delay_communicator (" + where(inner) + "): alpha (" +
                              std::to_string(link.alpha) + " s) and beta (" + std::to_string(link.beta) +
                              " s/byte) must be finite and non-negative");
    }

    delay_communicator(const delay_communicator&) = delete;
    delay_communicator& operator=(const delay_communicator&) = delete;

    int rank() const { return inner_->rank(); }
    int size() const { return inner_->size(); }
    std::size_t eager_limit() const { return gradsync::eager_limit(*inner_); }
    int tag_limit() const { return gradsync::tag_limit(*inner_); }
    bool receives_first() const { return gradsync::receives_first(*inner_); }
    void release()
        requires releasable<C>
    {
        inner_->release();
    }
    bool released() const { return gradsync::is_released(*inner_); }
    std::chrono::nanoseconds deadline() const { return gradsync::wait_deadline(*inner_); }
    // Its messages stand for the emulated link: shared memory would bypass it.
    bool may_share_memory() const noexcept { return false; }
    int ranks_per_node() const
        requires requires(const C& c) { { c.ranks_per_node() } -> std::convertible_to<int>; }
    {
        return inner_->ranks_per_node();
    }
    void check_thread_support(const char* who) const
        requires requires(const C& c, const char* w) { c.check_thread_support(w); }
    {
        inner_->check_thread_support(who);
    }

    C& inner() const noexcept { return *inner_; }
    emulated_link link() const noexcept { return link_; }

    request isend(std::span<const std::byte> data, int peer, int tag)
    {
        const clock::time_point due = std::max(clock::now(), link_free_) + cost(data.size());
        request r;
        r.slot_ = acquire();
        *r.slot_ = std::chrono::duration_cast<std::chrono::nanoseconds>(due.time_since_epoch()).count();
        r.header_ = inner_->isend(std::as_bytes(std::span<const std::int64_t>(r.slot_, 1)), peer, tag);
        r.payload_ = inner_->isend(data, peer, tag);
        link_free_ = due;
        return r;
    }

    request irecv(std::span<std::byte> data, int peer, int tag)
    {
        request r;
        r.slot_ = acquire();
        r.header_ = inner_->irecv(std::as_writable_bytes(std::span<std::int64_t>(r.slot_, 1)), peer, tag);
        r.payload_ = inner_->irecv(data, peer, tag);
        return r;
    }

    void wait(request& r)
    {
        if (!r.slot_)
            return;
        inner_->wait(r.header_);
        inner_->wait(r.payload_);
        const clock::time_point due{std::chrono::duration_cast<clock::duration>(std::chrono::nanoseconds(*r.slot_))};
        free_.push_back(std::exchange(r.slot_, nullptr));
        detail::sleep_until_due(due);
    }

private:
    clock::duration cost(std::size_t bytes) const
    {
        return std::chrono::ceil<clock::duration>(std::chrono::duration<double>(link_.alpha + link_.beta * double(bytes)));
    }

    // The pool grows to the largest number of messages in flight, then allocates nothing.
    std::int64_t* acquire()
    {
        if (!free_.empty()) {
            std::int64_t* slot = free_.back();
            free_.pop_back();
            return slot;
        }
        std::int64_t* slot = &slots_.emplace_back(0);
        free_.reserve(slots_.size());
        return slot;
    }

    C* inner_;
    emulated_link link_;
    clock::time_point link_free_{};
    std::deque<std::int64_t> slots_; // stable addresses
    std::vector<std::int64_t*> free_;
};

} // namespace gradsync
