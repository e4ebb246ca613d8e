// Plans and their simulated timeline (docs/planner.md, "The model").
//
// Layers l = 0..L-1 in forward order; backward runs L-1 down to 0, so layer l's gradient
// is ready at r(l) = sum over k >= l of tb(k). A plan lists groups in communication order
// (backward order: the group holding layer L-1 first), each a run of consecutive layers
// listed in ascending order. Communications are serialized: group G starts at
// max(end of the previous group, r(min G)) and lasts T(bytes of G) (nothing for a group
// without parameters). The predicted time is max(end of the last group, r(0)).
//
// The plan type and validate_plan are in planner/merge_plan.hpp.
//
// Cost: O(L) for simulate.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <gradsync/core/error.hpp>
#include <gradsync/planner/cost_model.hpp>
#include <gradsync/planner/merge_plan.hpp>
#include <gradsync/planner/profile.hpp>

namespace gradsync::planner {

// r(l) = tb(l) + r(l+1), summed from the last layer down, the one order every planner uses
// so that their times agree to the bit. usage_error names a layer with an invalid time.
inline std::vector<double> ready_times(const profile& p)
{
    validate_profile(p);
    std::vector<double> r(p.size());
    double t = 0;
    for (std::size_t l = p.size(); l-- > 0;)
        r[l] = t = t + p[l].backward_s;
    return r;
}

struct group_span {
    double start_s = 0;
    double end_s = 0;
    std::uint64_t bytes = 0;
};

struct timeline {
    std::vector<double> backward_start_s; // per layer: r(l+1), 0 for the last layer
    std::vector<double> ready_s;          // per layer: r(l)
    std::vector<group_span> groups;       // per group, in communication order
    double predicted_s = 0;
};

inline timeline simulate(const profile& p, const merge_plan& groups, const linear_cost& cost,
                         std::size_t bytes_per_element = 4)
{
    validate_plan(groups, p.size());
    validate_cost(cost);
    const std::vector<std::uint64_t> bytes = layer_bytes(p, bytes_per_element);
    timeline t;
    t.ready_s = ready_times(p);
    t.backward_start_s.resize(p.size());
    for (std::size_t l = 0; l < p.size(); ++l)
        t.backward_start_s[l] = l + 1 < p.size() ? t.ready_s[l + 1] : 0.0;
    double end = 0;
    for (const auto& g : groups) {
        group_span s;
        for (std::size_t l : g)
            s.bytes += bytes[l];
        s.start_s = std::max(end, t.ready_s[g.front()]);
        s.end_s = end = s.start_s + cost(double(s.bytes));
        t.groups.push_back(s);
    }
    t.predicted_s = std::max(end, p.empty() ? 0.0 : t.ready_s[0]);
    return t;
}

} // namespace gradsync::planner
