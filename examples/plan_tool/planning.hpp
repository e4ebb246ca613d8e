// gradsync-plan's planning: the method a run uses, its plan and predicted timeline, and the
// planners --compare runs beside it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include <gradsync/planner/bucket.hpp>
#include <gradsync/planner/cost_model.hpp>
#include <gradsync/planner/merge_plan.hpp>
#include <gradsync/planner/mgwfbp.hpp>
#include <gradsync/planner/optimal.hpp>
#include <gradsync/planner/profile.hpp>
#include <gradsync/planner/single.hpp>
#include <gradsync/planner/timeline.hpp>
#include <gradsync/planner/wfbp.hpp>

#include "options.hpp"

namespace plan_tool {

namespace gp = gradsync::planner;

inline constexpr std::uint64_t compare_bucket_bytes = 25ull << 20; // PyTorch DDP's default bucket

// optimal tries every split point of every prefix, L(L+1)/2 of them, so its time grows with
// the square of the layers: beyond this many it runs only when --method names it, and the
// default is the linear mgwfbp.
inline constexpr std::size_t optimal_default_layers = 10000;

inline gp::merge_plan make_plan(const method_spec& m, const gp::profile& p, const gp::linear_cost& cost,
                                std::size_t bpe)
{
    if (m.name == "optimal")
        return gp::optimal(p, cost, bpe);
    if (m.name == "mgwfbp")
        return gp::mgwfbp(p, cost, bpe);
    if (m.name == "wfbp")
        return gp::wfbp(p);
    if (m.name == "single")
        return gp::single(p);
    return gp::bucket(p, m.cap_bytes, bpe);
}

struct planned {
    method_spec method;
    gp::merge_plan groups;
    gp::timeline time;
};

inline planned run_planner(const method_spec& m, const gp::profile& p, const gp::linear_cost& cost, std::size_t bpe)
{
    planned out{m, make_plan(m, p, cost, bpe), {}};
    out.time = gp::simulate(p, out.groups, cost, bpe);
    return out;
}

// Any plan's predicted time is at most r(0) + L·a + b·(all bytes). Refusing inputs where that
// bound comes near the largest double keeps every time the planners form finite, and the
// JSON free of infinities.
inline void check_times_finite(const gp::profile& p, const gp::linear_cost& cost, std::size_t bpe)
{
    double bytes = 0;
    for (std::uint64_t b : gp::layer_bytes(p, bpe))
        bytes += double(b);
    const double backward = p.empty() ? 0.0 : gp::ready_times(p)[0];
    const double bound = backward + double(p.size()) * cost.a + cost.b * bytes;
    if (!(bound <= std::numeric_limits<double>::max() / 4))
        fail("--alpha, --beta or the profile's numbers are too large: the predicted time overflows a double");
}

// Relative to wfbp: its predicted time over this one's (1 when both are zero).
inline double speedup(double wfbp_s, double predicted_s) { return predicted_s > 0 ? wfbp_s / predicted_s : 1.0; }

struct method_choice {
    method_spec method;
    bool optimal_runs; // whether --compare may run optimal
};

// The method for a profile of `layers` layers. A note on stderr, before planning starts,
// explains a long run, or a planner other than the default, up front.
inline method_choice choose_method(const options& o, std::size_t layers)
{
    method_spec method = o.method;
    const bool optimal_named = o.method_given && o.method.name == "optimal";
    const bool large = layers > optimal_default_layers;
    if (large && (optimal_named || !o.method_given || o.compare)) {
        char splits[32];
        std::snprintf(splits, sizeof splits, "%.2g", double(layers) * double(layers + 1) / 2);
        std::string then = "it can take minutes (mgwfbp plans in linear time)";
        if (!optimal_named) {
            then = "beyond " + std::to_string(optimal_default_layers) + " layers it runs only when --method names it, so ";
            then += o.method_given ? "--compare leaves it out" : "mgwfbp plans instead";
            if (!o.method_given && o.compare)
                then += " and --compare leaves optimal out";
        }
        const std::string note = std::to_string(layers) + " layers: optimal tries about " + splits +
                                 " split points, a number that grows with the square of the layers; " + then;
        std::fprintf(stderr, "gradsync-plan: note: %s\n", note.c_str());
    }
    if (large && !o.method_given)
        method = method_spec{"mgwfbp"};
    return {method, !large || optimal_named};
}

// Every planner, wfbp first, for --compare; the chosen one's run is reused.
inline std::vector<planned> compare_planners(const planned& chosen, bool optimal_runs, const gp::profile& p,
                                             const gp::linear_cost& cost, std::size_t bpe)
{
    std::vector<planned> compared;
    for (const method_spec& m : {method_spec{"wfbp"}, method_spec{"single"},
                                 method_spec{"bucket:" + std::to_string(compare_bucket_bytes), compare_bucket_bytes},
                                 method_spec{"mgwfbp"}, method_spec{"optimal"}}) {
        if (m.name == "optimal" && !optimal_runs)
            continue;
        compared.push_back(m.name == chosen.method.name ? chosen : run_planner(m, p, cost, bpe));
    }
    return compared;
}

} // namespace plan_tool
