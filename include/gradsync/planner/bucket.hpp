// PyTorch DDP-style buckets: walk the layers in backward order, adding each to the open
// group, and close the group once its gradient bytes reach cap_bytes; the rest forms the
// last group. Layers without parameters join the open group. Cost O(L).
// Preconditions: cap_bytes > 0 (usage_error otherwise); bytes as in layer_bytes().
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include <gradsync/core/error.hpp>
#include <gradsync/planner/profile.hpp>
#include <gradsync/planner/timeline.hpp>

namespace gradsync::planner {

inline merge_plan bucket(const profile& p, std::uint64_t cap_bytes, std::size_t bytes_per_element = 4)
{
    if (cap_bytes == 0)
        throw usage_error("gradsync::planner::bucket: the byte cap must be positive");
    const std::vector<std::uint64_t> bytes = layer_bytes(p, bytes_per_element);
    merge_plan groups;
    std::vector<std::size_t> open;
    std::uint64_t filled = 0;
    for (std::size_t l = p.size(); l-- > 0;) {
        open.push_back(l);
        filled += bytes[l];
        if (filled >= cap_bytes || l == 0) {
            std::reverse(open.begin(), open.end());
            groups.push_back(std::move(open));
            open.clear();
            filled = 0;
        }
    }
    return groups;
}

} // namespace gradsync::planner
