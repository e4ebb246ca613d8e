// shared_peers: the ranks of one plan on a shared region (region.hpp), laid out as a progress
// line per rank (progress.hpp), then a slot per rank (a copy of its data, for ranks of other
// processes), then an exchange area per rank (small values every peer reads, such as Adasum's
// triples). What every shared-memory plan needs besides its arithmetic: the region made when
// the plan is built, the flags, the waits that name what ended them, and, for threads of one
// process, reading each other's buffers in place.
//
// Threads of one process work on each other's buffers (direct()): a rank publishes its
// buffer's address with its first flag of a call, and reads a peer's buffer only inside
// reading_all(), which a peer that left with an error cannot be in. Processes built on a
// shared_buffer (buffer.hpp) have no slots of their own: a rank's data must lie in its slot
// of that buffer, it publishes the data's offset there, and its peers work on it in place.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <time.h>

#include <gradsync/comm/communicator.hpp>
#include <gradsync/comm/shared/board.hpp>
#include <gradsync/comm/shared/buffer.hpp>
#include <gradsync/comm/shared/progress.hpp>
#include <gradsync/comm/shared/region.hpp>
#include <gradsync/core/error.hpp>

namespace gradsync {

// What a plan does where its ranks cannot share memory: throw usage_error on every rank (a
// plan the user named), or stay unusable on every rank alike (a selector's candidate, which
// then passes messages).
enum class sharing { required, if_possible };

class shared_peers {
public:
    // Collective: every rank of comm, with the same sizes, `buffer` (a shared one replaces the
    // slots, which then take no room) and `need`. `who` names the plan in errors.
    template <communicator C>
    shared_peers(C& comm, std::string who, std::size_t slot_bytes, std::size_t exchange_bytes,
                 const shared_buffer* buffer, sharing need)
        : rank_(comm.rank()), size_(comm.size()),
          buffer_(buffer && buffer->shared() ? buffer : nullptr), slot_bytes_(buffer_ ? 0 : round_up(slot_bytes, 128)),
          exchange_bytes_(round_up(exchange_bytes, 128)), who_(std::move(who))
    {
        if (buffer && (buffer->rank() != rank_ || buffer->size() != size_))
            throw usage_error(who_ + ": the shared_buffer is rank " + std::to_string(buffer->rank()) + " of " +
                              std::to_string(buffer->size()) + " ranks, this communicator's rank " +
                              std::to_string(rank_) + " of " + std::to_string(size_) +
                              ": make it on the reducer's communicator");
        if (!gradsync::may_share_memory(comm)) {
            if (need == sharing::if_possible)
                return;
            throw usage_error(who_ + ": this communicator's messages stand for a link (may_share_memory() is "
                                     "false); shared memory would bypass it");
        }
        const std::size_t lines = round_up(std::size_t(size_) * sizeof(progress_line), 4096);
        region_ = shared_region::join(comm, lines + std::size_t(size_) * (slot_bytes_ + exchange_bytes_));
        if (!region_.usable()) {
            if (need == sharing::if_possible)
                return;
            throw usage_error(who_ + ": the ranks cannot share memory: " + region_.why() +
                              "; shared_memory needs every rank on one host (use automatic or hierarchical across hosts)");
        }
        lines_ = reinterpret_cast<progress_line*>(region_.data()); // the file's zero pages: every step 0
        slots_ = region_.data() + lines;
        for (int r = 0; r < size_; ++r)
            direct_ = direct_ && region_.same_process(r);
    }

    shared_peers(const shared_peers&) = delete;
    shared_peers& operator=(const shared_peers&) = delete;

    int rank() const noexcept { return rank_; }
    int size() const noexcept { return size_; }
    // Whether the ranks share memory; false (on every rank alike) only with sharing::if_possible.
    bool usable() const noexcept { return lines_ != nullptr; }
    // Whether every rank is a thread of this process, so buffers are read in place.
    bool direct() const noexcept { return direct_; }
    const std::string& who() const noexcept { return who_; }
    // The number of the call begun last (counting from 1), for errors.
    std::uint32_t call() const noexcept { return calls_; }
    // A call begins: from now until end_call() this rank's peers may read and write its data,
    // so every way out of the call before end_call() must depart().
    std::uint32_t begin_call() noexcept
    {
        open_ = true;
        return ++calls_;
    }
    // After the call's last wait: no peer touches this rank's data again in this call.
    void end_call() noexcept { open_ = false; }
    // The bytes of this rank's slot, where it copies its data (none for threads or on a
    // shared_buffer).
    std::size_t slot_bytes() const noexcept { return direct_ ? 0 : slot_bytes_; }

