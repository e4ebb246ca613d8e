// position_board: where every rank of a communicator on one host is, in memory those ranks
// share, so that a rank that waits can tell a peer that is late from one that made another
// call (docs/semantics.md, "Call order"). Shared memory sends no message, so no stamp
// (core/tags.hpp) can tell a wait that it waits for a call the peer will never make; the board
// does, for shared memory and messages alike.
//
// A rank's position on a base tag is (seq, tag): seq counts the calls it has begun on that base
// on this board, every collective's alike; tag is the call's stamped tag. Ranks that
// call their collectives in the same order are at the same tag at every seq, so a peer whose
// position has this rank's seq and another tag is at another call at the same point of the
// sequence: neither call can complete. A peer at another seq is late, or done, and is waited
// for. Every rank of a collective uses the board rank 0 offers in the agreement check (its
// file's pid, descriptor and key: file.hpp), and takes rank 0's position on the collective's
// base tag there, so that every rank counts on from the same point even after calls that
// failed on some ranks only: a board can miss a mix-up (a rank that could not open it writes
// nothing), never invent one. One board serves every collective of a communicator: the
// communicator keeps it while it lives (board(), a board_holder, where it has one), so a
// one-shot allreduce() finds it; otherwise rank 0 finds it by the communicator's address
// while a collective holds it.
//
// Each rank has a line of lanes, one per base tag it uses (reducers and the synchronizer use
// different bases, and may run at once on different threads); a position is one 64-bit word,
// written by its rank alone. A call in progress is this thread's current_call, which the
// waits read (stray_tag).
#pragma once

#include <array>
#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include <unistd.h>

#include <gradsync/comm/communicator.hpp>
#include <gradsync/comm/shared/file.hpp>
#include <gradsync/core/hash.hpp>
#include <gradsync/core/tags.hpp>

namespace gradsync {

class position_board {
public:
    static constexpr int lanes = 8;

    // What rank 0 tells the others in its signature (collective/verify.hpp): no board where key
    // is 0.
    struct offer {
        std::uint64_t key = 0;
        std::uint64_t host = 0; // a fingerprint of rank 0's host name
        std::int32_t pid = 0;
        std::int32_t fd = -1;
    };

    // A position: seq in the high half, the call's tag in the low.
    static constexpr std::uint64_t position(std::uint32_t seq, int tag) noexcept
    {
        return (std::uint64_t(seq) << 32) | std::uint32_t(tag);
    }
    static constexpr std::uint32_t seq_of(std::uint64_t p) noexcept { return std::uint32_t(p >> 32); }
    static constexpr int tag_of(std::uint64_t p) noexcept { return int(std::uint32_t(p)); }

    struct lane {
        std::atomic<std::uint32_t> base{0}; // base tag + 1; 0: free
        std::uint32_t pad = 0;
        std::atomic<std::uint64_t> at{0};   // the position
    };

    // Rank 0: a new board for `ranks` ranks; null where no file can be made.
    static std::shared_ptr<position_board> make(int ranks)
    {
        detail::made_file made = detail::make_shared_file(bytes(ranks));
        if (!made.mapping)
            return nullptr;
        auto board = std::shared_ptr<position_board>(new position_board(std::move(made.mapping), ranks));
        board->offer_ = {board->mapping_->key, host(), std::int32_t(::getpid()), made.fd.fd};
        board->fd_ = std::move(made.fd);
        return board;
    }

    // Rank 0: the board of its communicator `comm` (this process's object) of `ranks` ranks,
    // made on first use and shared while any collective holds it; null where no file can be
    // made.
    static std::shared_ptr<position_board> of(const void* comm, int ranks)
    {
        struct entry {
            const void* comm;
            int ranks;
            std::weak_ptr<position_board> board;
        };
        static std::mutex lock;
        static std::vector<entry> all;
        std::lock_guard hold(lock);
        std::erase_if(all, [](const entry& e) { return e.board.expired(); });
        for (const entry& e : all)
            if (e.comm == comm && e.ranks == ranks)
                if (auto live = e.board.lock())
                    return live;
        auto board = make(ranks);
        if (board)
            all.push_back({comm, ranks, board});
        return board;
    }

    // Another rank: the board rank 0 offered, or null where there is none, rank 0 is on
    // another host, or it cannot be opened.
    static std::shared_ptr<position_board> open(const offer& o, int ranks)
    {
        if (o.key == 0 || o.host != host())
            return nullptr;
        std::shared_ptr<detail::shared_mapping> mapping;
        int error = 0;
        if (detail::open_shared_file(o.pid, o.fd, bytes(ranks), o.key, mapping, error) != detail::open_step::mapped)
            return nullptr;
        auto board = std::shared_ptr<position_board>(new position_board(std::move(mapping), ranks));
        board->offer_.key = o.key;
        return board;
    }

    // What rank 0 offers (rank 0's board; elsewhere the key alone).
    const offer& offered() const noexcept { return offer_; }
    std::uint64_t key() const noexcept { return offer_.key; }

