// gloo_communicator: the communicator concept over a gloo::Context's unbound buffers (Gloo's
// TCP or libuv transport), for clusters without MPI and for PyTorch's CPU processes. The
// caller builds and connects the context (rendezvous.hpp, file_store.hpp); docs/gloo.md, "What
// the communicator does", is the contract: messages on the caller's memory matched by a slot
// (prefix, a digest of the byte count, the tag), because Gloo reports no byte count; pooled
// buffers (detail/buffer_pool.hpp); optional eager messages (detail/eager.hpp); Gloo's
// failures and deadlines turned into named errors that close the context's connections, so
// peers fail instead of hanging (detail/watchdog.hpp); and, since Gloo cannot cancel, a
// dropped request or a released wait closes the pair to its peer.
#pragma once

#include <gloo/context.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/unbound_buffer.h>

#include <array>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <gradsync/comm/communicator.hpp>
#include <gradsync/comm/detail/owned_request.hpp>
#include <gradsync/comm/gloo/detail/buffer_pool.hpp>
#include <gradsync/comm/gloo/detail/eager.hpp>
#include <gradsync/comm/gloo/detail/sigpipe.hpp>
#include <gradsync/comm/gloo/detail/watchdog.hpp>
#include <gradsync/comm/shared/board.hpp>
#include <gradsync/core/error.hpp>
#include <gradsync/core/hash.hpp>
#include <gradsync/core/tags.hpp>

#include <unistd.h> // gethostname

namespace gradsync {

struct gloo_options {
    // Longest time one wait() may block; zero: the context's timeout (gloo::Context::setTimeout).
    std::chrono::milliseconds deadline{0};
    // The top byte of every slot; communicators sharing a context need different ones.
    std::uint8_t slot_prefix = 0x67;
    // Most unbound buffers kept for reuse.
    std::size_t pool_limit = 4096;
    // Messages of at most this many bytes go eagerly, into receives posted ahead; 0: none.
    std::size_t eager_bytes = 0;
    // Eager messages per peer in flight before a send waits for the receiver to take one.
    std::size_t eager_depth = 4;
};

namespace detail {

// 24 bits that change with every bit of a byte count.
constexpr std::uint64_t size_digest(std::size_t bytes) noexcept { return mix(bytes) >> 40; }

} // namespace detail

class gloo_communicator {
    using clock = std::chrono::steady_clock;

public:
    // A request's record; requests are detail::owned_request<request_state>.
    class request_state {
        friend class gloo_communicator;

    protected:
        request_state() = default;

        void take(request_state& o) noexcept
        {
            comm_ = o.comm_;
            buffer_ = std::exchange(o.buffer_, nullptr);
            eager_ = std::exchange(o.eager_, {});
            bytes_ = o.bytes_;
            send_ = o.send_;
            peer_ = o.peer_;
            tag_ = o.tag_;
        }

        void abandon() noexcept
        {
            if (buffer_)
                comm_->abandon(std::exchange(buffer_, nullptr), peer_, "a request was dropped before its wait");
            if (eager_.pending)
                comm_->abandon(*this, "a request was dropped before its wait");
        }

        gloo_communicator* comm_ = nullptr;
        detail::gloo_buffer* buffer_ = nullptr; // a direct message's pooled buffer
        detail::gloo_eager_request eager_;      // an eager message's
        std::size_t bytes_ = 0;
        bool send_ = false;
        int peer_ = 0;
        int tag_ = 0;
    };
    using request = detail::owned_request<request_state>;