    // This rank's slot, `count` elements: data kept there is shared with no copy. Empty on a
    // shared_buffer, where the data lies in the buffer instead.
    template <class T>
    std::span<T> own_slot(std::size_t count) const noexcept
    {
        if (buffer_)
            return {};
        return {slot<T>(rank_), count};
    }
    template <class T>
    T* exchange_area(int r) const noexcept
    {
        return reinterpret_cast<T*>(slots_ + std::size_t(size_) * slot_bytes_ + std::size_t(r) * exchange_bytes_);
    }

    // Rank r's copy of the data this call: this rank's `own`, a peer's published buffer
    // (threads), its data in its slot of the shared_buffer, or its slot (processes).
    template <class T>
    T* copy_of(int r, T* own) const noexcept
    {
        if (r == rank_)
            return own;
        const std::uintptr_t published = lines_[r].address.load(std::memory_order_relaxed);
        if (direct_)
            return reinterpret_cast<T*>(published);
        return buffer_ ? reinterpret_cast<T*>(buffer_->slot(r) + published) : slot<T>(r);
    }

    // Before the first flag of a call: makes this rank's `count` elements at `data` readable by
    // its peers. Threads read them where they lie (the address is published), as do processes
    // on a shared_buffer (the offset in this rank's slot is published; data elsewhere is a
    // usage_error); a process copies into its slot every element outside [owned_begin,
    // owned_end), the part it works on itself, unless data is its slot. Whether take_back()
    // is to copy the results back.
    template <class T>
    bool share(T* data, std::size_t count, std::size_t owned_begin, std::size_t owned_end)
    {
        if (buffer_ && !buffer_->holds(data, count))
            throw usage_error(prefix() + "the data (" + std::to_string(count) +
                              " elements) does not lie in this rank's slot of the shared_buffer the plan was built "
                              "on; keep it there, or build the reducer without one");
        if (!direct_ && buffer_) {
            lines_[rank_].address.store(std::uintptr_t(reinterpret_cast<std::byte*>(data) - buffer_->slot(rank_)),
                                        std::memory_order_relaxed);
            return false;
        }
        lines_[rank_].address.store(reinterpret_cast<std::uintptr_t>(data), std::memory_order_relaxed);
        T* mine = slot<T>(rank_);
        if (direct_ || data == mine)
            return false;
        std::memcpy(mine, data, owned_begin * sizeof(T));
        std::memcpy(mine + owned_end, data + owned_end, (count - owned_end) * sizeof(T));
        return true;
    }
    // After the last flag of a call: the elements outside [owned_begin, owned_end) copied
    // back from this rank's slot, where its peers wrote them.
    template <class T>
    void take_back(T* data, std::size_t count, std::size_t owned_begin, std::size_t owned_end) const noexcept
    {
        const T* mine = slot<T>(rank_);
        std::memcpy(data, mine, owned_begin * sizeof(T));
        std::memcpy(data + owned_end, mine + owned_end, (count - owned_end) * sizeof(T));
    }
    void raise(std::uint32_t step) noexcept { lines_[rank_].raise(step); }
    // This rank leaves a call with an error, if it is in one: peers waiting on it end at once,
    // and none reads its buffer after this returns. The plan is then done with (the
    // collective refuses its later calls).
    void depart() noexcept
    {
        if (std::exchange(open_, false))
            lines_[rank_].depart();
    }

