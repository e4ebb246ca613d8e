// Linear gather: every rank but the root sends its block to the root, which posts all N-1
// receives at once, each into its block's place in its data, and then waits for them.
// Each block goes whole, as one message (transfer_with_root, plan/exchange.hpp).
//
// Cost (N ranks, M = N*b bytes the root's data holds, b bytes a block, alpha per message,
// beta per byte sent; planner::block_per_peer_cost, checked by tests/test_cost_formulas.cpp):
// the root's link takes N-1 messages of one block.
// cost: (N-1)*alpha + (N-1)/N*M*beta
//
// Preconditions: any N >= 1, any root 0..N-1 and any block size (0 sends nothing). The root
// ends with every rank's bits; nothing is computed, and no other rank's data changes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <gradsync/core/codes.hpp>
#include <gradsync/plan/exchange.hpp>
#include <gradsync/plan/plan.hpp>

namespace gradsync {

struct linear_gather {
    static constexpr std::uint32_t code = codes::linear_gather;
    static constexpr const char* name = "linear_gather";
};

template <communicator C>
class linear_gather_plan : public plan_types<linear_gather, C, std::span<std::byte>> {
public:
    linear_gather_plan(const C& comm, std::size_t block_bytes, int root)
        : rank_(comm.rank()), size_(comm.size()), root_(root), block_bytes_(block_bytes),
          requests_(rank_ == root ? std::size_t(size_ - 1) : 1)
    {
    }

    // The root's data holds every rank's block, the others' their own.
    std::size_t count() const noexcept { return rank_ == root_ ? std::size_t(size_) * block_bytes_ : block_bytes_; }
    std::size_t block_bytes() const noexcept { return block_bytes_; }
    int root() const noexcept { return root_; }

    void run(C& comm, std::span<std::byte> data, int tag)
    {
        transfer_with_root(comm, data, block_bytes_, root_, tag, true, std::span(requests_));
    }

private:
    int rank_, size_, root_;
    std::size_t block_bytes_;
    std::vector<typename C::request> requests_;
};

} // namespace gradsync
