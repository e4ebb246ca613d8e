// The examples' SVG line chart (examples/line_chart.hpp), read back by a small XML parser
// that fails on unbalanced tags, unquoted attributes and raw markup characters: one svg root,
// a polyline and dots per series where points are present, gaps at NaN, whiskers only where
// given, escaped text, x ticks at the given values, round linear ticks covering the data and
// powers of two on a log2 axis, and every kind of bad input refused with a message naming it.
#include <catch2/catch.hpp>

#include <gradsync/core/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "line_chart.hpp"

namespace {

using Catch::Matchers::Contains;
using gradsync_examples::axis_range;
using gradsync_examples::axis_scale;
using gradsync_examples::chart_series;
using gradsync_examples::line_chart;
using gradsync_examples::write_line_chart_svg;

constexpr double missing = std::numeric_limits<double>::quiet_NaN();
constexpr double inf = std::numeric_limits<double>::infinity();

struct element {
    std::string name;
    std::map<std::string, std::string> attributes; // unescaped
    std::string text;                              // the character data directly inside, unescaped

    const std::string& at(const std::string& attribute) const
    {
        INFO("<" << name << "> has no " << attribute);
        REQUIRE(attributes.count(attribute) == 1);
        return attributes.at(attribute);
    }
    double number(const std::string& attribute) const { return std::stod(at(attribute)); }
};

// The five predefined entities; any other '&', and any '<', fails the test.
std::string unescaped(std::string_view s)
{
    static const std::pair<std::string_view, char> entities[] = {
        {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
    INFO("in: " << s);
    REQUIRE(s.find('<') == std::string_view::npos);
    std::string out;
    for (std::size_t i = 0; i < s.size();) {
        if (s[i] != '&') {
            out += s[i++];
            continue;
        }
        const auto known = std::find_if(std::begin(entities), std::end(entities),
                                        [&](const auto& e) { return s.substr(i).starts_with(e.first); });
        REQUIRE(known != std::end(entities));
        out += known->second;
        i += known->first.size();
    }
    return out;
}

bool blank(std::string_view s)
{
    return s.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

// Every element in document order; fails unless the document is one well-formed svg element.
std::vector<element> parse_svg(const std::string& svg)
{
    std::vector<element> all;
    std::vector<std::size_t> open;
    int roots = 0;
    for (std::size_t i = 0; i < svg.size();) {
        if (svg[i] != '<') {
            const std::size_t end = std::min(svg.find('<', i), svg.size());
            const std::string_view text(svg.data() + i, end - i);
            if (open.empty())
                REQUIRE(blank(text));
            else
                all[open.back()].text += unescaped(text);
            i = end;
            continue;
        }
        const std::size_t close = svg.find('>', i);
        REQUIRE(close != std::string::npos);
        std::string_view tag(svg.data() + i + 1, close - i - 1);
        i = close + 1;
        INFO("tag: <" << tag << ">");
        if (tag.starts_with('/')) {
            REQUIRE(!open.empty());
            REQUIRE(all[open.back()].name == tag.substr(1));
            open.pop_back();
            continue;
        }
        const bool empty = tag.ends_with('/');
        if (empty)
            tag.remove_suffix(1);
        element e;
        std::size_t k = std::min(tag.find(' '), tag.size());
        e.name = tag.substr(0, k);
        REQUIRE(!e.name.empty());
        while (k < tag.size()) {
            if (tag[k] == ' ') {
                ++k;
                continue;
            }
            const std::size_t eq = tag.find("=\"", k);
            REQUIRE(eq != std::string_view::npos);
            const std::size_t end = tag.find('"', eq + 2);
            REQUIRE(end != std::string_view::npos);
            const std::string key(tag.substr(k, eq - k));
            REQUIRE(key.find_first_of(" \"'<>&") == std::string::npos);
            REQUIRE(e.attributes.emplace(key, unescaped(tag.substr(eq + 2, end - eq - 2))).second);
            k = end + 1;
        }
        if (open.empty()) {
            ++roots;
            REQUIRE(e.name == "svg");
        }
        all.push_back(e);
        if (!empty)
            open.push_back(all.size() - 1);
    }
    REQUIRE(open.empty());
    REQUIRE(roots == 1);
    return all;
}

std::string svg_text(const line_chart& chart)
{
    std::ostringstream out;
    write_line_chart_svg(out, chart);
    return out.str();
}

// The elements called name, those whose attribute has the value when one is given.
std::vector<element> elements(const std::vector<element>& all, const std::string& name,
                              const std::string& attribute = "", const std::string& value = "")
{
    std::vector<element> out;
    for (const element& e : all) {
        const auto a = e.attributes.find(attribute);
        if (e.name == name && (attribute.empty() || (a != e.attributes.end() && a->second == value)))
            out.push_back(e);
    }
    return out;
}

std::vector<std::string> text_of(const std::vector<element>& all)
{
    std::vector<std::string> out;
    for (const element& t : elements(all, "text"))
        out.push_back(t.text);
    return out;
}

std::vector<std::pair<double, double>> points(const element& polyline)
{
    std::vector<std::pair<double, double>> out;
    std::istringstream in(polyline.at("points"));
    double x = 0, y = 0;
    char comma = 0;
    while (in >> x >> comma >> y) {
        REQUIRE(comma == ',');
        out.emplace_back(x, y);
    }
    REQUIRE(in.eof());
    return out;
}

std::size_t polyline_points(const std::vector<element>& all, const std::string& colour)
{
    std::size_t n = 0;
    for (const element& p : elements(all, "polyline", "stroke", colour))
        n += points(p).size();
    return n;
}

// The y axis' tick labels (right-aligned at the left), bottom to top, with their heights.
std::vector<std::pair<double, double>> y_ticks(const std::vector<element>& all)
{
    std::vector<std::pair<double, double>> out;
    for (const element& t : elements(all, "text", "text-anchor", "end")) {
        INFO("tick label " << t.text);
        REQUIRE(t.text != "-0");
        out.emplace_back(std::stod(t.text), t.number("y"));
    }
    std::sort(out.begin(), out.end());
    return out;
}

std::vector<double> tick_values(const std::vector<element>& all)
{
    std::vector<double> out;
    for (const auto& [value, y] : y_ticks(all))
        out.push_back(value);
    return out;
}

const std::vector<double> ranks{1, 4, 8, 16, 32};

line_chart accuracy_chart()
{
    return {.title = "LeNet on Fashion-MNIST",
            .x_label = "ranks",
            .y_label = "test accuracy (%)",
            .x = ranks,
            .series = {{.name = "Sum", .colour = "#1f77b4", .y = {90.1, 89.7, 88.9, 87.2, 85.0}},
                       {.name = "Average", .colour = "#ff7f0e", .y = {90.1, 89.9, 89.5, 88.8, 88.1}},
                       {.name = "Adasum", .colour = "#2ca02c", .y = {90.1, 90.0, 89.8, 89.6, 89.3}, .dashed = true}}};
}

} // namespace

TEST_CASE("a chart is one svg document with a polyline and a dot per point of each series")
{
    const line_chart chart = accuracy_chart();
    const std::vector<element> all = parse_svg(svg_text(chart));
    REQUIRE(all.front().name == "svg");
    CHECK(all.front().at("xmlns") == "http://www.w3.org/2000/svg");
    CHECK(all[1].name == "rect");
    CHECK(all[1].at("fill") == "white");
    for (const element& e : all) {
        CHECK(std::set<std::string>{"svg", "rect", "text", "line", "polyline", "circle", "path"}.count(e.name) == 1);
        for (const auto& [key, value] : e.attributes) {
            CHECK(key.find("href") == std::string::npos);
            CHECK(!key.starts_with("on"));
        }
    }
    CHECK(elements(all, "text", "font-size", "15").at(0).text == chart.title);
    const std::vector<std::string> texts = text_of(all);
    for (const chart_series& s : chart.series) {
        const auto lines = elements(all, "polyline", "stroke", s.colour);
        REQUIRE(lines.size() == 1);
        const auto dots = elements(all, "circle", "fill", s.colour);
        REQUIRE(dots.size() == ranks.size());
        const auto line = points(lines[0]);
        REQUIRE(line.size() == ranks.size());
        for (std::size_t k = 0; k < line.size(); ++k) {
            CHECK(line[k].first == dots[k].number("cx"));
            CHECK(line[k].second == dots[k].number("cy"));
        }
        CHECK(lines[0].attributes.count("stroke-dasharray") == (s.dashed ? 1u : 0u));
        CHECK(std::count(texts.begin(), texts.end(), s.name) == 1); // the legend
    }
    CHECK(elements(all, "path").empty());
}

TEST_CASE("x ticks sit at exactly the given values on a log2 axis")
{
    const std::vector<element> all = parse_svg(svg_text(accuracy_chart()));
    std::vector<element> labels;
    for (const element& t : elements(all, "text", "text-anchor", "middle"))
        if (!t.attributes.count("transform") && !t.attributes.count("font-size") && t.text != "ranks")
            labels.push_back(t);
    REQUIRE(labels.size() == ranks.size());
    std::vector<double> at;
    for (std::size_t k = 0; k < ranks.size(); ++k) {
        CHECK(labels[k].text == std::to_string(int(ranks[k])));
        at.push_back(labels[k].number("x"));
    }
    // log2: 1 -> 4 is two steps of 4 -> 8, 8 -> 16 and 16 -> 32 one each.
    const double octave = at[2] - at[1];
    CHECK(octave > 0);
    CHECK(at[1] - at[0] == Approx(2 * octave));
    CHECK(at[3] - at[2] == Approx(octave));
    CHECK(at[4] - at[3] == Approx(octave));
    // A tick mark under each label, and each series' dots above them.
    std::vector<double> marks;
    for (const element& l : elements(all, "line", "stroke", "black"))
        if (l.number("x1") == l.number("x2") && l.number("y2") - l.number("y1") == 5)
            marks.push_back(l.number("x1"));
    CHECK(marks == at);
    std::vector<double> dots;
    for (const element& c : elements(all, "circle", "fill", "#1f77b4"))
        dots.push_back(c.number("cx"));
    CHECK(dots == at);
}

TEST_CASE("linear ticks cover the data range in steps of 1, 2 or 5 times a power of ten")
{
    const std::vector<std::vector<double>> data{
        {90.1, 89.7, 88.9, 87.2, 85.0}, {0.012, 0.047, 0.03, 0.02, 0.041}, {-3, 0, 4, 12, 7},
        {1234, 98765, 5000, 20000, 70000}, {0.3, 0.1, 0.7, 0.2, 0.4}};
    for (const std::vector<double>& y : data) {
        line_chart chart = accuracy_chart();
        chart.series = {{.name = "one", .colour = "red", .y = y}};
        const std::vector<element> all = parse_svg(svg_text(chart));
        const auto ticks = y_ticks(all);
        const double lo = *std::min_element(y.begin(), y.end()), hi = *std::max_element(y.begin(), y.end());
        CAPTURE(lo, hi);
        REQUIRE(ticks.size() >= 3);
        CHECK(ticks.size() <= 11);
        const double step = ticks[1].first - ticks[0].first;
        const double mantissa = step / std::pow(10.0, std::floor(std::log10(step) + 1e-9));
        CAPTURE(step, mantissa);
        CHECK((mantissa == Approx(1) || mantissa == Approx(2) || mantissa == Approx(5)));
        for (std::size_t k = 1; k < ticks.size(); ++k) {
            CHECK(ticks[k].first - ticks[k - 1].first == Approx(step));
            // Evenly spaced, upwards.
            CHECK(ticks[k - 1].second - ticks[k].second == Approx(ticks[0].second - ticks[1].second).margin(0.01));
        }
        CHECK(ticks.front().first <= lo);
        CHECK(ticks.back().first >= hi);
        CHECK(ticks.front().first > lo - step);
        CHECK(ticks.back().first < hi + step);
        // Each dot lies where the ticks say its value is (labels sit 4 px below their line).
        const auto dots = elements(all, "circle", "fill", "red");
        REQUIRE(dots.size() == y.size());
        const double per_unit = (ticks[0].second - ticks[1].second) / step;
        for (std::size_t k = 0; k < y.size(); ++k)
            CHECK(dots[k].number("cy") ==
                  Approx(ticks[0].second - 4 - (y[k] - ticks[0].first) * per_unit).margin(0.05));
    }
}

TEST_CASE("a fixed y range is ticked inside it, on either scale")
{
    line_chart chart = accuracy_chart();
    chart.y_range = axis_range{0, 100};
    CHECK(tick_values(parse_svg(svg_text(chart))) == std::vector<double>{0, 20, 40, 60, 80, 100});
    chart.y_range = axis_range{84.5, 90.5};
    CHECK(tick_values(parse_svg(svg_text(chart))) == std::vector<double>{85, 86, 87, 88, 89, 90});
    chart.y_scale = axis_scale::log2;
    chart.y_range = axis_range{0.5, 256};
    CHECK(tick_values(parse_svg(svg_text(chart))) == std::vector<double>{0.5, 1, 2, 4, 8, 16, 32, 64, 128, 256});
}

TEST_CASE("a log2 y axis is ticked at powers of two covering the data and y_include")
{
    line_chart chart{.x = ranks,
                     .y_scale = axis_scale::log2,
                     .series = {{.name = "speedup", .colour = "blue", .y = {3, 6.5, 12, 20, 50}}}};
    CHECK(tick_values(parse_svg(svg_text(chart))) == std::vector<double>{2, 4, 8, 16, 32, 64});
    chart.y_include = {1};
    CHECK(tick_values(parse_svg(svg_text(chart))) == std::vector<double>{1, 2, 4, 8, 16, 32, 64});
    chart.y_include = {0.3};
    CHECK(tick_values(parse_svg(svg_text(chart))).front() == 0.25);
}

TEST_CASE("NaN points leave gaps in the line and have no dot")
{
    line_chart chart = accuracy_chart();
    chart.series[0].y = {90, 89, missing, 87, 86}; // two runs of two
    chart.series[1].y = {90, missing, 88, 87, 86}; // a lone point, then a run of three
    chart.series[2].y = {missing, missing, missing, missing, missing};
    const std::vector<element> all = parse_svg(svg_text(chart));

    const auto sum = elements(all, "polyline", "stroke", "#1f77b4");
    REQUIRE(sum.size() == 2);
    CHECK(points(sum[0]).size() == 2);
    CHECK(points(sum[1]).size() == 2);
    CHECK(elements(all, "circle", "fill", "#1f77b4").size() == 4);
    CHECK(polyline_points(all, "#1f77b4") == 4);

    const auto average = elements(all, "polyline", "stroke", "#ff7f0e");
    REQUIRE(average.size() == 1);
    CHECK(points(average[0]).size() == 3);
    CHECK(elements(all, "circle", "fill", "#ff7f0e").size() == 4);

    CHECK(elements(all, "polyline", "stroke", "#2ca02c").empty());
    CHECK(elements(all, "circle", "fill", "#2ca02c").empty());
    CHECK(elements(all, "line", "stroke", "#2ca02c").size() == 1); // still in the legend
}

TEST_CASE("whiskers are drawn only where both ends are given and widen the automatic range")
{
    line_chart chart = accuracy_chart();
    chart.series[0].low = {89.5, missing, 88.0, missing, 80.0};
    chart.series[0].high = {90.5, missing, 89.5, missing, 99.0};
    const std::vector<element> all = parse_svg(svg_text(chart));
    const auto whiskers = elements(all, "path", "stroke", "#1f77b4");
    REQUIRE(whiskers.size() == 3);
    CHECK(elements(all, "path").size() == 3);
    const auto dots = elements(all, "circle", "fill", "#1f77b4");
    const std::size_t at[] = {0, 2, 4};
    for (std::size_t w = 0; w < 3; ++w) {
        // "M x-4,y_low H x+4 M x,y_low V y_high M x-4,y_high H x+4"
        std::istringstream d(whiskers[w].at("d"));
        double left = 0, y_low = 0, right = 0, x = 0, y_low2 = 0, y_high = 0;
        char c[6] = {};
        d >> c[0] >> left >> c[1] >> y_low >> c[2] >> right >> c[3] >> x >> c[4] >> y_low2 >> c[5] >> y_high;
        REQUIRE(d);
        CHECK(std::string(c, 6) == "M,HM,V");
        CHECK(x == dots[at[w]].number("cx"));
        CHECK(left < x);
        CHECK(right > x);
        CHECK(y_low2 == y_low);
        const double cy = dots[at[w]].number("cy");
        CHECK(y_low > cy); // below the dot on the page
        CHECK(y_high < cy);
    }
    CHECK(tick_values(all).back() >= 99.0);
    CHECK(tick_values(all).front() <= 80.0);
}

TEST_CASE("x tick labels, when given, replace the x values under the ticks, escaped")
{
    line_chart chart = accuracy_chart();
    chart.x_tick_labels = {"a", "b", "c & d", "e", "f"};
    const std::vector<std::string> texts = text_of(parse_svg(svg_text(chart)));
    const auto count = [&](const std::string& text) { return std::count(texts.begin(), texts.end(), text); };
    for (const std::string& label : chart.x_tick_labels)
        CHECK(count(label) == 1);
    for (double x : chart.x)
        CHECK(count(gradsync_examples::line_chart_detail::number_text(x)) == 0);
}

TEST_CASE("text and attribute values are escaped for XML")
{
    line_chart chart = accuracy_chart();
    chart.title = "<&>";
    chart.x_label = "ranks \"N\" & 'more'";
    chart.series[0].name = "Sum </text><script>";
    chart.series[0].colour = "red\" onload=\"alert(1)";
    chart.series[1].name = std::string("tab\there, bell\a");
    const std::string svg = svg_text(chart);
    CHECK(svg.find("<&>") == std::string::npos);
    CHECK(svg.find("&lt;&amp;&gt;") != std::string::npos);
    CHECK(svg.find("<script") == std::string::npos);
    const std::vector<element> all = parse_svg(svg);
    const std::vector<std::string> texts = text_of(all);
    const auto count = [&](const std::string& text) { return std::count(texts.begin(), texts.end(), text); };
    CHECK(count("<&>") == 1);
    CHECK(count(chart.x_label) == 1);
    CHECK(count("Sum </text><script>") == 1);
    CHECK(count("tab\there, bell\xEF\xBF\xBD") == 1);
    CHECK(elements(all, "polyline", "stroke", chart.series[0].colour).size() == 1);
    for (const element& e : all)
        CHECK(e.attributes.count("onload") == 0);
}

namespace {

// The chart is refused with a usage_error naming the problem, before anything is written.
void require_refused(const line_chart& chart, const std::string& reason)
{
    std::ostringstream out;
    CAPTURE(reason);
    try {
        write_line_chart_svg(out, chart);
        FAIL("no error");
    } catch (const gradsync::usage_error& e) {
        CHECK_THAT(e.what(), Contains("line_chart: ") && Contains(reason));
    }
    CHECK(out.str().empty());
}

} // namespace

TEST_CASE("bad input is refused with a message naming what is wrong")
{
    line_chart chart = accuracy_chart();
    SECTION("x values")
    {
        chart.x.clear();
        require_refused(chart, "no x values");
        chart.x = {1, 0, 4, 8, 16};
        require_refused(chart, "x[1] is 0; x values must be positive");
        chart.x = {1, 4, -8, 16, 32};
        require_refused(chart, "x[2] is -8");
        chart.x = {missing, 4, 8, 16, 32};
        require_refused(chart, "x[0] is nan");
        chart.x = {1, 4, 8, inf, 32};
        require_refused(chart, "x[3] is inf");
        chart.x = {1, 8, 4, 16, 32};
        require_refused(chart, "x values must increase: x[2] = 4 follows x[1] = 8");
        chart.x = ranks;
        chart.x_tick_labels = {"one", "two"};
        require_refused(chart, "2 x tick labels for 5 x values");
    }
    SECTION("series lengths")
    {
        chart.series[1].y.pop_back();
        require_refused(chart, "series 1 ('Average') has 4 y values for 5 x values");
        chart.series[1].y = {1, 2, 3, 4, 5, 6};
        require_refused(chart, "series 1 ('Average') has 6 y values for 5 x values");
    }
    SECTION("y values")
    {
        chart.series[2].y[3] = inf;
        require_refused(chart, "series 2 ('Adasum') at x[3]: y is inf");
        chart.series[2].y[3] = 1;
        chart.series[0].y[1] = 0;
        chart.y_scale = axis_scale::log2;
        require_refused(chart, "series 0 ('Sum') at x[1]: y is 0; a log2 y axis needs positive values");
        chart.series[0].y[1] = 1;
        chart.y_include = {-1};
        require_refused(chart, "y_include[0] is -1");
        chart.y_scale = axis_scale::linear;
        chart.y_include = {missing};
        require_refused(chart, "y_include[0] is nan");
    }
    SECTION("whiskers")
    {
        chart.series[0].low = {1, 2, 3, 4, 5};
        require_refused(chart, "series 0 ('Sum') has 5 whisker lows and 0 highs for 5 x values");
        chart.series[0].high = {2, 3, 4, 5};
        chart.series[0].low = {1, 2, 3, 4};
        require_refused(chart, "has 4 whisker lows and 4 highs for 5 x values");
        chart.series[0].low = {1, 2, missing, 4, 5};
        chart.series[0].high = {2, 3, 4, 5, 6};
        require_refused(chart, "series 0 ('Sum') at x[2]: the whisker has only one end");
        chart.series[0].low = {1, 2, 3, 4, 7};
        require_refused(chart, "series 0 ('Sum') at x[4]: whisker low 7 is above its high 6");
        chart.series[0].low = {1, 2, 3, 4, -inf};
        require_refused(chart, "at x[4]: whisker low is -inf");
    }
    SECTION("fixed y range")
    {
        chart.y_range = axis_range{missing, 100};
        require_refused(chart, "y_range [nan, 100] is not finite");
        chart.y_range = axis_range{0, inf};
        require_refused(chart, "y_range [0, inf] is not finite");
        chart.y_range = axis_range{50, 50};
        require_refused(chart, "y_range [50, 50] is empty");
        chart.y_range = axis_range{0, 100};
        chart.y_scale = axis_scale::log2;
        require_refused(chart, "y_range [0, 100] starts at or below 0");
    }
    SECTION("nothing to scale the y axis by")
    {
        chart.series.clear();
        require_refused(chart, "no y value to scale the y axis by");
        chart.series = {{.name = "empty", .colour = "red", .y = {missing, missing, missing, missing, missing}}};
        require_refused(chart, "no y value to scale the y axis by");
    }
}

TEST_CASE("a single x value and a single y value still make a chart")
{
    const line_chart chart{.x = {8}, .series = {{.name = "one", .colour = "red", .y = {42}}}};
    const std::vector<element> all = parse_svg(svg_text(chart));
    const auto dots = elements(all, "circle", "fill", "red");
    REQUIRE(dots.size() == 1);
    CHECK(std::isfinite(dots[0].number("cx")));
    CHECK(std::isfinite(dots[0].number("cy")));
    const auto ticks = tick_values(all);
    CHECK(ticks.front() < 42);
    CHECK(ticks.back() > 42);
}
