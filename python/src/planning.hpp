// The planner (include/gradsync/planner/) as gradsync.torch.buckets uses it: a profile of one
// layer per parameter tensor, in DDP's order (model.parameters()), its merged groups by
// MG-WFBP or the optimum, and the predicted end of backward plus communication for any
// grouping, DDP's buckets among them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <gradsync/core/error.hpp>
#include <gradsync/planner/bucket.hpp>
#include <gradsync/planner/mgwfbp.hpp>
#include <gradsync/planner/optimal.hpp>
#include <gradsync/planner/timeline.hpp>

namespace gradsync::python {

inline planner::profile profile_of(const std::vector<std::uint64_t>& params, const std::vector<double>& backward_s)
{
    if (params.size() != backward_s.size())
        throw usage_error("gradsync.torch.buckets: " + std::to_string(params.size()) + " parameter counts and " +
                          std::to_string(backward_s.size()) + " backward times; give one of each per layer");
    planner::profile p(params.size());
    for (std::size_t l = 0; l < p.size(); ++l) {
        p[l].name = "parameter " + std::to_string(l);
        p[l].params = params[l];
        p[l].backward_s = backward_s[l];
    }
    planner::validate_profile(p);
    return p;
}

// The buckets DDP forms: its first bucket closes at first_cap_bytes, the others at cap_bytes.
inline planner::merge_plan bucket_groups(const std::vector<std::uint64_t>& params, std::uint64_t cap_bytes,
                                         std::uint64_t first_cap_bytes, std::size_t bytes_per_element)
{
    return planner::bucket(profile_of(params, std::vector<double>(params.size(), 0.0)), cap_bytes,
                           bytes_per_element, first_cap_bytes);
}

// method: "mgwfbp" or "optimal".
inline planner::merge_plan planned_groups(const std::vector<std::uint64_t>& params,
                                          const std::vector<double>& backward_s, double a, double b,
                                          std::size_t bytes_per_element, const std::string& method)
{
    const planner::profile p = profile_of(params, backward_s);
    const planner::linear_cost cost{a, b};
    if (method == "mgwfbp")
        return planner::mgwfbp(p, cost, bytes_per_element);
    if (method == "optimal")
        return planner::optimal(p, cost, bytes_per_element);
    throw usage_error("gradsync.torch.buckets: method '" + method + "' is not 'mgwfbp' or 'optimal'");
}

inline double predicted_s(const std::vector<std::uint64_t>& params, const std::vector<double>& backward_s,
                          const planner::merge_plan& groups, double a, double b, std::size_t bytes_per_element)
{
    return planner::simulate(profile_of(params, backward_s), groups, planner::linear_cost{a, b}, bytes_per_element)
        .predicted_s;
}

} // namespace gradsync::python
