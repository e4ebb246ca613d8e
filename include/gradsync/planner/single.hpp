// One allreduce of all gradients after backward ends (no overlap, one startup cost).
// Cost O(L). Any profile; no groups for an empty one.
#pragma once

#include <cstddef>
#include <vector>

#include <gradsync/planner/profile.hpp>
#include <gradsync/planner/timeline.hpp>

namespace gradsync::planner {

inline merge_plan single(const profile& p)
{
    if (p.empty())
        return {};
    std::vector<std::size_t> all(p.size());
    for (std::size_t l = 0; l < p.size(); ++l)
        all[l] = l;
    return {all};
}

} // namespace gradsync::planner
