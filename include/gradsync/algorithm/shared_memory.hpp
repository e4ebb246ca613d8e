// Shared memory: the ranks of one host reduce straight from each other's data, and no
// message is sent. Rank j combines block j (block_of, as the ring) from every rank's copy of
// it, where that copy lies, in rank order, finishes it, and writes the finished block into
// every other rank's copy, where nobody else reads block j. Ranks move on by two flags per call, in a
// cache line per rank (comm/shared/progress.hpp): "my data is there", then "my block is in
// your copies"; once a rank has seen every peer's second flag, no peer touches its memory
// again in this call, so it returns with no closing barrier. Threads of one process publish
// their buffer's address and work on the buffers themselves; processes work on their slots
// of a shared region (comm/shared/region.hpp) made when the plan is built, and copy a buffer
// of their own in and out, or, for a plan built on a shared_buffer (comm/shared/buffer.hpp),
// on the data itself in the ranks' parts of that buffer.
//
// Cost (N ranks, M bytes per rank; the link is the host's memory: alpha per flag handed
// between cores, beta per byte copied, gamma per byte combined; planner::shared_memory_cost,
// checked by tests/test_cost_formulas.cpp), for threads and for gradients kept in the plan's
// buffer() or in a shared_buffer: two flags from each peer, N-1 blocks combined into this rank's block and the
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
// the reason. Rank j alone computes block j, in rank order ((g_0 + g_1) + ...) + g_{N-1}, and
// finishes it, so every rank ends with the same bits, NaN payloads included, and an element's
// bits do not depend on the count or on where the blocks are cut: a buffer reduced in pieces
// (a trainer's buckets, however planned) gives the bits of one call. On 2 ranks that is the
// ring's result too.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <type_traits>
#include <vector>

#include <gradsync/comm/shared/peers.hpp>
#include <gradsync/core/codes.hpp>
#include <gradsync/plan/plan.hpp>

namespace gradsync {

struct shared_memory {
    static constexpr std::uint32_t code = codes::shared_memory;
    static constexpr const char* name = "shared_memory";
    static constexpr bool reads_shared_buffer() noexcept { return true; }
};

// Policy: an elementwise policy; host memory only (the plan table's row).
template <element T, communicator C, class Policy, class Memory = host_memory>
class shared_memory_plan : public plan_types<shared_memory, C, std::span<T>> {
    static_assert(std::is_same_v<Memory, host_memory>, "gradsync::shared_memory_plan runs in host memory");

public:
    shared_memory_plan(C& comm, const layer_layout& layout, const plan_options<shared_memory>& options)
        : shared_memory_plan(comm, layout, options, sharing::required)
    {
    }
    // With sharing::if_possible, ranks that cannot share memory get a plan that is not
    // usable() (a selector's candidate). Rank r owns block (r + shift) mod N: 1 is the ring's
    // reduce-scatter (hierarchical's node stage, whose next stage works on the ring's blocks).
    shared_memory_plan(C& comm, const layer_layout& layout, const plan_options<shared_memory>& options, sharing need,
                       int shift = 0)
        : count_(layout.total()),
          peers_(comm, "gradsync::shared_memory (" + where(comm) + ")", count_ * sizeof(T), 0, options.shared, need),
          owned_(block_of(count_, peers_.size(), (peers_.rank() + shift) % peers_.size()))
    {
    }

    shared_memory_plan(const shared_memory_plan&) = delete;
    shared_memory_plan& operator=(const shared_memory_plan&) = delete;

    std::size_t count() const noexcept { return count_; }
    std::size_t scratch_bytes() const noexcept { return peers_.slot_bytes(); }
    // Whether the ranks share memory (always, unless built with sharing::if_possible).
    bool usable() const noexcept { return peers_.usable(); }
    // Whether peers read this rank's buffer in place (every rank in this process).
    bool direct() const noexcept { return peers_.direct(); }
    // This rank's slot of the region, count() elements: gradients kept there are reduced with
    // no copy in (run() on this span). Valid while the plan lives. Empty for a plan built on a
    // shared_buffer (plan_options::shared), whose data lies in that buffer.
    std::span<T> buffer() const noexcept { return peers_.own_slot<T>(count_); }
    // The block this rank combines (ring_plan::owned() with shift 1).
    block owned() const noexcept { return owned_; }

    void run(C& comm, std::span<T> data, int tag)
    {
        if (idle(data))
            return;
        guarded([&] {
            publish(comm, data, tag);
            peers_.reading_all([&] { combine(data, true); });
            finish_call(comm, data, tag);
        });
    }

