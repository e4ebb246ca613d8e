// gradsync-plan --json: the plan, its timeline and the comparison as one JSON object on one
// line, numbers with 17 significant digits so that they read back to the same doubles.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include <gradsync/planner/merge_plan.hpp>
#include <gradsync/planner/profile.hpp>

#include "options.hpp"
#include "planning.hpp"

namespace plan_tool {

inline std::string num(double x)
{
    char text[40];
    std::snprintf(text, sizeof text, "%.17g", x);
    return text;
}

inline std::string json_string(const std::string& s)
{
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            char escaped[8];
            std::snprintf(escaped, sizeof escaped, "\\u%04x", unsigned(static_cast<unsigned char>(c)));
            out += escaped;
        } else {
            out += c;
        }
    }
    return out + "\"";
}

inline std::string json_groups(const gp::merge_plan& groups)
{
    std::string out = "[";
    for (std::size_t g = 0; g < groups.size(); ++g) {
        out += g ? ",[" : "[";
        for (std::size_t i = 0; i < groups[g].size(); ++i) {
            if (i)
                out += ',';
            out += std::to_string(groups[g][i]);
        }
        out += "]";
    }
    return out + "]";
}

template <class F>
std::string json_array(std::size_t n, F&& item)
{
    std::string out = "[";
    for (std::size_t i = 0; i < n; ++i) {
        if (i)
            out += ',';
        out += item(i);
    }
    return out + "]";
}

inline void print_json(const options& o, const gp::profile& p, const planned& chosen,
                       const std::vector<planned>& compared)
{
    const auto& spans = chosen.time.groups;
    std::string out = "{\"method\":" + json_string(chosen.method.name);
    out += ",\"profile\":" + json_string(o.profile);
    out += ",\"layers\":" + std::to_string(p.size());
    out += ",\"alpha\":" + num(*o.alpha) + ",\"beta\":" + num(*o.beta);
    out += ",\"bytes_per_element\":" + std::to_string(o.bytes_per_element);
    out += ",\"backward_s\":" + num(chosen.time.ready_s.empty() ? 0.0 : chosen.time.ready_s[0]);
    out += ",\"predicted_s\":" + num(chosen.time.predicted_s);
    out += ",\"groups\":" + json_groups(chosen.groups);
    out += ",\"group_bytes\":" + json_array(spans.size(), [&](std::size_t g) { return std::to_string(spans[g].bytes); });
    out += ",\"group_start_s\":" + json_array(spans.size(), [&](std::size_t g) { return num(spans[g].start_s); });
    out += ",\"group_end_s\":" + json_array(spans.size(), [&](std::size_t g) { return num(spans[g].end_s); });
    if (o.compare) {
        const double wfbp_s = compared.front().time.predicted_s;
        out += ",\"compare\":" + json_array(compared.size(), [&](std::size_t i) {
            const planned& m = compared[i];
            return "{\"method\":" + json_string(m.method.name) + ",\"group_count\":" + std::to_string(m.groups.size()) +
                   ",\"predicted_s\":" + num(m.time.predicted_s) +
                   ",\"speedup_vs_wfbp\":" + num(speedup(wfbp_s, m.time.predicted_s)) +
                   ",\"groups\":" + json_groups(m.groups) + "}";
        });
    }
    out += "}\n";
    std::fputs(out.c_str(), stdout);
}

} // namespace plan_tool
