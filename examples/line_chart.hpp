// A line chart of the examples' results as a self-contained SVG 1.1 document (white
// background; no scripts, fonts or links), 760 x 460 px: x on a log2 axis (node or rank
// counts) with a tick at each given x value; y on a log2 or a linear axis; per series a
// polyline with a dot at each point, optional vertical whiskers (a spread such as the min to
// max over seeds) and an entry in the legend at the right. Text is escaped for XML.
//
// Header-only: the standard library and gradsync (its error type, and the timeline SVG's
// escaping of text, planner/svg.hpp), nothing of libtorch. A chart
// that cannot be drawn is a gradsync::usage_error naming what is wrong, thrown before
// anything is written.
#pragma once

#include <gradsync/core/error.hpp>
#include <gradsync/planner/xml_text.hpp>

#include <cmath>
#include <cstddef>
#include <initializer_list>
#include <limits>
#include <locale>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace gradsync_examples {

enum class axis_scale { linear, log2 };

struct axis_range {
    double low = 0, high = 0;
};

// y[i] is the value at the chart's x[i]; NaN marks a missing point, which breaks the line.
// low and high are the whisker's ends at each x (NaN in both: none there), or both empty.
// Every member has a default, so that an initializer may leave any out (-Wextra warns of
// members without one).
struct chart_series {
    std::string name{};
    std::string colour{}; // an SVG colour: "#1f77b4", "teal"
    std::vector<double> y{};
    bool dashed = false;
    std::vector<double> low{}, high{};
};

struct line_chart {
    std::string title{}, x_label{}, y_label{};
    std::vector<double> x{}; // positive and increasing
    std::vector<std::string> x_tick_labels{}; // the ticks' text ("4 KiB"); empty: the x values
    axis_scale y_scale = axis_scale::linear;
    // A fixed y axis (points outside it are drawn where they fall). Without it the axis spans
    // the values, whiskers and y_include, widened to round ticks: 1, 2 or 5 times a power of
    // ten on a linear axis, powers of two on a log2 one.
    std::optional<axis_range> y_range{};
    std::vector<double> y_include{}; // values the automatic range shows as well, e.g. a baseline
    std::vector<chart_series> series{};
};

namespace line_chart_detail {

inline std::string number_text(double v)
{
    std::ostringstream s;
    s.imbue(std::locale::classic());
    s << v;
    return s.str();
}

inline gradsync::usage_error chart_error(const std::string& what)
{
    return gradsync::usage_error("line_chart: " + what);
}

inline std::string series_text(const chart_series& s, std::size_t i)
{
    return "series " + std::to_string(i) + " ('" + s.name + "')";
}

inline void validate(const line_chart& chart)
{
    const std::vector<double>& x = chart.x;
    if (x.empty())
        throw chart_error("no x values");
    for (std::size_t i = 0; i < x.size(); ++i) {
        if (!std::isfinite(x[i]) || x[i] <= 0)
            throw chart_error("x[" + std::to_string(i) + "] is " + number_text(x[i]) +
                              "; x values must be positive and finite (log2 axis)");
        if (i > 0 && x[i] <= x[i - 1])
            throw chart_error("x values must increase: x[" + std::to_string(i) + "] = " + number_text(x[i]) +
                              " follows x[" + std::to_string(i - 1) + "] = " + number_text(x[i - 1]));
    }
    if (!chart.x_tick_labels.empty() && chart.x_tick_labels.size() != x.size())
        throw chart_error(std::to_string(chart.x_tick_labels.size()) + " x tick labels for " +
                          std::to_string(x.size()) + " x values");
    const bool log2 = chart.y_scale == axis_scale::log2;
    // NaN (a missing value) passes; where a value must be present the caller checks that.
    const auto check_y = [&](double v, const std::string& where) {
        if (std::isinf(v))
            throw chart_error(where + " is " + number_text(v) + "; y values must be finite (NaN: missing)");
        if (log2 && v <= 0)
            throw chart_error(where + " is " + number_text(v) + "; a log2 y axis needs positive values");
    };
    if (const auto& r = chart.y_range) {
        const std::string range = "y_range [" + number_text(r->low) + ", " + number_text(r->high) + "]";
        if (!std::isfinite(r->low) || !std::isfinite(r->high))
            throw chart_error(range + " is not finite");
        if (r->low >= r->high)
            throw chart_error(range + " is empty: low must be below high");
        if (log2 && r->low <= 0)
            throw chart_error(range + " starts at or below 0; a log2 y axis needs positive values");
    }
    for (std::size_t i = 0; i < chart.y_include.size(); ++i) {
        const std::string where = "y_include[" + std::to_string(i) + "]";
        if (std::isnan(chart.y_include[i]))
            throw chart_error(where + " is nan; y_include values must be finite");
        check_y(chart.y_include[i], where);
    }
    bool any_y = chart.y_range || !chart.y_include.empty();
    for (std::size_t i = 0; i < chart.series.size(); ++i) {
        const chart_series& s = chart.series[i];
        const std::string name = series_text(s, i);
        const std::string per_x = " for " + std::to_string(x.size()) + " x values";
        if (s.y.size() != x.size())
            throw chart_error(name + " has " + std::to_string(s.y.size()) + " y values" + per_x);
        if (s.low.size() != s.high.size() || (!s.low.empty() && s.low.size() != x.size()))
            throw chart_error(name + " has " + std::to_string(s.low.size()) + " whisker lows and " +
                              std::to_string(s.high.size()) + " highs" + per_x +
                              "; give both for every x (NaN where none) or neither");
        for (std::size_t k = 0; k < x.size(); ++k) {
            const std::string at = name + " at x[" + std::to_string(k) + "]";
            check_y(s.y[k], at + ": y");
            any_y = any_y || !std::isnan(s.y[k]);
            if (s.low.empty())
                continue;
            const double low = s.low[k], high = s.high[k];
            if (std::isnan(low) != std::isnan(high))
                throw chart_error(at + ": the whisker has only one end (low " + number_text(low) + ", high " +
                                  number_text(high) + ")");
            if (std::isnan(low))
                continue;
            check_y(low, at + ": whisker low");
            check_y(high, at + ": whisker high");
            if (low > high)
                throw chart_error(at + ": whisker low " + number_text(low) + " is above its high " +
                                  number_text(high));
            any_y = true;
        }
    }
    if (!any_y)
        throw chart_error("no y value to scale the y axis by; give a point, y_include or y_range");
}

// The y axis in its own units (log2 of the value on a log2 axis), and the ticks' values.
struct y_axis {
    bool log2;
    double low, high;
    std::vector<double> ticks;

