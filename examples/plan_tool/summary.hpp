// gradsync-plan's readable output: the plan, its groups' spans and, with --compare, every
// planner's predicted time against wfbp's.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include <gradsync/planner/profile.hpp>
#include <gradsync/planner/timeline.hpp>

#include "options.hpp"
#include "planning.hpp"

namespace plan_tool {

// Seconds in the summary: six decimals, or six significant digits from 1e6 s up, where fixed
// notation would grow with the exponent (1e300 as 1e+300, not 301 digits).
inline std::string seconds(double x)
{
    char text[40];
    std::snprintf(text, sizeof text, std::abs(x) < 1e6 ? "%.6f" : "%.6g", x);
    return text;
}

inline void print_summary(const options& o, const gp::profile& p, const planned& chosen,
                          const std::vector<planned>& compared)
{
    const gp::timeline& t = chosen.time;
    const double backward = t.ready_s.empty() ? 0.0 : t.ready_s[0];
    std::printf("method: %s\n", chosen.method.name.c_str());
    std::printf("profile: %s (%zu layers)\n", o.profile.c_str(), p.size());
    std::printf("cost model: T(M) = %.6g s + %.6g s/B * M, %zu bytes per element\n", *o.alpha, *o.beta,
                o.bytes_per_element);
    std::printf("backward: %s s\n", seconds(backward).c_str());
    std::printf("predicted: %s s (%s s of communication not hidden by backward)\n", seconds(t.predicted_s).c_str(),
                seconds(t.predicted_s - backward).c_str());
    std::printf("groups: %zu\n", chosen.groups.size());
    std::printf("%6s  %-12s %14s %12s %12s\n", "group", "layers", "bytes", "start_s", "end_s");
    for (std::size_t g = 0; g < chosen.groups.size(); ++g) {
        const auto& layers = chosen.groups[g];
        const std::string range = std::to_string(layers.back()) + ".." + std::to_string(layers.front());
        std::printf("%6zu  %-12s %14llu %12s %12s\n", g, range.c_str(),
                    static_cast<unsigned long long>(t.groups[g].bytes), seconds(t.groups[g].start_s).c_str(),
                    seconds(t.groups[g].end_s).c_str());
    }
    if (!o.compare)
        return;
    const double wfbp_s = compared.front().time.predicted_s;
    std::printf("\n%-16s %7s %13s %8s\n", "method", "groups", "predicted_s", "vs wfbp");
    for (const planned& m : compared)
        std::printf("%-16s %7zu %13s %7.3fx\n", m.method.name.c_str(), m.groups.size(),
                    seconds(m.time.predicted_s).c_str(), speedup(wfbp_s, m.time.predicted_s));
}

} // namespace plan_tool
