// A plan's timeline as a self-contained SVG 1.1 picture (no scripts, fonts or links), about
// 1000 px wide, for people to look at:
//   lane 1  backward compute, one box per layer, L-1 ... 0 from left to right;
//   lane 2  one allreduce box per group, labelled with its group index;
//   between them a bar per group spanning the compute of the layers it merges, in the
//   group's colour (the layer boxes share it), so merged groups visibly span layers;
//   a dashed line at the predicted time, a time axis with ticks, and a legend.
// Every box carries a tooltip (an SVG title element). Text is escaped for XML; bytes that
// are not valid UTF-8 and control characters become U+FFFD. Cost O(L).
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

#include <gradsync/core/error.hpp>
#include <gradsync/planner/profile.hpp>
#include <gradsync/planner/timeline.hpp>
#include <gradsync/planner/xml_text.hpp>

namespace gradsync::planner {

namespace detail {

// Locale-independent fixed-point text.
inline std::string fixed(double v, int decimals)
{
    char buf[64];
    const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, decimals);
    return ec == std::errc() ? std::string(buf, end) : std::string("?");
}

} // namespace detail

inline void write_timeline_svg(std::ostream& out, const profile& p, const merge_plan& groups, const timeline& t,
                               const std::string& title)
{
    validate_plan(groups, p.size());
    if (t.ready_s.size() != p.size() || t.backward_start_s.size() != p.size() || t.groups.size() != groups.size() ||
        !std::isfinite(t.predicted_s))
        throw usage_error("gradsync::planner::write_timeline_svg: the timeline does not belong to this profile and "
                          "plan (simulate() them together)");
    using detail::fixed;
    using detail::xml_escape;
    constexpr double width = 1000, left = 130, right = 30, plot = width - left - right, height = 232;
    constexpr double compute_y = 48, lane_h = 40, bar_y = 92, bar_h = 6, comm_y = 104, axis_y = 160;
    const double span = t.predicted_s > 0 ? t.predicted_s * 1.04 : 1.0; // room right of the marker
    const auto x = [&](double s) { return left + std::clamp(s / span, 0.0, 1.0) * plot; };
    // Axis unit and "nice" tick step (1, 2 or 5 times a power of ten, about 8 ticks).
    const double scale = span < 1e-3 ? 1e6 : span < 1 ? 1e3 : 1;
    const char* unit = span < 1e-3 ? "us" : span < 1 ? "ms" : "s";
    const double raw = span * scale / 8, magnitude = std::pow(10.0, std::floor(std::log10(raw)));
    const double step = raw <= magnitude ? magnitude : raw <= 2 * magnitude ? 2 * magnitude
                                                   : raw <= 5 * magnitude ? 5 * magnitude
                                                                          : 10 * magnitude;
    const int decimals = std::max(0, -int(std::floor(std::log10(step) + 1e-9)));
    const auto time_text = [&](double s) { return fixed(s * scale, decimals + 2) + " " + unit; };
    static constexpr const char* palette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2",
                                              "#59a14f", "#edc948", "#b07aa1", "#9c755f"};
    const auto colour = [&](std::size_t g) { return palette[g % 8]; };
    // Text fits a box when about 6.5 px per character plus padding do.
    const auto fits = [](const std::string& s, double w) { return w >= 6.5 * double(s.size()) + 6; };

    std::string s;
    s += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    s += "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" + fixed(width, 0) + "\" height=\"" +
         fixed(height, 0) + "\" viewBox=\"0 0 " + fixed(width, 0) + " " + fixed(height, 0) +
         "\" font-family=\"sans-serif\" font-size=\"11\">\n";
    s += "<title>" + xml_escape(title) + "</title>\n";
    s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
    s += "<text x=\"" + fixed(left, 1) + "\" y=\"24\" font-size=\"16\" font-weight=\"bold\">" + xml_escape(title) +
         "</text>\n";
    s += "<text x=\"8\" y=\"" + fixed(compute_y + lane_h / 2 + 4, 1) + "\">backward compute</text>\n";
    s += "<text x=\"8\" y=\"" + fixed(comm_y + lane_h / 2 + 4, 1) + "\">allreduce</text>\n";

    for (std::size_t g = 0; g < groups.size(); ++g) {
        const std::size_t lo = groups[g].front(), hi = groups[g].back();
        const std::string layers = lo == hi ? "layer " + std::to_string(lo)
                                            : "layers " + std::to_string(lo) + "-" + std::to_string(hi);
        for (std::size_t l = hi + 1; l-- > lo;) {
            const double x0 = x(t.backward_start_s[l]), w = x(t.ready_s[l]) - x0;
            s += "<rect x=\"" + fixed(x0, 2) + "\" y=\"" + fixed(compute_y, 1) + "\" width=\"" + fixed(w, 2) +
                 "\" height=\"" + fixed(lane_h, 1) + "\" fill=\"" + colour(g) +
                 "\" fill-opacity=\"0.45\" stroke=\"white\" stroke-width=\"0.5\"><title>layer " + std::to_string(l) +
                 " " + xml_escape(p[l].name) + ": " + std::to_string(p[l].params) + " params, backward " +
                 time_text(t.backward_start_s[l]) + " to " + time_text(t.ready_s[l]) + " (group " +
                 std::to_string(g) + ")</title></rect>\n";
            const std::string label = std::to_string(l);
            if (fits(label, w))
                s += "<text x=\"" + fixed(x0 + w / 2, 2) + "\" y=\"" + fixed(compute_y + lane_h / 2 + 4, 1) +
                     "\" text-anchor=\"middle\">" + label + "</text>\n";
        }
        const double b0 = x(t.backward_start_s[hi]);
        s += "<rect x=\"" + fixed(b0, 2) + "\" y=\"" + fixed(bar_y, 1) + "\" width=\"" + fixed(x(t.ready_s[lo]) - b0, 2) +
             "\" height=\"" + fixed(bar_h, 1) + "\" fill=\"" + colour(g) + "\"><title>group " + std::to_string(g) +
             ": " + layers + "</title></rect>\n";
        const group_span& c = t.groups[g];
        const double c0 = x(c.start_s), cw = std::max(x(c.end_s) - c0, 1.0); // empty groups stay visible
        s += "<rect x=\"" + fixed(c0, 2) + "\" y=\"" + fixed(comm_y, 1) + "\" width=\"" + fixed(cw, 2) +
             "\" height=\"" + fixed(lane_h, 1) + "\" fill=\"" + colour(g) +
             "\" stroke=\"#333333\" stroke-width=\"0.5\"><title>group " + std::to_string(g) + ": " + layers + ", " +
             std::to_string(c.bytes) + " bytes, " + time_text(c.start_s) + " to " + time_text(c.end_s) +
             "</title></rect>\n";
        const std::string full = "g" + std::to_string(g) + ": " + layers, label = "g" + std::to_string(g);
        if (fits(label, cw))
            s += "<text x=\"" + fixed(c0 + cw / 2, 2) + "\" y=\"" + fixed(comm_y + lane_h / 2 + 4, 1) +
                 "\" text-anchor=\"middle\">" + (fits(full, cw) ? full : label) + "</text>\n";
    }

    s += "<line x1=\"" + fixed(left, 1) + "\" y1=\"" + fixed(axis_y, 1) + "\" x2=\"" + fixed(left + plot, 1) +
         "\" y2=\"" + fixed(axis_y, 1) + "\" stroke=\"black\"/>\n";
    for (double tick = 0; tick <= span * scale * (1 + 1e-9); tick += step) {
        const double tx = x(tick / scale);
        s += "<line x1=\"" + fixed(tx, 2) + "\" y1=\"" + fixed(axis_y, 1) + "\" x2=\"" + fixed(tx, 2) + "\" y2=\"" +
             fixed(axis_y + 5, 1) + "\" stroke=\"black\"/>\n";
        s += "<text x=\"" + fixed(tx, 2) + "\" y=\"" + fixed(axis_y + 18, 1) + "\" text-anchor=\"middle\">" +
             fixed(tick, decimals) + "</text>\n";
    }
    s += "<text x=\"" + fixed(left - 8, 1) + "\" y=\"" + fixed(axis_y + 18, 1) + "\" text-anchor=\"end\">time (" +
         unit + ")</text>\n";

    const double px = x(t.predicted_s);
    s += "<line x1=\"" + fixed(px, 2) + "\" y1=\"" + fixed(compute_y - 8, 1) + "\" x2=\"" + fixed(px, 2) + "\" y2=\"" +
         fixed(axis_y, 1) + "\" stroke=\"#d62728\" stroke-width=\"1.5\" stroke-dasharray=\"5,3\"/>\n";
    s += "<text x=\"" + fixed(px - 4, 2) + "\" y=\"" + fixed(compute_y - 10, 1) +
         "\" text-anchor=\"end\" fill=\"#d62728\">predicted " + time_text(t.predicted_s) + "</text>\n";

    const double legend_y = 204;
    s += "<rect x=\"" + fixed(left, 1) + "\" y=\"" + fixed(legend_y - 9, 1) + "\" width=\"14\" height=\"10\" fill=\"" +
         colour(0) + "\" fill-opacity=\"0.45\"/>\n";
    s += "<text x=\"" + fixed(left + 20, 1) + "\" y=\"" + fixed(legend_y, 1) +
         "\">backward compute of a layer (index)</text>\n";
    s += "<rect x=\"" + fixed(left + 240, 1) + "\" y=\"" + fixed(legend_y - 9, 1) +
         "\" width=\"14\" height=\"10\" fill=\"" + colour(0) + "\" stroke=\"#333333\" stroke-width=\"0.5\"/>\n";
    s += "<text x=\"" + fixed(left + 260, 1) + "\" y=\"" + fixed(legend_y, 1) +
         "\">allreduce of a group (gN); the bar above spans its layers</text>\n";
    s += "<line x1=\"" + fixed(left + 600, 1) + "\" y1=\"" + fixed(legend_y - 4, 1) + "\" x2=\"" +
         fixed(left + 620, 1) + "\" y2=\"" + fixed(legend_y - 4, 1) +
         "\" stroke=\"#d62728\" stroke-width=\"1.5\" stroke-dasharray=\"5,3\"/>\n";
    s += "<text x=\"" + fixed(left + 626, 1) + "\" y=\"" + fixed(legend_y, 1) + "\">predicted time</text>\n";
    s += "</svg>\n";
    out << s;
    if (!out)
        throw usage_error("gradsync::planner::write_timeline_svg: the output stream failed");
}

} // namespace gradsync::planner
