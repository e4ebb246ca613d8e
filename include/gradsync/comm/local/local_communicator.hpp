// local_communicator: one rank of a local_group (comm/local/local.hpp), and how its
// messages meet.
//
// Transport: single-copy rendezvous. A send and a receive are matched in per-rank mailboxes
// (MPI's non-overtaking order per source and tag); whichever side arrives second copies the
// bytes straight from the sender's buffer into the receiver's, outside every lock, so two
// pairs exchanging large messages copy in parallel. Waiting first polls with
// sched_yield, then sleeps on the rank's condition variable: a busy spin takes the core a
// peer may need, and sleeping at once pays for waking (docs/results.md, "local_group
// against memcpy").
//
// A local_communicator belongs to its rank's thread: post and wait from that thread only.
// With local_options::deadline, a wait that lasts longer (a peer that never sends or never
// receives) throws deadline_error naming the rank, the peer, the tag and how many of its
// waits had completed, and so aborts the group. A receive that waits longer than a
// millisecond also looks at the peer's oldest unmatched send to this rank: one stamped for
// another reducer or call (core/tags.hpp) ends the wait in foreign_message_error. release()
// ends the rank's waits in aborted_error (comm/communicator.hpp).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstring>
#include <span>
#include <string>
#include <thread>
#include <utility>

#include <gradsync/comm/communicator.hpp>
#include <gradsync/comm/detail/owned_request.hpp>
#include <gradsync/comm/shared/board.hpp>
#include <gradsync/comm/local/detail/mailbox.hpp>
#include <gradsync/core/error.hpp>
#include <gradsync/core/tags.hpp>

namespace gradsync {

// How a group moves a matched message's bytes. function returns nullptr on success, else
// what failed (both requests then fail with a communication_error). gradsync::device_copy
// (<gradsync/comm/local/device_copy.hpp>) moves GPU memory, so ranks sharing a GPU exchange
// device buffers directly.
struct local_copy {
    const char* (*function)(void* dst, const void* src, std::size_t bytes) = nullptr; // null: std::memcpy
    bool device_memory = false; // whether function moves device memory
};

struct local_options {
    // Longest time one wait() may block; zero waits forever.
    std::chrono::nanoseconds deadline{0};
    local_copy copy{};
};

class local_communicator {
public:
    // A request's record; requests are detail::owned_request<request_state>.
    class request_state {
        friend class local_communicator;

    protected:
        request_state() = default;
        void take(request_state& o) noexcept
        {
            comm_ = o.comm_;
            op_ = std::exchange(o.op_, nullptr);
        }
        void abandon() noexcept
        {
            if (op_)
                comm_->abandon(std::exchange(op_, nullptr));
        }
        local_communicator* comm_ = nullptr;
        detail::local_op* op_ = nullptr;
    };
    using request = detail::owned_request<request_state>;

    local_communicator(detail::local_ranks& ranks, const local_options& options, int rank)
        : ranks_(&ranks), options_(&options), rank_(rank)
    {
    }

    int rank() const noexcept { return rank_; }
    int size() const noexcept { return ranks_->size(); }
    // All ranks share one process, hence one node (for hierarchical{.ranks_per_node = 0}).
    int ranks_per_node() const noexcept { return size(); }
    // Whether isend/irecv take device memory (local_options::copy).
    bool device_memory() const noexcept { return options_->copy.device_memory; }
    int tag_limit() const noexcept { return INT_MAX; }
    std::chrono::nanoseconds deadline() const noexcept { return options_->deadline; }
    // Whether this rank was released, by release() or because another rank failed.
    bool released() const noexcept
    {
        return (*ranks_)[rank_].released.load(std::memory_order_acquire) ||
            ranks_->aborted.load(std::memory_order_acquire);
    }

    // Where the collectives built on this communicator keep their position board
    // (comm/shared/board.hpp).
    board_holder& board() noexcept { return board_; }

    // Ends this rank's waits, now and later in this run(), with aborted_error; any thread.
    void release() noexcept
    {
        self().released.store(true, std::memory_order_release);
        self().wake();
    }

    request isend(std::span<const std::byte> data, int peer, int tag)
    {
        detail::local_op* op = post(true, peer, tag, data.data(), nullptr, data.size());
        return start(op, (*ranks_)[peer]);
    }

    request irecv(std::span<std::byte> data, int peer, int tag)
    {
        return start(post(false, peer, tag, nullptr, data.data(), data.size()), self());
    }