    // Waits until every peer has raised `step`, within one deadline for them all, or throws
    // what ended the wait, naming the peer and `what` it was waited for: foreign_message_error
    // when the peer is at another call (the position board says so: comm/shared/board.hpp;
    // `tag` is this call's), aborted_error when it left the call with an error or comm was
    // released, communication_error when its process has exited, deadline_error at comm's
    // deadline. The peer's position is looked at first, so every rank that waits on a peer
    // at another call names it, even after that peer has left with its own error.
    template <communicator C>
    void wait_all(C& comm, std::uint32_t step, const char* what, int tag)
    {
        using clock = std::chrono::steady_clock;
        for (int spin = 0; spin < 4096; ++spin) {
            if (first_late(step) < 0)
                return;
            if (spin % 64 == 63)
                std::this_thread::yield();
            else
                cpu_relax();
        }
        const std::chrono::nanoseconds deadline = wait_deadline(comm);
        const clock::time_point start = clock::now();
        const timespec tick{0, 1'000'000};
        const auto waited = [&](int peer) {
            return prefix() + "waiting for " + what + " of rank " + std::to_string(peer) + ": ";
        };
        for (;;) {
            const int late = first_late(step);
            if (late < 0)
                return;
            lines_[late].await_step(step, tick);
            for (int k = 1; k < size_; ++k) {
                const int peer = (rank_ + k) % size_;
                if (lines_[peer].reached(step))
                    continue;
                if (const int found = stray_tag(comm, peer, tag); found >= 0 && !lines_[peer].reached(step))
                    throw foreign_message_error(waited(peer) + "rank " + std::to_string(peer) +
                                                    " is at the call with tag " + std::to_string(found),
                                                peer, tag, found);
                if (lines_[peer].departed())
                    throw aborted_error(waited(peer) + "that rank left the call with an error");
                if (region_.exited(peer))
                    throw communication_error(waited(peer) + "its process (pid " +
                                              std::to_string(region_.pid_of(peer)) + ") has exited");
            }
            const bool released = is_released(comm);
            if (released || (deadline.count() && clock::now() - start >= deadline)) {
                const auto [ranks, count] = late_ranks(step);
                if (count == 0)
                    return; // every peer came meanwhile
                const std::string waited_all = prefix() + "waiting for " + what + " of " + ranks + ": ";
                if (released)
                    throw aborted_error(waited_all + "this rank was released");
                throw deadline_error(waited_all + (count == 1 ? "it" : "they") + " did not come within " +
                                     std::to_string(std::chrono::duration<double>(deadline).count()) + " s");
            }
        }
    }

    // f() while every peer's buffer may be read and written (threads); a peer that has left
    // with an error is an aborted_error here.
    template <class F>
    void reading_all(F&& f)
    {
        if (!direct_)
            return f();
        int entered = 0;
        struct exit_guard {
            progress_line* lines;
            int rank, size;
            int& entered;
            ~exit_guard()
            {
                for (int k = 1; k <= entered; ++k)
                    lines[(rank + k) % size].leave();
            }
        } guard{lines_, rank_, size_, entered};
        for (int k = 1; k < size_; ++k, ++entered)
            if (!lines_[(rank_ + k) % size_].enter())
                throw aborted_error(prefix() + "reading the data of rank " + std::to_string((rank_ + k) % size_) +
                                    ": that rank left the call with an error");
        f();
    }

private:
    template <class T>
    T* slot(int r) const noexcept
    {
        return reinterpret_cast<T*>(slots_ + std::size_t(r) * slot_bytes_);
    }

    static std::size_t round_up(std::size_t x, std::size_t to) { return (x + to - 1) / to * to; }

    std::string prefix() const { return who_ + ": call " + std::to_string(calls_) + ": "; }

    // The first peer, after this rank, that has not raised `step`; -1 when none.
    int first_late(std::uint32_t step) const noexcept
    {
        for (int k = 1; k < size_; ++k)
            if (!lines_[(rank_ + k) % size_].reached(step))
                return (rank_ + k) % size_;
        return -1;
    }

    // "rank 2", "ranks 0 and 2", "ranks 0, 2 and 5": the peers that have not raised `step`, and
    // how many.
    std::pair<std::string, std::size_t> late_ranks(std::uint32_t step) const
    {
        std::vector<int> late;
        for (int peer = 0; peer < size_; ++peer)
            if (peer != rank_ && !lines_[peer].reached(step))
                late.push_back(peer);
        std::string text = late.size() == 1 ? "rank " : "ranks ";
        for (std::size_t i = 0; i < late.size(); ++i)
            text += (i == 0 ? "" : i + 1 == late.size() ? " and " : ", ") + std::to_string(late[i]);
        return {text, late.size()};
    }

    int rank_, size_;
    const shared_buffer* buffer_; // a shared one, or none
    std::size_t slot_bytes_, exchange_bytes_;
    std::string who_;
    shared_region region_;
    progress_line* lines_ = nullptr;
    std::byte* slots_ = nullptr;
    bool direct_ = true;
    bool open_ = false; // between begin_call() and end_call()
    std::uint32_t calls_ = 0;
};

} // namespace gradsync
