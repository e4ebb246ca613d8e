// Ring allreduce: reduce-scatter then allgather around the ring r -> r+1, N-1 steps each.
//
// Cost (N ranks, M bytes per rank, alpha per message, beta per byte sent, gamma per byte
// combined; planner::ring_cost, checked by tests/test_cost_formulas.cpp): each rank sends
// N-1 blocks of M/N in each phase and combines N-1 blocks in the reduce-scatter.
// cost: 2*(N-1)*alpha + 2*(N-1)/N*M*beta + (N-1)/N*M*gamma
// Every block is cut into pipeline segments (exchange_combine), so the combine of one
// segment overlaps the transfer of the next. In a memory space (Memory, memory/host_memory.hpp)
// the same messages carry the same bits, gamma is a kernel's, and (N+1)*sigma is added for
// the space synchronizations (before the first send, after each step's combines and after
// the finish, so a send reads finished data); scratch is then the largest block.
//
// Preconditions: any N >= 1 and any count; with count < N some blocks are empty and their
// messages are skipped on both sides. Block (r+1) mod N is finished by rank r alone and
// then copied around, so every rank ends with bitwise identical data, whatever memory each
// rank's plan uses.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <gradsync/core/codes.hpp>
#include <gradsync/plan/plan.hpp>

namespace gradsync {

struct ring {
    static constexpr std::uint32_t code = codes::ring;
    static constexpr const char* name = "ring";
};

// Policy: an elementwise policy that Memory combines.
template <element T, communicator C, class Policy, class Memory = host_memory>
class ring_plan : public plan_types<ring, C, typename Memory::template span<T>> {
public:
    ring_plan(const C& comm, const layer_layout& layout, const plan_options<ring>& options)
        : rank_(comm.rank()), size_(comm.size()), count_(layout.total()),
          plain_(cut_for(comm, options.pipeline)), piped_(cut_for(comm, options.pipeline, true)),
          scratch_(scratch_elems<T, Memory>(largest(), options.pipeline))
    {
        requests_.resize(2 * std::max(piped_.messages<T>(largest()), plain_.messages<T>(largest())));
    }

    std::size_t count() const noexcept { return count_; }
    std::size_t scratch_bytes() const noexcept { return scratch_.size() * sizeof(T); }

    void run(C& comm, typename Memory::template span<T> data, int tag)
    {
        const Memory memory = Memory::of(data);
        const std::span<T> d = Memory::elements(data);
        memory.synchronize(); // the caller's queued work on data ends before the first send
        reduce_scatter(comm, d, tag, memory);
        memory.template finish<Policy>(block_span(d, owned()), size_);
        memory.synchronize();
        allgather(comm, d, tag);
    }

    // The block this rank holds fully combined after reduce_scatter.
    block owned() const noexcept { return block_at((rank_ + 1) % size_); }

    void reduce_scatter(C& comm, std::span<T> data, int tag, const Memory& memory = {})
    {
        const int n = size_, right = (rank_ + 1) % n, left = (rank_ + n - 1) % n;
        const std::span<T> scratch(scratch_.data(), scratch_.size());
        for (int s = 0; s + 1 < n; ++s)
            exchange_combine<Policy, T>(comm, tag, right, block_span(data, block_at(rank_ - s)), left,
                                        block_span(data, block_at(rank_ - s - 1)), scratch, piped_, requests_, memory);
    }

    void allgather(C& comm, std::span<T> data, int tag)
    {
        allgather_around_ring<T>(comm, tag, data, rank_ + 1, [this](int b) { return block_at(b); }, plain_,
                                 requests_);
    }

private:
    std::size_t largest() const noexcept { return block_of(count_, size_, 0).size(); } // block 0 is never smaller
    block block_at(int b) const noexcept { return block_of(count_, size_, ((b % size_) + size_) % size_); }

    int rank_, size_;
    std::size_t count_;
    message_cut plain_, piped_;
    typename Memory::template buffer<T> scratch_;
    std::vector<typename C::request> requests_; // after scratch_: pending requests die first
};

} // namespace gradsync