    void wait(request& r)
    {
        detail::local_op* op = r.op_;
        if (!op)
            return;
        detail::local_rank_state& me = self();
        const auto deadline = options_->deadline;
        auto settled = [&] {
            return op->state.load(std::memory_order_acquire) != 0 || ranks_->aborted.load(std::memory_order_acquire) ||
                me.released.load(std::memory_order_acquire);
        };
        for (int polls = 0; polls < yields_before_sleep && !settled(); ++polls)
            std::this_thread::yield();
        if (!settled())
            block_until_settled(r, deadline, settled);
        if (op->state.load(std::memory_order_acquire) == 0) {
            const bool released = me.released.load(std::memory_order_acquire);
            // A peer at another call named before the release that may have come of it, so that
            // every rank waiting on it says why.
            throw_if_stray(r);
            r.abandon();
            throw aborted_error("gradsync::local_group: " + where(*this) +
                                (released ? " was released" : " released because another rank failed"));
        }
        ++me.waits;
        r.op_ = nullptr;
        if (op->state.load(std::memory_order_acquire) == 2) {
            std::string msg = std::move(op->failure);
            recycle(op);
            throw communication_error(msg);
        }
        recycle(op);
    }

private:
    detail::local_rank_state& self() noexcept { return (*ranks_)[rank_]; }

    // Sleeps until settled, the deadline, or, for a receive, a foreign message from its peer
    // (looked for once every probe_every).
    template <class Settled>
    void block_until_settled(request& r, std::chrono::nanoseconds deadline, Settled& settled)
    {
        using clock = std::chrono::steady_clock;
        constexpr auto probe_every = std::chrono::milliseconds(1);
        detail::local_op* op = r.op_;
        detail::local_rank_state& me = self();
        const clock::time_point start = clock::now();
        std::unique_lock lock(me.sleep_mutex);
        for (;;) {
            clock::time_point next = clock::now() + probe_every;
            if (deadline.count())
                next = std::min(next, start + deadline);
            if (me.woken.wait_until(lock, next, settled))
                return;
            lock.unlock();
            // settled() again after the probe: the receive may have completed, and the peer
            // moved on to its next call, since wait_until last looked.
            if (!op->is_send)
                if (const int found = foreign_tag(*op); found >= 0 && !settled()) {
                    const std::string what = describe(*op);
                    const int peer = op->peer, tag = op->tag;
                    r.abandon();
                    throw foreign_message_error("gradsync::local_group: " + where(*this) + ": waiting for " + what +
                                                    ", rank " + std::to_string(peer) + "'s next message has tag " +
                                                    std::to_string(found),
                                                peer, tag, found);
                }
            if (op->state.load(std::memory_order_acquire) == 0)
                throw_if_stray(r);
            if (deadline.count() && clock::now() - start >= deadline) {
                const std::string what = describe(*op);
                r.abandon();
                throw deadline_error("gradsync::local_group: " + where(*this) + ": " + what + " did not complete within " +
                                     std::to_string(std::chrono::duration<double>(deadline).count()) + " s (after " +
                                     std::to_string(me.waits) + " completed waits of this rank)");
            }
            lock.lock();
        }
    }

    // Throws foreign_message_error where the peer of r's operation, still open, is at another
    // call on the position board (comm/shared/board.hpp).
    void throw_if_stray(request& r)
    {
        const detail::local_op& op = *r.op_;
        const int found = stray_tag(*this, op.peer, op.tag);
        if (found < 0 || op.state.load(std::memory_order_acquire) != 0)
            return;
        const std::string what = describe(op);
        const int peer = op.peer, tag = op.tag;
        r.abandon();
        throw foreign_message_error("gradsync::local_group: " + where(*this) + ": waiting for " + what + ", rank " +
                                        std::to_string(peer) + " is at the call with tag " + std::to_string(found),
                                    peer, tag, found);
    }

    // The tag of the peer's oldest unmatched send to this rank if another reducer or call
    // stamped it (core/tags.hpp), else -1.
    int foreign_tag(const detail::local_op& recv)
    {
        detail::local_rank_state& me = self();
        std::lock_guard lock(me.mutex);
        for (const detail::local_op* o = me.sends.head; o; o = o->next)
            if (o->owner == recv.peer)
                return tags::foreign(o->tag, recv.tag) ? o->tag : -1;
        return -1;
    }

