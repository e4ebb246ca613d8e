// Shared memory: the ranks of one host reduce straight from each other's data, and no
// message is sent. Rank j combines block j (block_of, as the ring) from every rank's copy of
// it, where that copy lies, finishes it, and writes the finished block into every other
// rank's copy, where nobody else reads block j. Ranks move on by two flags per call, in a
// cache line per rank (comm/shared/progress.hpp): "my data is there", then "my block is in
// your copies"; once a rank has seen every peer's second flag, no peer touches its memory
// again in this call, so it returns with no closing barrier. Threads of one process publish
// their buffer's address and work on the buffers themselves; processes work on their slots
// of a shared region (comm/shared/region.hpp) made when the plan is built, and copy a buffer
// of their own in and out.
//
// Cost (N ranks, M bytes per rank; the link is the host's memory: alpha per flag handed
// between cores, beta per byte copied, gamma per byte combined; planner::shared_memory_cost,
// checked by tests/test_cost_formulas.cpp), for threads and for gradients kept in the plan's
// buffer(): two flags from each peer, N-1 blocks combined into this rank's block and the
// finished block written into N-1 copies. A process's own buffer adds 2*(N-1)/N*M*beta: the
// blocks its peers combine copied in, the finished blocks copied out.
// cost: 2*(N-1)*alpha + (N-1)/N*M*beta + (N-1)/N*M*gamma
// The combine takes block j from the N copies a tile at a time, so the running sum stays in
// the first-level cache and is written out once per copy. For 2 ranks that is about 2 M bytes
// of memory traffic per rank in the buffer (3.5 M for ring over MPI's single copy), 4 M for a
// process's own buffer.
//
// Preconditions: every rank on one host, in processes that can open each other's /proc
// entries (the same user and PID namespace), or threads of one process; any N and count;
// elementwise policies in host memory. Building the plan is collective (it makes the region);
// where the ranks cannot share one it throws usage_error on every rank, naming the rank and
// the reason. Rank j alone computes block j, in the ring's order
// ((g_j + g_{j+1}) + ...) + g_{j+N-1}, indices mod N, and finishes it, so every rank ends
// with the same bits, NaN payloads included, and the result equals ring's bit for bit.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <gradsync/comm/shared/progress.hpp>
#include <gradsync/comm/shared/region.hpp>
#include <gradsync/core/codes.hpp>
#include <gradsync/plan/plan.hpp>

namespace gradsync {

struct shared_memory {
    static constexpr std::uint32_t code = codes::shared_memory;
    static constexpr const char* name = "shared_memory";
};

// Policy: an elementwise policy; host memory only (the plan table's row).
template <element T, communicator C, class Policy, class Memory = host_memory>
class shared_memory_plan : public plan_types<shared_memory, C, std::span<T>> {
    static_assert(std::is_same_v<Memory, host_memory>, "gradsync::shared_memory_plan runs in host memory");

public:
    shared_memory_plan(C& comm, const layer_layout& layout, const plan_options<shared_memory>&)
        : rank_(comm.rank()), size_(comm.size()), count_(layout.total()),
          slot_(round_up(count_ * sizeof(T), 128) / sizeof(T)),
          who_("gradsync::shared_memory (" + where(comm) + ")")
    {
        const std::size_t lines = round_up(std::size_t(size_) * sizeof(progress_line), 4096);
        region_ = shared_region::join(comm, lines + std::size_t(size_) * slot_ * sizeof(T));
        if (!region_.usable())
            throw usage_error(who_ + ": the ranks cannot share memory: " + region_.why() +
                              "; shared_memory needs every rank on one host (use automatic or hierarchical across hosts)");
        lines_ = reinterpret_cast<progress_line*>(region_.data()); // the file's zero pages: every step 0
        slots_ = reinterpret_cast<T*>(region_.data() + lines);
        for (int r = 0; r < size_; ++r)
            direct_ = direct_ && region_.same_process(r);
    }

    shared_memory_plan(const shared_memory_plan&) = delete;
    shared_memory_plan& operator=(const shared_memory_plan&) = delete;

    std::size_t count() const noexcept { return count_; }
    std::size_t scratch_bytes() const noexcept { return direct_ ? 0 : count_ * sizeof(T); }
    // Whether peers read this rank's buffer in place (every rank in this process).
    bool direct() const noexcept { return direct_; }
    // This rank's slot of the region, count() elements: gradients kept there are reduced with
    // no copy in (run() on this span). Valid while the plan lives.
    std::span<T> buffer() const noexcept { return {slot(rank_), count_}; }

