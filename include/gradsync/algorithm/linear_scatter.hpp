// Linear scatter: the root posts all N-1 sends at once, block j of its data to rank j, and
// then waits for them; every other rank receives its block into its data. Each block goes
// whole, as one message (rooted_plan, plan/rooted_plan.hpp).
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

#include <cstdint>

#include <gradsync/comm/communicator.hpp>
#include <gradsync/core/codes.hpp>
#include <gradsync/plan/rooted_plan.hpp>

namespace gradsync {

struct linear_scatter {
    static constexpr std::uint32_t code = codes::linear_scatter;
    static constexpr const char* name = "linear_scatter";
};

template <communicator C>
using linear_scatter_plan = rooted_plan<linear_scatter, C, rooted_direction::from_root>;

} // namespace gradsync
