// Ring allgather: every rank's block goes around the ring r -> r+1 (mod N) in N-1 steps; at
// step s rank r sends block (r-s) mod N to its right and receives block (r-s-1) mod N from
// its left (allgather_around_ring, plan/exchange.hpp: the ring allreduce's second half).
//
// Cost (N ranks, M = N*b bytes a rank's data holds, b bytes a block, alpha per message, beta
// per byte sent; planner::block_per_peer_cost, checked by tests/test_cost_formulas.cpp): N-1
// steps of one block each.
// cost: (N-1)*alpha + (N-1)/N*M*beta
// It sends the fewest bytes, to a neighbour only, but pays N-1 latencies: the choice for
// large blocks (selector/automatic_allgather.hpp). Blocks are cut as exchanges cut a block
// (message_cut: eager pieces), never into pipeline segments: nothing is combined, so there is
// nothing for a segment to overlap.
//
// Preconditions: any N >= 1 and any block size (0 sends nothing). Every rank ends with every
// rank's bits: they are copied, never computed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <gradsync/core/codes.hpp>
#include <gradsync/plan/allgather_plan.hpp>

namespace gradsync {

struct ring_allgather {
    static constexpr std::uint32_t code = codes::ring_allgather;
    static constexpr const char* name = "ring_allgather";
};

template <communicator C>
class ring_allgather_plan : public plan_types<ring_allgather, C, std::span<std::byte>> {
public:
    ring_allgather_plan(const C& comm, std::size_t block_bytes, const plan_options<ring_allgather>& options)
        : rank_(comm.rank()), size_(comm.size()), block_bytes_(block_bytes), cut_(cut_for(comm, options.pipeline)),
          requests_(2 * cut_.messages<std::byte>(block_bytes))
    {
    }

    std::size_t count() const noexcept { return std::size_t(size_) * block_bytes_; }
    std::size_t block_bytes() const noexcept { return block_bytes_; }

    void run(C& comm, std::span<std::byte> data, int tag)
    {
        allgather_around_ring<std::byte>(comm, tag, data, rank_, [this](int j) { return block_at(j); }, cut_,
                                         requests_);
    }

private:
    block block_at(int j) const noexcept
    {
        const auto k = std::size_t(((j % size_) + size_) % size_);
        return {k * block_bytes_, (k + 1) * block_bytes_};
    }

    int rank_, size_;
    std::size_t block_bytes_;
    message_cut cut_;
    std::vector<typename C::request> requests_;
};

} // namespace gradsync
