// MG-WFBP merged-gradient plan: Algorithm 1 of Shi et al., "MG-WFBP: Efficient Data
// Communication for Distributed Synchronous SGD Algorithms", step for step
// (docs/planner.md, "MG-WFBP, step by step").
//
// With tb(l) the backward time, tau_b(l) = tau_b(l+1) + tb(l+1) its start (tau_b(L-1) = 0),
// tc(l) = T(bytes(l)) and tau_c(l) = max(tau_c(l+1) + tc(l+1), tau_b(l) + tb(l)) the start
// of its communication, scan l = L-1 down to 1 and merge l into l-1 iff
//   ready < tau_c(l) + tc(l)  and  (tau_c(l) > ready  or  ready - tau_c(l) < a),
// ready = tau_b(l-1) + tb(l-1): l's communication would still run when l-1 is ready, and
// either has not started by then or started less than a startup cost earlier. A merge
// moves l's bytes into l-1 (tc(l) = 0, tc(l-1) = T(new bytes)) and recomputes tau_c.
//
// Cost O(L): the step at l reads only tau_c(l) and tc(l), and tau_c(l) depends only on
// layers above l, so computing tau_c(l-1) after the decision at l gives exactly the values
// a full recomputation after every merge would. Any profile (L = 0 gives no groups); a
// and b finite and non-negative.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <gradsync/planner/cost_model.hpp>
#include <gradsync/planner/profile.hpp>
#include <gradsync/planner/timeline.hpp>

namespace gradsync::planner {

inline merge_plan mgwfbp(const profile& p, const linear_cost& cost, std::size_t bytes_per_element = 4)
{
    validate_cost(cost);
    std::vector<std::uint64_t> bytes = layer_bytes(p, bytes_per_element);
    const std::vector<double> ready = ready_times(p); // ready[l] = tau_b(l) + tb(l)
    merge_plan groups;
    if (p.empty())
        return groups;
    std::vector<std::size_t> open; // descending while it fills
    auto close = [&] {
        std::reverse(open.begin(), open.end());
        groups.push_back(std::move(open));
        open.clear();
    };
    double tau_c = ready[p.size() - 1];
    double tc = cost(double(bytes[p.size() - 1]));
    for (std::size_t l = p.size() - 1; l >= 1; --l) {
        open.push_back(l);
        const double next_ready = ready[l - 1];
        if (next_ready < tau_c + tc && (tau_c > next_ready || next_ready - tau_c < cost.a)) {
            bytes[l - 1] += bytes[l];
            tc = 0;
        } else {
            close();
        }
        tau_c = std::max(tau_c + tc, next_ready);
        tc = cost(double(bytes[l - 1]));
    }
    open.push_back(0);
    close();
    return groups;
}

} // namespace gradsync::planner
