// The synchronizer's check of a plan: every layer in exactly one group, each group a
// contiguous ascending run, the groups in backward order (DESIGN.md §5). It returns what is
// wrong rather than throwing, so that a rank with a bad plan still takes part in the
// agreement check and every rank fails together.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

namespace gradsync {

namespace detail {

// "" when `plan` covers layers 0..layers-1 as DESIGN.md §5 requires, else what is wrong.
inline std::string plan_problem(const std::vector<std::vector<std::size_t>>& plan, std::size_t layers)
{
    const auto text = [](std::size_t v) { return std::to_string(v); };
    std::size_t next = layers; // the next group must end at layer next - 1
    for (std::size_t g = 0; g < plan.size(); ++g) {
        const std::vector<std::size_t>& group = plan[g];
        if (group.empty())
            return "group " + text(g) + " is empty";
        for (std::size_t i = 0; i < group.size(); ++i) {
            if (group[i] >= layers)
                return "group " + text(g) + " lists layer " + text(group[i]) + ", but there are only " + text(layers) +
                    " layers";
            if (i > 0 && group[i] != group[i - 1] + 1)
                return "group " + text(g) + " is not a contiguous ascending run of layers (layer " +
                    text(group[i - 1]) + " is followed by " + text(group[i]) + ")";
        }
        const std::size_t low = group.front(), high = group.back();
        if (high + 1 == next) {
            next = low;
            continue;
        }
        const std::string holds = "group " + text(g) + " holds layers " + text(low) + ".." + text(high);
        if (high >= next)
            return holds + ", but layer " + text(std::max(low, next)) + " is also in an earlier group";
        for (std::size_t later = g + 1; later < plan.size(); ++later)
            for (std::size_t l : plan[later])
                if (l == next - 1)
                    return "groups are not in backward order: " + holds + ", but layer " + text(next - 1) +
                        " comes later, in group " + text(later);
        return holds + ", and layer " + text(next - 1) + " is in no group";
    }
    if (next > 0)
        return "layers 0.." + text(next - 1) + " are in no group";
    return "";
}

} // namespace detail

} // namespace gradsync
