// Ring allreduce: reduce-scatter then allgather around the ring r -> r+1, N-1 steps each.
//
// Cost (N ranks, M bytes per rank, alpha per message, beta per byte, gamma per byte
// combined):  2*(N-1)*alpha + 2*(N-1)/N*M*beta + (N-1)/N*M*gamma
// Every block is cut into pipeline segments (exchange_combine), so the combine of one
// segment overlaps the transfer of the next. In a memory space (Memory, algorithm/memory.hpp)
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
#include <type_traits>
#include <vector>

#include <gradsync/algorithm/adasum_ring.hpp>
#include <gradsync/algorithm/exchange.hpp>
#include <gradsync/algorithm/memory.hpp>
#include <gradsync/algorithm/schedule.hpp>
#include <gradsync/communicator.hpp>
#include <gradsync/layout.hpp>
#include <gradsync/policy/adasum.hpp>
#include <gradsync/types.hpp>

namespace gradsync {

template <element T, communicator C, class Memory = host_memory>
class ring_plan;

struct ring {
    static constexpr std::uint32_t code = 1;
    static constexpr const char* name = "ring";
    // The plan for element type T over communicator C with policy P, the vector in Memory
    // (Adasum's plan: host memory only).
    template <element T, communicator C, class P, class Memory = host_memory>
    using plan = std::conditional_t<is_adasum<P>, adasum_ring_plan<T, C>, ring_plan<T, C, Memory>>;
};

template <element T, communicator C, class Memory>
class ring_plan {
public:
    ring_plan(const C& comm, const layer_layout& layout, const ring&, const pipeline_options& pipe)
        : rank_(comm.rank()), size_(comm.size()), count_(layout.total()), plain_{eager_limit(comm), 0},
          piped_{eager_limit(comm), pipe.segment_bytes}, scratch_(scratch_elems<T, Memory>(largest(), pipe))
    {
        requests_.resize(2 * std::max(piped_.messages<T>(largest()), plain_.messages<T>(largest())));
    }

    std::size_t count() const noexcept { return count_; }

    template <class Policy>
    void run(C& comm, typename Memory::template span<T> data, int tag)
    {
        const Memory memory = Memory::of(data);
        const std::span<T> d = Memory::elements(data);
        memory.synchronize(); // the caller's queued work on data ends before the first send
        reduce_scatter<Policy>(comm, d, tag, memory);
        memory.template finish<Policy>(part(d, owned()), size_);
        memory.synchronize();
        allgather(comm, d, tag);
    }

    // The block this rank holds fully combined after reduce_scatter.
    block owned() const noexcept { return chunk((rank_ + 1) % size_); }

    template <class Policy>
    void reduce_scatter(C& comm, std::span<T> data, int tag, const Memory& memory = {})
    {
        const int n = size_, right = (rank_ + 1) % n, left = (rank_ + n - 1) % n;
        const std::span<T> scratch(scratch_.data(), scratch_.size());
        for (int s = 0; s + 1 < n; ++s)
            exchange_combine<Policy, T>(comm, tag, right, part(data, chunk(rank_ - s)), left,
                                        part(data, chunk(rank_ - s - 1)), scratch, piped_, requests_, memory);
    }

    void allgather(C& comm, std::span<T> data, int tag)
    {
        const int n = size_, right = (rank_ + 1) % n, left = (rank_ + n - 1) % n;
        for (int s = 0; s + 1 < n; ++s)
            exchange<T>(comm, tag, right, part(data, chunk(rank_ + 1 - s)), left, part(data, chunk(rank_ - s)), plain_,
                        requests_);
    }

private:
    std::size_t largest() const noexcept { return block_of(count_, size_, 0).size(); } // block 0 is never smaller
    block chunk(int c) const noexcept { return block_of(count_, size_, ((c % size_) + size_) % size_); }
    static std::span<T> part(std::span<T> data, block b) { return data.subspan(b.begin, b.size()); }

    int rank_, size_;
    std::size_t count_;
    message_cut plain_, piped_;
    typename Memory::template buffer<T> scratch_;
    std::vector<typename C::request> requests_; // after scratch_: pending requests die first
};

} // namespace gradsync
