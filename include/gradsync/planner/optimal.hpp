// The optimal plan: the partition of the layers into contiguous groups (in backward order)
// with the least predicted time of simulate(), and among those the fewest groups.
//
// Dynamic programming over prefixes of the backward order. A group's end,
// max(end of the previous group, ready time of its last-computed layer) + T(bytes), never
// decreases as the previous end grows (in floating point too: rounding is monotone), so a
// prefix is summarised by the least end it can reach. To also minimise the group count
// exactly, every prefix keeps its Pareto front: for each group count the least end, kept
// only where it beats every smaller count. Front entries that end before the next group's
// layers are ready all give the same end, so only the first of them (fewest groups) is
// tried. Ties between split points go to the one earliest in backward order.
//
// Cost: O(L^2 F) time and O(L F) memory, F the mean front size (2 to 9 measured on the
// ResNet-50 and VGG-16 profiles and on random ones; most scans stop early at the collapse).
// Group bytes come from 64-bit prefix sums, exact because layer_bytes() refuses totals that
// overflow; each end is computed with the operations simulate() uses, so the plan's
// simulate().predicted_s is exactly the minimum found here. Any profile (L = 0 gives no
// groups); a, b finite and >= 0, and small enough that the predicted times stay finite
// (otherwise usage_error).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gradsync/core/error.hpp>
#include <gradsync/planner/cost_model.hpp>
#include <gradsync/planner/profile.hpp>
#include <gradsync/planner/timeline.hpp>

namespace gradsync::planner {

inline merge_plan optimal(const profile& p, const linear_cost& cost, std::size_t bytes_per_element = 4)
{
    validate_cost(cost);
    const std::vector<std::uint64_t> bytes = layer_bytes(p, bytes_per_element);
    const std::vector<double> ready = ready_times(p);
    const std::size_t n = p.size();
    if (n >= std::numeric_limits<std::uint32_t>::max()) // entries index prefixes in 32 bits
        throw usage_error("gradsync::planner::optimal: " + std::to_string(n) + " layers are too many to plan");
    // Position j of the backward order is layer n-1-j; prefix k holds positions 0..k-1.
    std::vector<std::uint64_t> prefix(n + 1, 0);
    for (std::size_t j = 0; j < n; ++j)
        prefix[j + 1] = prefix[j] + bytes[n - 1 - j];

    // Fronts of all prefixes, stored one after another (prefix k's at [first[k], first[k+1])),
    // so that trying every split point reads memory in order.
    struct entry {
        double end;
        std::uint32_t groups;
        std::uint32_t from;  // prefix before the last group
        std::size_t index;   // that prefix's entry in `fronts`
    };
    constexpr double never = std::numeric_limits<double>::infinity();
    std::vector<entry> fronts{{0.0, 0, 0, 0}};
    std::vector<std::size_t> first{0, 1};
    std::vector<entry> best(n + 1);
    for (std::size_t k = 1; k <= n; ++k) {
        const double group_ready = ready[n - k]; // the group's last-computed layer
        std::fill(best.begin(), best.begin() + std::ptrdiff_t(k) + 1, entry{never, 0, 0, 0});
        for (std::size_t i = 0; i < k; ++i) {
            const double duration = cost(double(prefix[k] - prefix[i]));
            for (std::size_t e = first[i]; e < first[i + 1]; ++e) {
                const entry& before = fronts[e];
                const double end = std::max(before.end, group_ready) + duration;
                entry& slot = best[before.groups + 1];
                if (end < slot.end)
                    slot = {end, before.groups + 1, std::uint32_t(i), e};
                if (before.end <= group_ready)
                    break;
            }
        }
        double last = never;
        for (std::size_t c = 1; c <= k; ++c)
            if (best[c].end < last) {
                fronts.push_back(best[c]);
                last = best[c].end;
            }
        if (fronts.size() == first.back()) // every end overflowed to Inf: nothing to compare
            throw usage_error("gradsync::planner::optimal: the predicted times overflow a double (a = " +
                              std::to_string(cost.a) + " s, b = " + std::to_string(cost.b) + " s/byte)");
        first.push_back(fronts.size());
    }

    merge_plan groups;
    for (std::size_t at = fronts.size() - 1; at != 0;) { // the least end: the last entry of prefix n
        const entry& e = fronts[at];
        const std::size_t k = std::size_t(std::upper_bound(first.begin(), first.end(), at) - first.begin()) - 1;
        std::vector<std::size_t> layers;
        for (std::size_t layer = n - k; layer <= n - 1 - e.from; ++layer)
            layers.push_back(layer);
        groups.push_back(std::move(layers));
        at = e.index;
    }
    std::reverse(groups.begin(), groups.end());
    return groups;
}

} // namespace gradsync::planner
