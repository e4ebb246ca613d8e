// gloo_watchdog: the waits of one gloo_communicator, ended with their pair's error when the
// pair fails, and at once by release().
//
// Why: when a pair fails (its peer died), Gloo hands the error to the buffers of the
// receives it has pending and of the sends still waiting for their receivers, but not to a
// message it is in the middle of: a send queued on the socket (a large one, or one behind
// it) or a receive it has begun to read. A pair closed by this side (Pair::close) tells no
// buffer at all. A wait on such a buffer would last until the deadline: with a minute of
// timeout, a minute; with PyTorch's default, half an hour.
//
// How: every peer's pair carries a sentinel, a receive posted on a slot on which nothing is
// ever sent, so Gloo gives it the pair's error. A thread per communicator wakes every `tick`
// and, while a wait is in progress, probes the sentinel of that wait's pair (abortWaitRecv
// then waitRecv: it throws the error if there is one, returns at once if not). Once the pair
// has been seen failed on `patience` ticks in a row, the thread aborts the wait, which then
// throws the pair's error. Gloo reports an abort before a completion it has not yet handed
// to its waiter; the patience means that takes a waiter held back by the scheduler for
// two ticks after its message arrived, with the peer gone meanwhile. Waiting costs the
// waiting thread an uncontended mutex twice and no system call; the thread wakes only on
// its ticks. Sentinels are never destroyed while Gloo may write into them: nothing is sent
// to their slot.
#pragma once

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gradsync/comm/gloo/detail/sigpipe.hpp>
#include <gradsync/comm/shared/board.hpp>
#include <gradsync/core/error.hpp>

namespace gradsync::detail {

class gloo_watchdog {
public:
    static constexpr std::chrono::milliseconds tick{100};
    static constexpr int patience = 3;

    // Posts the sentinels on `sentinel_slot`, a slot of `context` on which nothing is ever
    // sent.
    gloo_watchdog(gloo::Context& context, std::uint64_t sentinel_slot)
        : peers_(post_sentinels(context, sentinel_slot, &sentinel_byte_)), thread_([this] { watch(); })
    {
    }
    gloo_watchdog(const gloo_watchdog&) = delete;
    gloo_watchdog& operator=(const gloo_watchdog&) = delete;
    ~gloo_watchdog()
    {
        {
            std::lock_guard lock(mutex_);
            stop_ = true;
        }
        wake_.notify_one();
        thread_.join();
    }

    // The request the waits to come are for, in `call` (a thread's current call, or none) on
    // the communicator at `comm`: on every tick the thread also looks at where its peer is on
    // the position board (comm/shared/board.hpp), and ends the wait where the peer is at
    // another call. Cleared by a default position_watch.
    struct position_watch {
        const current_call* call = nullptr;
        const void* comm = nullptr;
        int peer = 0;
        int tag = 0;
    };
    void watch(const position_watch& w) noexcept
    {
        std::lock_guard lock(mutex_);
        watch_ = w;
    }

    // Waits for b's send to or receive from `peer`, at most `limit`; false when release()
    // ended it. Gloo's exceptions pass through (its timeout's too), and so does the pair's
    // error when the watchdog ended the wait; a peer at another call is a
    // foreign_message_error.
    bool wait(gloo::transport::UnboundBuffer& b, int peer, bool send, std::chrono::milliseconds limit)
    {
        {
            std::lock_guard lock(mutex_);
            if (released_.load())
                return false;
            buffer_ = &b;
            peer_ = peer;
            send_ = send;
            aborted_ = false;
            failed_ticks_ = 0;
            stray_ = -1;
        }
        bool done = false;
        try {
            done = send ? b.waitSend(nullptr, limit) : b.waitRecv(nullptr, limit);
        } catch (...) {
            forget();
            throw;
        }
        const auto [aborted, error, stray] = forget();
        if (done && aborted)
            clear_abort(b, send);
        if (!done && error)
            std::rethrow_exception(error);
        if (!done && stray >= 0)
            throw foreign_message_error("rank " + std::to_string(watch_.peer) + " is at the call with tag " +
                                            std::to_string(stray),
                                        watch_.peer, watch_.tag, stray);
        return done;
    }