    // Rank r's lane for `base`, claimed on first use; null where its lanes all hold other bases.
    lane* claim(int r, int base) const noexcept
    {
        std::array<lane, lanes>& line = line_of(r);
        const auto want = std::uint32_t(base) + 1;
        for (lane& l : line) {
            std::uint32_t held = l.base.load(std::memory_order_acquire);
            if (held == 0 && l.base.compare_exchange_strong(held, want, std::memory_order_acq_rel))
                return &l;
            if (held == want)
                return &l;
        }
        return nullptr;
    }

    // Rank r's position on `base`; 0 where it has none yet.
    std::uint64_t position_of(int r, int base) const noexcept
    {
        const auto want = std::uint32_t(base) + 1;
        for (const lane& l : line_of(r))
            if (l.base.load(std::memory_order_acquire) == want)
                return l.at.load(std::memory_order_acquire);
        return 0;
    }

    int ranks() const noexcept { return ranks_; }

private:
    static constexpr std::size_t header_bytes = 128; // the key, and the lines on 128 bytes
    struct alignas(128) line {
        std::array<lane, lanes> lane_of_base;
    };
    static_assert(sizeof(line) == 128, "a rank's lanes fill one 128-byte line");

    static std::size_t bytes(int ranks) noexcept { return header_bytes + std::size_t(ranks) * sizeof(line); }

    static std::uint64_t host() noexcept
    {
        const std::array<char, 256> name = detail::host_name();
        std::uint64_t h = 0;
        for (char c : name)
            h = detail::mix_in(h, std::uint64_t(static_cast<unsigned char>(c)));
        return h;
    }

    position_board(std::shared_ptr<detail::shared_mapping> mapping, int ranks) noexcept
        : mapping_(std::move(mapping)), ranks_(ranks)
    {
    }

    std::array<lane, lanes>& line_of(int r) const noexcept
    {
        return reinterpret_cast<line*>(mapping_->base + header_bytes)[r].lane_of_base;
    }

    std::shared_ptr<detail::shared_mapping> mapping_;
    int ranks_;
    offer offer_{};
    detail::descriptor fd_; // rank 0's: others open the file through it while the board lives
};

// Where a communicator keeps its position board while it lives (its optional board()), so
// that every collective built on it, one-shot ones included, finds the board instead of
// making or opening one. Any thread; a copy shares the board.
class board_holder {
public:
    board_holder() = default;
    board_holder(const board_holder& o) : board_(o.get()) {}
    board_holder& operator=(const board_holder& o)
    {
        set(o.get());
        return *this;
    }

    std::shared_ptr<position_board> get() const
    {
        std::lock_guard hold(lock_);
        return board_;
    }
    void set(std::shared_ptr<position_board> board)
    {
        std::lock_guard hold(lock_);
        board_ = std::move(board);
    }

private:
    mutable std::mutex lock_;
    std::shared_ptr<position_board> board_;
};

// The collective call this thread is in: its communicator (the collective's own object), its
// board and rank there, and its position. Calls nest (a collective inside another's run), so
// each scope keeps the one it replaced.
struct current_call {
    const void* comm = nullptr;
    const position_board* board = nullptr;
    int rank = 0;
    std::uint64_t at = 0;

    static const current_call*& here() noexcept
    {
        static thread_local const current_call* call = nullptr;
        return call;
    }
};

// A call's position, published for its length: its lane moves to the next seq with the call's
// tag, and the call is this thread's current one. Without a board or a lane, nothing.
class position_scope {
public:
    position_scope(const void* comm, const position_board* board, position_board::lane* lane, int rank, int tag) noexcept
        : outer_(current_call::here())
    {
        if (!board || !lane)
            return;
        const std::uint32_t seq = position_board::seq_of(lane->at.load(std::memory_order_relaxed)) + 1;
        call_ = {comm, board, rank, position_board::position(seq, tag)};
        lane->at.store(call_.at, std::memory_order_release);
        current_call::here() = &call_;
    }
    position_scope(const position_scope&) = delete;
    position_scope& operator=(const position_scope&) = delete;
    ~position_scope() { current_call::here() = outer_; }

private:
    const current_call* outer_;
    current_call call_{};
};

// Whether a wait in `call` (a thread's current call, or none), on `tag` with rank `peer` of the
// communicator at `comm`, waits for a call that peer will not make: the tag of the call the
// peer is at instead (same base, same seq, another call), else -1. A wait of another
// communicator or tag than the call's is not the call's, and is not looked at.
inline int stray_tag_in(const current_call* call, const void* comm, int peer, int tag) noexcept
{
    if (!call || call->comm != comm || position_board::tag_of(call->at) != tag || peer < 0 ||
        peer >= call->board->ranks())
        return -1;
    const std::uint64_t theirs = call->board->position_of(peer, tag & tags::base_mask);
    if (position_board::seq_of(theirs) != position_board::seq_of(call->at) || theirs == call->at)
        return -1;
    return position_board::tag_of(theirs);
}

// stray_tag_in for this thread's current call. comm is the collective's communicator, or a
// subgroup of it (parent() and parent_rank()), whose peer is numbered in the parent.
template <class C>
int stray_tag(const C& comm, int peer, int tag) noexcept
{
    if constexpr (requires { comm.parent(); { comm.parent_rank(peer) } -> std::convertible_to<int>; })
        return stray_tag(comm.parent(), comm.parent_rank(peer), tag);
    else
        return stray_tag_in(current_call::here(), &comm, peer, tag);
}

} // namespace gradsync