    explicit gloo_communicator(std::shared_ptr<gloo::Context> context, gloo_options options = {})
        : context_(not_null(std::move(context))), options_(options), pool_(options.pool_limit),
          watchdog_(*context_, slot_of(sentinel_slot))
    {
        if (options_.deadline.count() < 0)
            throw usage_error("gradsync::gloo_communicator: the deadline must not be negative");
        if (options_.slot_prefix == 0 || options_.slot_prefix <= 0x08)
            throw usage_error("gradsync::gloo_communicator: slot_prefix " + std::to_string(options_.slot_prefix) +
                              " is one of Gloo's own (0 to 8)");
        if (options_.pool_limit == 0)
            throw usage_error("gradsync::gloo_communicator: pool_limit must be at least 1");
        if (options_.eager_bytes && options_.eager_depth == 0)
            throw usage_error("gradsync::gloo_communicator: eager_depth must be at least 1 when eager_bytes is set");
        if (options_.eager_bytes > max_eager_bytes)
            throw usage_error("gradsync::gloo_communicator: eager_bytes " + std::to_string(options_.eager_bytes) +
                              " is above " + std::to_string(max_eager_bytes) + "; larger messages gain nothing");
        rank_ = context_->rank;
        size_ = context_->size;
        if (options_.eager_bytes)
            eager_.emplace(*this, slot_of(mailbox_slot), slot_of(count_slot));
    }

    gloo_communicator(const gloo_communicator&) = delete;
    gloo_communicator& operator=(const gloo_communicator&) = delete;

    // The largest gloo_options::eager_bytes.
    static constexpr std::size_t max_eager_bytes = std::size_t(16) << 20;

    int rank() const noexcept { return rank_; }
    int size() const noexcept { return size_; }
    // The slot carries 32 bits of tag: every stamp bit (core/tags.hpp) fits.
    int tag_limit() const noexcept { return INT_MAX; }
    // A send leaves only once its receiver has announced the receive: exchanges post theirs
    // first, so that the announcement is on its way before the send is posted.
    bool receives_first() const noexcept { return true; }
    const gloo_options& options() const noexcept { return options_; }
    const std::shared_ptr<gloo::Context>& context() const noexcept { return context_; }
    // Unbound buffers held for reuse, busy or idle.
    std::size_t pooled() const noexcept { return pool_.size(); }

    // Ranks per node (hierarchical{.ranks_per_node = 0}); collective. The ranks exchange host
    // names on the agreement check's tag (both run while a plan is built, in the same order on
    // every rank): nodes must hold equal numbers of consecutive ranks, otherwise every rank
    // throws usage_error.
    int ranks_per_node()
    {
        using name = std::array<char, 256>;
        std::vector<name> names(std::size_t(size_), name{});
        ::gethostname(names[std::size_t(rank_)].data(), names[std::size_t(rank_)].size() - 1);
        std::vector<request> q;
        q.reserve(2 * std::size_t(size_));
        for (int p = 0; p < size_; ++p)
            if (p != rank_) {
                q.push_back(irecv(std::as_writable_bytes(std::span(names[std::size_t(p)])), p, tags::agreement));
                q.push_back(isend(std::as_bytes(std::span(names[std::size_t(rank_)])), p, tags::agreement));
            }
        for (request& r : q)
            wait(r);
        int k = 1;
        while (k < size_ && names[std::size_t(k)] == names[0])
            ++k;
        bool even = size_ % k == 0;
        for (int p = 0; even && p < size_; ++p) // each block of k one host, no host in two blocks
            for (int q = 0; even && q < size_; q += k)
                even = (names[std::size_t(p)] == names[std::size_t(q)]) == (p / k == q / k);
        if (!even)
            throw usage_error(prefix() + "nodes do not hold equal numbers of consecutive ranks; give "
                                         "hierarchical{.ranks_per_node} explicitly");
        return k;
    }

    // Ends every wait, now and later, with aborted_error (comm/communicator.hpp); any thread.
    void release() noexcept { watchdog_.release(); }
    bool released() const noexcept { return watchdog_.released(); }
    // Where the collectives built on this communicator keep their position board
    // (comm/shared/board.hpp).
    board_holder& board() noexcept { return board_; }
    // The longest a wait may block: gloo_options::deadline, else the context's timeout.
    std::chrono::milliseconds deadline() const
    {
        return options_.deadline.count() ? options_.deadline : context_->getTimeout();
    }

    request isend(std::span<const std::byte> data, int peer, int tag)
    {
        return post(true, const_cast<std::byte*>(data.data()), data.size(), peer, tag);
    }