    double unit(double y) const { return log2 ? std::log2(y) : y; }
};

// The smallest of 1, 2 or 5 times a power of ten that cuts the span into at most 8 steps.
inline double nice_step(double span)
{
    const double raw = span / 8, magnitude = std::pow(10.0, std::floor(std::log10(raw)));
    for (double m : {1.0, 2.0, 5.0})
        if (raw <= m * magnitude * (1 + 1e-9)) // a raw of 1.0000000000000002 still takes step 1
            return m * magnitude;
    return 10 * magnitude;
}

inline y_axis make_y_axis(const line_chart& chart)
{
    y_axis axis{chart.y_scale == axis_scale::log2, 0, 0, {}};
    // Ticks at k * step (log2: 2^k) for k = k0 .. k1; + 0.0 turns a tick at -0 into 0.
    const auto add_ticks = [&](double k0, double k1, double step) {
        for (double k = k0; k <= k1; ++k)
            axis.ticks.push_back(axis.log2 ? std::exp2(k) : k * step + 0.0);
    };
    if (const auto& r = chart.y_range) {
        axis.low = axis.unit(r->low);
        axis.high = axis.unit(r->high);
        const double step = axis.log2 ? 1 : nice_step(axis.high - axis.low);
        // The tolerance keeps a tick at an end of the range that the division misses by an ulp.
        add_ticks(std::ceil(axis.low / step - 1e-9), std::floor(axis.high / step + 1e-9), step);
        return axis;
    }
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    const auto cover = [&](double v) {
        if (!std::isnan(v)) {
            lo = std::fmin(lo, axis.unit(v));
            hi = std::fmax(hi, axis.unit(v));
        }
    };
    for (double v : chart.y_include)
        cover(v);
    for (const chart_series& s : chart.series) {
        for (double v : s.y)
            cover(v);
        for (double v : s.low)
            cover(v);
        for (double v : s.high)
            cover(v);
    }
    if (lo == hi) { // one value: an axis around it
        const double pad = axis.log2 || lo == 0 ? 1 : std::abs(lo) / 10;
        lo -= pad;
        hi += pad;
    }
    const double step = axis.log2 ? 1 : nice_step(hi - lo);
    const double k0 = std::floor(lo / step), k1 = std::ceil(hi / step);
    axis.low = k0 * step;
    axis.high = k1 * step;
    add_ticks(k0, k1, step);
    return axis;
}

} // namespace line_chart_detail

