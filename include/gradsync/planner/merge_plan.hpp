// A merge plan and its one validity rule (docs/planner.md, "The model"), shared by the
// planner and the synchronizer.
//
// A plan lists groups of layer indices in communication order. It is valid for L layers when
// every layer 0..L-1 is in exactly one non-empty group, each group is a contiguous ascending
// run, and the groups come in backward order (the group holding layer L-1 first).
//
// plan_problem returns what is wrong instead of throwing, so that a synchronizer's rank with
// a bad plan still takes part in the agreement check and every rank fails together.
//
// Cost: O(L + total group size) time, O(L) memory.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <gradsync/core/error.hpp>

namespace gradsync::planner {

using merge_plan = std::vector<std::vector<std::size_t>>;

// "" when `p` is a valid plan for `layers` layers, else the first problem found. Checked in
// this order, so that each message can state its case exactly: empty groups, layers out of
// range and layers listed twice; then layers in no group; then groups that are not
// contiguous ascending runs; then the order of the groups.
inline std::string plan_problem(const merge_plan& p, std::size_t layers)
{
    const auto text = [](std::size_t v) { return std::to_string(v); };
    const std::size_t none = p.size();
    std::vector<std::size_t> group_of(layers, none);
    for (std::size_t g = 0; g < p.size(); ++g) {
        if (p[g].empty())
            return "group " + text(g) + " is empty";
        for (std::size_t l : p[g]) {
            if (l >= layers)
                return "group " + text(g) + " lists layer " + text(l) + ", but there " +
                    (layers == 0   ? std::string("are no layers")
                     : layers == 1 ? std::string("is only 1 layer")
                                   : "are only " + text(layers) + " layers");
            if (group_of[l] != none)
                return "layer " + text(l) + " appears twice (" +
                    (group_of[l] == g ? "in group " + text(g) + " twice"
                                      : "in group " + text(group_of[l]) + " and group " + text(g)) +
                    ")";
            group_of[l] = g;
        }
    }

    // Every missing layer, as runs: "layer 2", "layers 0..3", "layers 0..1, 5".
    std::string missing;
    std::size_t missing_count = 0;
    for (std::size_t l = 0; l < layers; ++l) {
        if (group_of[l] != none)
            continue;
        std::size_t last = l;
        while (last + 1 < layers && group_of[last + 1] == none)
            ++last;
        missing += (missing.empty() ? "" : ", ") + text(l) + (last > l ? ".." + text(last) : "");
        missing_count += last - l + 1;
        l = last;
    }
    if (missing_count == 1)
        return "layer " + missing + " is in no group";
    if (missing_count > 1)
        return "layers " + missing + " are in no group";

    for (std::size_t g = 0; g < p.size(); ++g)
        for (std::size_t i = 1; i < p[g].size(); ++i)
            if (p[g][i] != p[g][i - 1] + 1)
                return "group " + text(g) + " is not a contiguous ascending run of layers (layer " +
                    text(p[g][i - 1]) + " is followed by " + text(p[g][i]) + ")";

    // Every layer is now in exactly one run, so the layer a group should end at is in a
    // later group.
    std::size_t next_top = layers; // one past the highest layer the next group must hold
    for (std::size_t g = 0; g < p.size(); ++g) {
        if (p[g].back() + 1 != next_top)
            return "groups are not in backward order: group " + text(g) + " holds layers " + text(p[g].front()) +
                ".." + text(p[g].back()) + ", but should end at layer " + text(next_top - 1) +
                ", which comes later, in group " + text(group_of[next_top - 1]);
        next_top = p[g].front();
    }
    return "";
}

// usage_error naming the first problem unless `p` is a valid plan for `layers` layers.
inline void validate_plan(const merge_plan& p, std::size_t layers)
{
    const std::string problem = plan_problem(p, layers);
    if (!problem.empty())
        throw usage_error("gradsync::planner: invalid plan for " + std::to_string(layers) + " layers: " + problem);
}

} // namespace gradsync::planner