    request irecv(std::span<std::byte> data, int peer, int tag)
    {
        return post(false, data.data(), data.size(), peer, tag);
    }

    void wait(request& r)
    {
        watchdog_.watch({current_call::here(), this, r.peer_, r.tag_});
        const struct unwatch {
            detail::gloo_watchdog& w;
            ~unwatch() { w.watch({}); }
        } unwatched{watchdog_};
        if (r.eager_.pending)
            return eager_->wait(r.eager_, r.send_, r.bytes_, r.peer_, r.tag_);
        detail::gloo_buffer* b = r.buffer_;
        if (!b)
            return;
        const auto what = [&] { return describe(r.send_, r.bytes_, r.peer_, r.tag_); };
        bool done = false;
        try {
            done = block(*b->buffer, r.peer_, r.send_, clock::now(), what);
        } catch (...) {
            r.buffer_ = nullptr;
            b->stale = true;
            throw;
        }
        r.buffer_ = nullptr;
        if (!done) {
            abandon(b, r.peer_, "a wait was released");
            throw aborted_error(prefix() + what() + " was released");
        }
        b->busy = false;
    }

private:
    friend class detail::gloo_eager<gloo_communicator>;

    static std::shared_ptr<gloo::Context> not_null(std::shared_ptr<gloo::Context> context)
    {
        if (!context)
            throw usage_error("gradsync::gloo_communicator: the context is null");
        return context;
    }

    request post(bool send, std::byte* p, std::size_t n, int peer, int tag)
    {
        const char* call = send ? "isend" : "irecv";
        if (tag < 0)
            throw usage_error(prefix() + call + ": tag " + std::to_string(tag) + " is negative");
        if (peer < 0 || peer >= size_ || peer == rank_)
            throw usage_error(prefix() + call + " to peer " + std::to_string(peer) + ": " +
                              (peer == rank_ ? "Gloo has no pair from a rank to itself" : "out of range"));
        if (watchdog_.released())
            throw aborted_error(prefix() + call + " refused: the communicator was released");
        if (!failure_.empty())
            throw communication_error(prefix() + call + " refused: the communicator failed earlier: " + failure_);
        detail::block_sigpipe();
        if (options_.eager_bytes && n <= options_.eager_bytes) {
            request r = make_request(send, n, peer, tag);
            r.eager_ = eager_->post(send, p, n, peer, tag);
            return r;
        }
        detail::gloo_buffer* b = acquire(p, n);
        const std::uint64_t slot = slot_of((detail::size_digest(n) << 32) | std::uint64_t(std::uint32_t(tag)));
        try {
            if (send)
                b->buffer->send(peer, slot, 0, n);
            else
                b->buffer->recv(peer, slot, 0, n);
        } catch (const std::exception& e) {
            b->stale = true;
            const std::string why = describe(send, n, peer, tag) + " could not start: " + e.what();
            fail(why);
            throw communication_error(prefix() + why);
        }
        b->busy = true;
        request r = make_request(send, n, peer, tag);
        r.buffer_ = b;
        return r;
    }

    request make_request(bool send, std::size_t n, int peer, int tag)
    {
        request r;
        r.comm_ = this;
        r.send_ = send;
        r.bytes_ = n;
        r.peer_ = peer;
        r.tag_ = tag;
        return r;
    }

    // The slot of `low` (the digest and tag bits) under this communicator's prefix; the
    // mailboxes use low bits no tag reaches (tags are below 2^31).
    std::uint64_t slot_of(std::uint64_t low) const noexcept { return (std::uint64_t(options_.slot_prefix) << 56) | low; }
    static constexpr std::uint64_t mailbox_slot = 0xffffffff, count_slot = 0xfffffffe, sentinel_slot = 0xfffffffd;

    // --- waiting