// Writes the chart; nothing when it cannot be drawn (the usage_error says why). The stream's
// state is the caller's to check, who knows what it writes to.
inline void write_line_chart_svg(std::ostream& out, const line_chart& chart)
{
    using gradsync::planner::detail::xml_escape; // the timeline SVG's: markup, quotes, bad UTF-8
    line_chart_detail::validate(chart);
    const line_chart_detail::y_axis axis = line_chart_detail::make_y_axis(chart);
    const double width = 760, height = 460, left = 70, right = width - 190, top = 50, bottom = height - 60;
    double lx0 = std::log2(chart.x.front()), lx1 = std::log2(chart.x.back());
    if (lx0 == lx1) { // one x value: in the middle
        lx0 -= 1;
        lx1 += 1;
    }
    auto px = [&](double x) { return left + (std::log2(x) - lx0) / (lx1 - lx0) * (right - left); };
    auto py = [&](double y) { return bottom - (axis.unit(y) - axis.low) / (axis.high - axis.low) * (bottom - top); };

    std::ostringstream svg;
    svg.imbue(std::locale::classic()); // numbers as SVG reads them, whatever the global locale
    svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
        << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
        << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
        << "<text x=\"" << width / 2 << "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">"
        << xml_escape(chart.title) << "</text>\n";
    for (double y : axis.ticks)
        svg << "<line x1=\"" << left << "\" x2=\"" << right << "\" y1=\"" << py(y) << "\" y2=\"" << py(y)
            << "\" stroke=\"#ddd\"/>\n"
            << "<text x=\"" << left - 8 << "\" y=\"" << py(y) + 4 << "\" text-anchor=\"end\">" << y << "</text>\n";
    for (std::size_t k = 0; k < chart.x.size(); ++k) {
        const double x = chart.x[k];
        svg << "<line x1=\"" << px(x) << "\" x2=\"" << px(x) << "\" y1=\"" << bottom << "\" y2=\"" << bottom + 5
            << "\" stroke=\"black\"/>\n"
            << "<text x=\"" << px(x) << "\" y=\"" << bottom + 20 << "\" text-anchor=\"middle\">";
        if (chart.x_tick_labels.empty())
            svg << x;
        else
            svg << xml_escape(chart.x_tick_labels[k]);
        svg << "</text>\n";
    }
    svg << "<line x1=\"" << left << "\" x2=\"" << right << "\" y1=\"" << bottom << "\" y2=\"" << bottom
        << "\" stroke=\"black\"/>\n"
        << "<line x1=\"" << left << "\" x2=\"" << left << "\" y1=\"" << top << "\" y2=\"" << bottom
        << "\" stroke=\"black\"/>\n"
        << "<text x=\"" << (left + right) / 2 << "\" y=\"" << height - 18 << "\" text-anchor=\"middle\">"
        << xml_escape(chart.x_label) << "</text>\n"
        << "<text transform=\"translate(20," << (top + bottom) / 2 << ") rotate(-90)\" text-anchor=\"middle\">"
        << xml_escape(chart.y_label) << "</text>\n";
    const std::size_t n = chart.x.size();
    for (std::size_t i = 0; i < chart.series.size(); ++i) {
        const chart_series& s = chart.series[i];
        const std::string colour = xml_escape(s.colour);
        const char* dash = s.dashed ? " stroke-dasharray=\"6 4\"" : "";
        // Whiskers first, so that the line and its dots stay on top: a vertical stroke with caps.
        for (std::size_t k = 0; k < s.low.size(); ++k)
            if (!std::isnan(s.low[k])) {
                const double x = px(chart.x[k]), y0 = py(s.low[k]), y1 = py(s.high[k]);
                svg << "<path fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"1.5\" d=\"M" << x - 4 << ","
                    << y0 << "H" << x + 4 << "M" << x << "," << y0 << "V" << y1 << "M" << x - 4 << "," << y1 << "H"
                    << x + 4 << "\"/>\n";
            }
        // One polyline per run of two or more points; a lone point has its dot only.
        for (std::size_t k = 0; k < n;) {
            std::size_t end = k;
            while (end < n && !std::isnan(s.y[end]))
                ++end;
            if (end - k >= 2) {
                svg << "<polyline fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"2\"" << dash
                    << " points=\"";
                for (std::size_t j = k; j < end; ++j)
                    svg << (j > k ? " " : "") << px(chart.x[j]) << "," << py(s.y[j]);
                svg << "\"/>\n";
            }
            k = end + 1;
        }
        for (std::size_t k = 0; k < n; ++k)
            if (!std::isnan(s.y[k]))
                svg << "<circle cx=\"" << px(chart.x[k]) << "\" cy=\"" << py(s.y[k]) << "\" r=\"3\" fill=\"" << colour
                    << "\"/>\n";
        const double ly = top + 10 + 22 * double(i);
        svg << "<line x1=\"" << right + 20 << "\" x2=\"" << right + 50 << "\" y1=\"" << ly << "\" y2=\"" << ly
            << "\" stroke=\"" << colour << "\" stroke-width=\"2\"" << dash << "/>\n"
            << "<text x=\"" << right + 56 << "\" y=\"" << ly + 4 << "\">" << xml_escape(s.name) << "</text>\n";
    }
    svg << "</svg>\n";
    out << svg.str();
}

} // namespace gradsync_examples
