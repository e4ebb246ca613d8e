// Linear scatter: the root posts all N-1 sends at once, block j of its data to rank j, and
// then waits for them; every other rank receives its block into its data. Each block goes
// whole, as one message (transfer_with_root, plan/exchange.hpp).
//
// Cost (N ranks, M = N*b bytes the root's data holds, b bytes a block, alpha per message,
// beta per byte sent; planner::block_per_peer_cost, checked by tests/test_cost_formulas.cpp):
// the root's link takes N-1 messages of one block.
// cost: (N-1)*alpha + (N-1)/N*M*beta
//
// Preconditions: any N >= 1, any root 0..N-1 and any block size (0 sends nothing). Every rank
// ends with the root's bits of its block; nothing is computed, and the root's data does not
// change.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <gradsync/core/codes.hpp>
#include <gradsync/plan/exchange.hpp>
#include <gradsync/plan/plan.hpp>

namespace gradsync {

struct linear_scatter {
    static constexpr std::uint32_t code = codes::linear_scatter;
    static constexpr const char* name = "linear_scatter";
};

template <communicator C>
class linear_scatter_plan : public plan_types<linear_scatter, C, std::span<std::byte>> {
public:
    linear_scatter_plan(const C& comm, std::size_t block_bytes, int root)
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
        transfer_with_root(comm, data, block_bytes_, root_, tag, false, std::span(requests_));
    }

private:
    int rank_, size_, root_;
    std::size_t block_bytes_;
    std::vector<typename C::request> requests_;
};

} // namespace gradsync