    detail::local_op* post(bool is_send, int peer, int tag, const std::byte* src, std::byte* dst, std::size_t n)
    {
        if (peer < 0 || peer >= size())
            throw usage_error("gradsync::local_communicator: " + where(*this) + ": peer " + std::to_string(peer) +
                              " is out of range");
        detail::local_rank_state& me = self();
        if (me.released.load(std::memory_order_acquire))
            throw aborted_error("gradsync::local_communicator: " + where(*this) + ": " +
                                (is_send ? "isend" : "irecv") + " refused: this rank was released");
        detail::local_op* op;
        if (me.free_ops.empty()) {
            op = &me.pool.emplace_back();
        } else {
            op = me.free_ops.back();
            me.free_ops.pop_back();
        }
        op->is_send = is_send;
        op->owner = rank_;
        op->peer = peer;
        op->tag = tag;
        op->src = src;
        op->dst = dst;
        op->size = n;
        op->state.store(0, std::memory_order_relaxed);
        return op;
    }

    void recycle(detail::local_op* op) noexcept { self().free_ops.push_back(op); }

    static std::string describe(const detail::local_op& op)
    {
        return std::string(op.is_send ? "a send to rank " : "a receive from rank ") + std::to_string(op.peer) + " (tag " +
            std::to_string(op.tag) + ", " + std::to_string(op.size) + " bytes)";
    }

    // Called by whichever side matched second; the copy runs outside every lock.
    // Matches op with the oldest pending operation of the other kind between the same two
    // ranks and tag in box, the receiver's mailbox, where both kinds wait; or queues it there.
    request start(detail::local_op* op, detail::local_rank_state& box)
    {
        detail::local_queue& same = op->is_send ? box.sends : box.recvs;
        detail::local_queue& other = op->is_send ? box.recvs : box.sends;
        detail::local_op* match;
        {
            std::lock_guard lock(box.mutex);
            match = other.take([&](const detail::local_op* o) {
                return o->owner == op->peer && o->peer == op->owner && o->tag == op->tag;
            });
            if (!match)
                same.push(op);
        }
        if (match && op->is_send)
            transfer(op, match);
        else if (match)
            transfer(match, op);
        request r;
        r.comm_ = this;
        r.op_ = op;
        return r;
    }

    void transfer(detail::local_op* send, detail::local_op* recv)
    {
        if (send->size != recv->size) {
            const std::string msg = "gradsync::local_group: message from rank " + std::to_string(send->owner) +
                " to rank " + std::to_string(recv->owner) + " (tag " + std::to_string(send->tag) + ") has " +
                std::to_string(send->size) + " bytes but the receive expects " + std::to_string(recv->size);
            send->failure = msg;
            recv->failure = msg;
            complete(send, 2);
            complete(recv, 2);
            return;
        }
        const char* failed = nullptr;
        if (send->size && options_->copy.function)
            failed = options_->copy.function(recv->dst, send->src, send->size);
        else if (send->size)
            std::memcpy(recv->dst, send->src, send->size);
        if (failed) {
            const std::string msg = "gradsync::local_group: copying the message from rank " +
                std::to_string(send->owner) + " to rank " + std::to_string(recv->owner) + " (tag " +
                std::to_string(send->tag) + ") failed: " + failed;
            send->failure = msg;
            recv->failure = msg;
            complete(send, 2);
            complete(recv, 2);
            return;
        }
        complete(send, 1);
        complete(recv, 1);
    }

    void complete(detail::local_op* op, int state) noexcept
    {
        detail::local_rank_state& owner = (*ranks_)[op->owner];
        op->state.store(state, std::memory_order_release);
        owner.wake();
    }

    // A request dropped without wait(): unlink it if still unmatched, otherwise let the
    // (non-blocking) copy in progress finish, then recycle it.
    void abandon(detail::local_op* op) noexcept
    {
        detail::local_rank_state& box = (*ranks_)[op->is_send ? op->peer : op->owner];
        bool unlinked;
        {
            std::lock_guard lock(box.mutex);
            auto same = [op](const detail::local_op* o) { return o == op; };
            unlinked = (op->is_send ? box.sends.take(same) : box.recvs.take(same)) != nullptr;
        }
        if (!unlinked) {
            detail::local_rank_state& me = self();
            std::unique_lock lock(me.sleep_mutex);
            me.woken.wait(lock, [op] { return op->state.load(std::memory_order_acquire) != 0; });
        }
        recycle(op);
    }

    // Waiting polls with sched_yield before it sleeps: a sleeping vCPU takes tens of
    // microseconds to wake on a virtual machine, while yielding still hands the core to a
    // peer that shares it.
    static constexpr int yields_before_sleep = 256;

    detail::local_ranks* ranks_;
    const local_options* options_;
    int rank_;
    board_holder board_;
};

} // namespace gradsync
