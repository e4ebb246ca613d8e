// Wait-free backpropagation: one allreduce per layer, started as soon as the layer's
// gradient is ready, in backward order. Cost O(L). Any profile (times are not used).
#pragma once

#include <cstddef>

#include <gradsync/planner/profile.hpp>
#include <gradsync/planner/timeline.hpp>

namespace gradsync::planner {

inline merge_plan wfbp(const profile& p)
{
    merge_plan groups;
    groups.reserve(p.size());
    for (std::size_t l = p.size(); l-- > 0;)
        groups.push_back({l});
    return groups;
}

} // namespace gradsync::planner