    // This side closed the pair to `peer`, which Gloo tells no wait: the watchdog ends them
    // with `why`.
    void closed(int peer, const std::string& why) noexcept
    {
        std::lock_guard lock(mutex_);
        peer_state& p = peers_[std::size_t(peer)];
        if (!p.error)
            p.error = std::make_exception_ptr(std::runtime_error(why));
    }

    // Ends the wait in progress, and every later one; any thread.
    void release() noexcept
    {
        std::lock_guard lock(mutex_);
        released_.store(true);
        abort();
    }

    bool released() const noexcept { return released_.load(); }

private:
    struct peer_state {
        std::unique_ptr<gloo::transport::UnboundBuffer> sentinel; // none for this rank
        std::exception_ptr error;                                  // the pair's, once seen
    };

    // A sentinel that cannot be posted leaves its pair's error in place of its probe: the
    // peer may have left already, which concerns only the waits that involve it.
    static std::vector<peer_state> post_sentinels(gloo::Context& context, std::uint64_t slot, char* byte)
    {
        block_sigpipe(); // posting a receive writes its announcement
        std::vector<peer_state> peers(std::size_t(context.size));
        for (int p = 0; p < context.size; ++p)
            if (p != context.rank) {
                peer_state& s = peers[std::size_t(p)];
                try {
                    s.sentinel = context.createUnboundBuffer(byte, 1);
                    s.sentinel->recv(p, slot, 0, 1);
                } catch (...) {
                    s.error = std::current_exception();
                }
            }
        return peers;
    }

    void watch()
    {
        std::unique_lock lock(mutex_);
        while (!stop_) {
            wake_.wait_for(lock, tick);
            if (!buffer_ || aborted_)
                continue;
            if (const int found = stray_tag_in(watch_.call, watch_.comm, watch_.peer, watch_.tag); found >= 0) {
                stray_ = found;
                abort();
                continue;
            }
            if (!failed(peers_[std::size_t(peer_)]))
                failed_ticks_ = 0;
            else if (++failed_ticks_ >= patience)
                abort();
        }
    }

    // Whether p's pair has failed, keeping its error. Holding mutex_.
    static bool failed(peer_state& p) noexcept
    {
        if (!p.error && p.sentinel) {
            p.sentinel->abortWaitRecv();
            p.error = clear_abort(*p.sentinel, false);
        }
        return p.error != nullptr;
    }

    // Holding mutex_.
    void abort() noexcept
    {
        if (!buffer_)
            return;
        aborted_ = true;
        if (send_)
            buffer_->abortWaitSend();
        else
            buffer_->abortWaitRecv();
    }

    struct ended {
        bool aborted;
        std::exception_ptr error;
        int stray;
    };

    ended forget() noexcept
    {
        std::lock_guard lock(mutex_);
        buffer_ = nullptr;
        const bool failed = aborted_ && !released_.load() && stray_ < 0;
        return {aborted_, failed ? peers_[std::size_t(peer_)].error : nullptr, stray_};
    }

    // Clears an abort set on b: a wait returns at once while one is set, and clears it; or
    // throws the pair's error, which is returned. Used to probe a sentinel, and to take back
    // an abort that came after the wait had taken its completion (left set, it would end b's
    // next wait; if the pair failed meanwhile, b's next wait reports it).
    static std::exception_ptr clear_abort(gloo::transport::UnboundBuffer& b, bool send) noexcept
    {
        try {
            if (send)
                b.waitSend(nullptr, std::chrono::hours(1));
            else
                b.waitRecv(nullptr, std::chrono::hours(1));
        } catch (...) {
            return std::current_exception();
        }
        return nullptr;
    }

    char sentinel_byte_ = 0; // never written: nothing is sent to the sentinels
    std::mutex mutex_;       // guards what follows, but released_'s reads
    std::condition_variable wake_;
    std::vector<peer_state> peers_;
    bool stop_ = false;
    std::atomic<bool> released_{false};
    gloo::transport::UnboundBuffer* buffer_ = nullptr; // the wait in progress
    int peer_ = 0;
    bool send_ = false;
    bool aborted_ = false;
    int failed_ticks_ = 0;
    position_watch watch_;
    int stray_ = -1; // the tag of the call the peer is at, where that ended the wait
    std::thread thread_; // last: starts once the members above exist
};

} // namespace gradsync::detail
