// From measured backward times to a merge plan: the profile of the module's layers, averaged
// over the ranks so that every rank plans from the same one, and the cost model given or
// calibrated over the communicator. Collective.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <gradsync/collective/allreduce.hpp>
#include <gradsync/planner/profile.hpp>
#include <gradsync/runtime/calibration.hpp>
#include <gradsync/torch/options.hpp>

namespace gradsync::torch_binding {

inline planner::profile profile_of(const std::vector<std::string>& names, std::span<const std::size_t> sizes,
                                   std::span<const double> backward)
{
    planner::profile p;
    for (std::size_t l = 0; l < sizes.size(); ++l)
        p.push_back({names[l], sizes[l], backward[l], std::nullopt});
    return p;
}

// The ranks' mean backward times per layer (summed over `iterations` iterations in
// `measured`), the cost (options.cost, or calibrated with Policy and `algorithm` when zero)
// and options.plan_with's plan. `profile` receives the averaged profile.
template <element T, class Policy, communicator Comm, class Algorithm>
planner::merge_plan plan_measured(Comm& comm, const data_parallel_options& options, const Algorithm& algorithm,
                            const std::vector<std::string>& names, std::span<const std::size_t> sizes,
                            std::span<const double> measured, planner::profile& profile)
{
    std::vector<double> seconds(measured.begin(), measured.end());
    for (double& s : seconds)
        s /= double(options.measure_iterations);
    gradsync::allreduce(comm, std::span<double>(seconds), average{});
    profile = profile_of(names, sizes, seconds);
    planner::linear_cost cost = options.cost;
    if (cost.a == 0 && cost.b == 0) {
        std::size_t total = 0;
        for (std::size_t s : sizes)
            total += s;
        total = std::max<std::size_t>(total, 4096);
        const std::vector<std::size_t> counts{256, total / 4, total};
        cost = planner::calibrate<T>(comm, counts, 5, Policy{}, algorithm).cost;
        cost.a = std::max(cost.a, 0.0); // a fit's intercept can dip below zero
        cost.b = std::max(cost.b, 0.0);
    }
    return options.plan_with(profile, cost, sizeof(T));
}

} // namespace gradsync::torch_binding
