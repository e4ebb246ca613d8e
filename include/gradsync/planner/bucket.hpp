// PyTorch DDP-style buckets: walk the layers in backward order, adding each to the open
// group, and close the group once its gradient bytes reach the cap (first_cap_bytes for the
// first group when given, as DDP's first_bucket_bytes; cap_bytes for the others); the rest
// forms the last group. Layers without parameters join the open group. Cost O(L).
// Preconditions: both caps > 0 (usage_error otherwise); bytes as in layer_bytes().
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>

#include <gradsync/core/error.hpp>
#include <gradsync/planner/profile.hpp>
#include <gradsync/planner/timeline.hpp>

namespace gradsync::planner {

inline merge_plan bucket(const profile& p, std::uint64_t cap_bytes, std::size_t bytes_per_element = 4,
                         std::optional<std::uint64_t> first_cap_bytes = std::nullopt)
{
    if (cap_bytes == 0 || first_cap_bytes == std::uint64_t{0})
        throw usage_error("gradsync::planner::bucket: the byte caps must be positive");
    const std::vector<std::uint64_t> bytes = layer_bytes(p, bytes_per_element);
    merge_plan groups;
    std::vector<std::size_t> open;
    std::uint64_t filled = 0;
    for (std::size_t l = p.size(); l-- > 0;) {
        open.push_back(l);
        filled += bytes[l];
        if (filled >= (groups.empty() ? first_cap_bytes.value_or(cap_bytes) : cap_bytes) || l == 0) {
            std::reverse(open.begin(), open.end());
            groups.push_back(std::move(open));
            open.clear();
            filled = 0;
        }
    }
    return groups;
}

} // namespace gradsync::planner