    // Waits for b's send or receive with `peer`, at most what is left of the deadline since
    // start; false when release() ended it. Gloo's failures, the pair's included where Gloo
    // does not pass it on (gloo/detail/watchdog.hpp), become errors and fail the communicator.
    template <class What>
    bool block(gloo::transport::UnboundBuffer& b, int peer, bool send, clock::time_point start, const What& what)
    {
        const std::chrono::milliseconds whole = deadline(),
                                        left = std::max(std::chrono::milliseconds(1),
                                                        whole - std::chrono::duration_cast<std::chrono::milliseconds>(
                                                                    clock::now() - start));
        try {
            return watchdog_.wait(b, peer, send, left);
        } catch (const foreign_message_error& e) {
            const std::string why = what() + ", " + e.what();
            fail(why);
            throw foreign_message_error(prefix() + "waiting for " + why, e.peer(), e.expected(), e.found());
        } catch (const std::exception& e) {
            const std::string gloo = e.what();
            if (gloo.find("Timed out") != std::string::npos) {
                const std::string why = what() + " did not complete within the deadline of " + seconds(whole) +
                    " s: the peer is late, gone, at another call, or sent another size; Gloo closed the "
                    "context's connections";
                fail(why);
                throw deadline_error(prefix() + why);
            }
            const std::string why = what() + " failed: " + gloo;
            fail(why);
            throw communication_error(prefix() + why);
        }
    }

    detail::gloo_buffer* acquire(std::byte* p, std::size_t n)
    {
        try {
            return &pool_.acquire(*context_, p, n);
        } catch (const std::exception& e) {
            throw communication_error(prefix() + "creating an unbound buffer of " + std::to_string(n) +
                                      " bytes failed: " + e.what());
        }
    }

    // b's operation stays pending in Gloo, which cannot cancel it: closing the pair to the
    // peer guarantees nothing lands in b's memory later, and fails the peer's waits.
    void abandon(detail::gloo_buffer* b, int peer, const char* why) noexcept
    {
        b->stale = true;
        left_pending(why, peer);
    }

    void abandon(request_state& r, const char* why) noexcept { eager_->abandon(r.eager_, r.peer_, why); }

    void left_pending(const char* why, int peer) noexcept
    {
        try {
            std::string what = why; // appended, not chained: GCC 12 misreads the chain here
            what += " (rank ";
            what += std::to_string(peer);
            what += ')';
            fail(what);
        } catch (...) {
        }
        close_pair(peer);
    }

    // Closes the pair to `peer` (a hard close: the peer sees it at once). Gloo tells the
    // waits on it nothing; the watchdog ends them with this communicator's failure.
    void close_pair(int peer) noexcept
    {
        try {
            if (auto& pair = context_->getPair(peer))
                pair->close();
            watchdog_.closed(peer, "this side closed the connection to rank " + std::to_string(peer) +
                                       (failure_.empty() ? "" : " after: " + failure_));
        } catch (...) {
        }
    }

    bool usable() const noexcept { return !watchdog_.released() && failure_.empty(); }

    void fail(const std::string& why) noexcept
    {
        detail::take_sigpipe(); // one a failed write raised on this thread (gloo/detail/sigpipe.hpp)
        if (failure_.empty()) {
            try {
                failure_ = why;
            } catch (...) {
            }
        }
    }

    std::string prefix() const { return "gradsync::gloo_communicator (" + where(*this) + "): "; }

    static std::string describe(bool send, std::size_t bytes, int peer, int tag)
    {
        return std::string(send ? "a send of " : "a receive of ") + std::to_string(bytes) + " bytes " +
            (send ? "to" : "from") + " rank " + std::to_string(peer) + " (tag " + std::to_string(tag) + ")";
    }

    static std::string seconds(std::chrono::milliseconds t)
    {
        return std::to_string(std::chrono::duration<double>(t).count());
    }

    std::shared_ptr<gloo::Context> context_;
    gloo_options options_;
    int rank_ = 0, size_ = 1;
    detail::gloo_buffer_pool pool_;
    std::string failure_; // the first failure; posts are refused after it
    detail::gloo_watchdog watchdog_; // every wait goes through it; release() too
    board_holder board_;
    // Last: its destructor, collective, drains the mailboxes while the members above live.
    std::optional<detail::gloo_eager<gloo_communicator>> eager_;
};

} // namespace gradsync