    void run(C& comm, std::span<T> data, int)
    {
        if (size_ == 1 || count_ == 0) {
            Policy::template finish<T>(data, size_);
            return;
        }
        const std::uint32_t finished = 2 * ++calls_, published = finished - 1;
        const bool in_slot = data.data() == slot(rank_);
        const block mine_b = block_of(count_, size_, rank_);
        progress_line& mine = lines_[rank_];
        try {
            if (direct_) {
                mine.address.store(reinterpret_cast<std::uintptr_t>(data.data()), std::memory_order_relaxed);
            } else if (!in_slot) { // the blocks peers combine; its own it combines where it is
                std::memcpy(slot(rank_), data.data(), mine_b.begin * sizeof(T));
                std::memcpy(slot(rank_) + mine_b.end, data.data() + mine_b.end, (count_ - mine_b.end) * sizeof(T));
            }
            mine.raise(published);
            for (int k = 1; k < size_; ++k)
                wait(comm, peer(k), published, "the data");
            combine_and_hand_out(data, mine_b);
            mine.raise(finished);
            for (int k = 1; k < size_; ++k) {
                wait(comm, peer(k), finished, "the finished block");
                if (!direct_ && !in_slot) {
                    const block b = block_of(count_, size_, peer(k));
                    std::memcpy(data.data() + b.begin, slot(rank_) + b.begin, (b.end - b.begin) * sizeof(T));
                }
            }
        } catch (...) {
            mine.depart();
            throw;
        }
    }

private:
    static constexpr std::size_t tile_bytes = 16384; // the running sum's tile: it stays in L1

    static std::size_t round_up(std::size_t x, std::size_t to) { return (x + to - 1) / to * to; }

    int peer(int k) const noexcept { return (rank_ + k) % size_; }
    T* slot(int r) const noexcept { return slots_ + std::size_t(r) * slot_; }

    // Rank r's copy of the vector this call: its buffer (threads) or its slot (processes).
    T* copy_of(int r) const noexcept
    {
        return direct_ ? reinterpret_cast<T*>(lines_[r].address.load(std::memory_order_relaxed)) : slot(r);
    }

    // This rank's block b, tile by tile: combined from every copy in the ring's order,
    // finished, and written into every peer's copy.
    void combine_and_hand_out(std::span<T> data, block b)
    {
        reading_all([&] {
            const std::size_t tile = std::max<std::size_t>(1, tile_bytes / sizeof(T));
            for (std::size_t at = b.begin; at < b.end; at += tile) {
                const std::size_t n = std::min(tile, b.end - at);
                const std::span<T> acc = data.subspan(at, n);
                for (int k = 1; k < size_; ++k)
                    Policy::template combine<T>(acc, std::span<const T>(copy_of(peer(k)) + at, n));
                Policy::template finish<T>(acc, size_);
                for (int k = 1; k < size_; ++k)
                    std::memcpy(copy_of(peer(k)) + at, acc.data(), n * sizeof(T));
            }
        });
    }

    // f() while every peer's buffer may be read and written (threads); a peer gone is an
    // error here.
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
                gone((rank_ + k) % size_);
        f();
    }

    [[noreturn]] void gone(int p) const
    {
        throw aborted_error(who_ + ": call " + std::to_string(calls_) + ": combining the data of rank " + std::to_string(p) +
                            ": that rank left the call with an error");
    }

    void wait(C& comm, int peer, std::uint32_t step, const char* what)
    {
        const std::chrono::nanoseconds deadline = wait_deadline(comm);
        const progress_wait ended = wait_for(
            lines_[peer], step, deadline, [&] { return is_released(comm); }, [&] { return region_.exited(peer); });
        if (ended == progress_wait::reached)
            return;
        const std::string waited = who_ + ": call " + std::to_string(calls_) + ": waiting for " + what + " of rank " +
            std::to_string(peer) + ": ";
        switch (ended) {
        case progress_wait::gone: throw aborted_error(waited + "that rank left the call with an error");
        case progress_wait::released: throw aborted_error(waited + "this rank was released");
        case progress_wait::exited:
            throw communication_error(waited + "its process (pid " + std::to_string(region_.pid_of(peer)) +
                                      ") has exited");
        default:
            throw deadline_error(waited + "it did not come within " +
                                 std::to_string(std::chrono::duration<double>(deadline).count()) + " s");
        }
    }

    int rank_, size_;
    std::size_t count_, slot_;
    std::string who_;
    shared_region region_;
    progress_line* lines_ = nullptr;
    T* slots_ = nullptr;
    bool direct_ = true;
    std::uint32_t calls_ = 0;
};

} // namespace gradsync