    // The halves of run(), for hierarchical: the owned block combined into data (not
    // finished), then, after whatever the caller does to it, written into every peer's copy.
    // Between the two this rank's data is its peers' to write: a caller that fails there must
    // depart() before it returns.
    void reduce_scatter(C& comm, std::span<T> data, int tag)
    {
        if (peers_.size() == 1 || count_ == 0)
            return;
        guarded([&] {
            publish(comm, data, tag);
            peers_.reading_all([&] { combine(data, false); });
        });
    }
    void allgather(C& comm, std::span<T> data, int tag)
    {
        if (peers_.size() == 1 || count_ == 0)
            return;
        guarded([&] {
            peers_.reading_all([&] { hand_out(data, owned_.begin, owned_.size()); });
            finish_call(comm, data, tag);
        });
    }
    // Leaves the call begun by reduce_scatter() with an error (nothing outside a call).
    void depart() noexcept { peers_.depart(); }

private:
    static constexpr std::size_t tile_bytes = 16384; // the running sum's tile: it stays in L1

    bool idle(std::span<T> data) const
    {
        if (peers_.size() > 1 && count_ > 0)
            return false;
        Policy::template finish<T>(data, peers_.size());
        return true;
    }

    template <class F>
    void guarded(F&& f)
    {
        try {
            f();
        } catch (...) {
            peers_.depart();
            throw;
        }
    }

    // The call's first flag, once this rank's data is readable by its peers: its address
    // (threads), or the blocks the peers combine copied into its slot (processes; none when
    // data is the slot); then every peer's.
    void publish(C& comm, std::span<T> data, int tag)
    {
        const std::uint32_t published = 2 * peers_.begin_call() - 1;
        copied_ = peers_.share(data.data(), count_, owned_.begin, owned_.end);
        peers_.raise(published);
        peers_.wait_all(comm, published, "the data", tag);
    }

    // The call's second flag, once the owned block is in every peer's copy; then every peer's,
    // and the finished blocks copied out of the slot.
    void finish_call(C& comm, std::span<T> data, int tag)
    {
        const std::uint32_t finished = 2 * peers_.call();
        peers_.raise(finished);
        peers_.wait_all(comm, finished, "the finished block", tag);
        peers_.end_call();
        if (copied_)
            peers_.take_back(data.data(), count_, owned_.begin, owned_.end);
    }

    // The owned block, tile by tile, combined in rank order ((g_0 + g_1) + ...) where rank 0's
    // copy lies (nobody else touches this block of any copy this call) and left in data; with
    // `whole`, also finished and written into every peer's copy while in cache.
    void combine(std::span<T> data, bool whole)
    {
        const int n = peers_.size();
        const std::size_t tile = std::max<std::size_t>(1, tile_bytes / sizeof(T));
        for (std::size_t at = owned_.begin; at < owned_.end; at += tile) {
            const std::size_t len = std::min(tile, owned_.end - at);
            const std::span<T> acc(peers_.copy_of(0, data.data()) + at, len);
            for (int q = 1; q < n; ++q)
                Policy::template combine<T>(acc, std::span<const T>(peers_.copy_of(q, data.data()) + at, len));
            if (whole) { // finished where it lies, then into every other copy, this rank's data included
                Policy::template finish<T>(acc, n);
                for (int q = 0; q < n; ++q)
                    if (T* copy = peers_.copy_of(q, data.data()) + at; copy != acc.data())
                        std::memcpy(copy, acc.data(), len * sizeof(T));
            } else if (acc.data() != data.data() + at) {
                std::memcpy(data.data() + at, acc.data(), len * sizeof(T));
            }
        }
    }

    // data[at, at + len) written into every peer's copy.
    void hand_out(std::span<T> data, std::size_t at, std::size_t len)
    {
        const int n = peers_.size();
        for (int k = 1; k < n; ++k)
            std::memcpy(peers_.copy_of((peers_.rank() + k) % n, data.data()) + at, data.data() + at, len * sizeof(T));
    }

    std::size_t count_;
    shared_peers peers_;
    block owned_;
    bool copied_ = false;
};

// A selector's shared-memory plan (automatic, tuned, hierarchical's node stage): built with
// sharing::if_possible and kept only where the ranks share memory, a verdict every rank
// reaches alike; whether it was kept. `shift` is the plan's own, where it has one.
template <class Plan, communicator C, class... Shift>
bool build_if_shared(std::optional<Plan>& plan, C& comm, const layer_layout& layout,
                     const plan_options<shared_memory>& options, Shift... shift)
{
    plan.emplace(comm, layout, options, sharing::if_possible, shift...);
    if (plan->usable())
        return true;
    plan.reset();
    return false;
}

} // namespace gradsync
