// Linear gather: every rank but the root sends its block to the root, which posts all N-1
// receives at once, each into its block's place in its data, and then waits for them.
// Each block goes whole, as one message (rooted_plan, plan/rooted_plan.hpp).
//
// Cost (N ranks, M = N*b bytes the root's data holds, b bytes a block, alpha per message,
// beta per byte sent; planner::block_per_peer_cost, checked by tests/test_cost_formulas.cpp):
// the root's link takes N-1 messages of one block.
// cost: (N-1)*alpha + (N-1)/N*M*beta
//
// Preconditions: any N >= 1, any root 0..N-1 and any block size (0 sends nothing). The root
// ends with every rank's bits; nothing is computed, and no other rank's data changes.
#pragma once

#include <cstdint>

#include <gradsync/comm/communicator.hpp>
#include <gradsync/core/codes.hpp>
#include <gradsync/plan/rooted_plan.hpp>

namespace gradsync {

struct linear_gather {
    static constexpr std::uint32_t code = codes::linear_gather;
    static constexpr const char* name = "linear_gather";
};

template <communicator C>
using linear_gather_plan = rooted_plan<linear_gather, C, rooted_direction::toward_root>;

} // namespace gradsync
