// scale_charts: the scale study's charts (docs/results_scale.md) from scripts/scale_study.sh's
// CSVs (ranks,bytes,policy,side,seconds,exact,predicted). Per CSV (one platform), two SVG
// files in OUT_DIR:
//   scale_PLATFORM_time.svg    Sum: automatic's time against N, a line per size, and beside
//                              each (dashed) the fastest side's of either collection there;
//   scale_PLATFORM_adasum.svg  Adasum's time / Sum's against N, recursive halving, a line per
//                              size.
//
//   scale_charts OUT_DIR CSV...
#include "line_chart.hpp"

#include <gradsync/core/error.hpp>

#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace {

namespace gx = gradsync_examples;

struct point {
    int ranks = 0;
    long long bytes = 0;
    std::string policy, side;
};

bool operator<(const point& a, const point& b)
{
    return std::tie(a.ranks, a.bytes, a.policy, a.side) < std::tie(b.ranks, b.bytes, b.policy, b.side);
}

// seconds per (N, bytes, policy, side); the header and lines of another shape are refused.
std::map<point, double> read_csv(const std::string& path)
{
    std::ifstream in(path);
    if (!in)
        throw gradsync::usage_error("scale_charts: cannot read " + path);
    std::map<point, double> rows;
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
        if (number == 1 && line.rfind("ranks,", 0) == 0)
            continue;
        std::vector<std::string> f;
        std::stringstream s(line);
        for (std::string field; std::getline(s, field, ',');)
            f.push_back(field);
        if (f.size() < 5)
            throw gradsync::usage_error("scale_charts: " + path + " line " + std::to_string(number) +
                                        ": expected ranks,bytes,policy,side,seconds,...");
        try {
            rows[{std::stoi(f[0]), std::stoll(f[1]), f[2], f[3]}] = std::stod(f[4]);
        } catch (const std::logic_error&) {
            throw gradsync::usage_error("scale_charts: " + path + " line " + std::to_string(number) +
                                        ": a number is not a number");
        }
    }
    return rows;
}

std::string size_text(long long b)
{
    return b >= (1 << 20) ? std::to_string(b >> 20) + " MiB" : std::to_string(b >> 10) + " KiB";
}

const char* const colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};

void write(const gx::line_chart& chart, const std::filesystem::path& file)
{
    std::ofstream out(file);
    gx::write_line_chart_svg(out, chart);
    if (!out)
        throw gradsync::usage_error("scale_charts: cannot write " + file.string());
}

void charts(const std::filesystem::path& out_dir, const std::string& csv)
{
    const std::map<point, double> rows = read_csv(csv);
    std::set<int> ranks;
    std::set<long long> sizes;
    for (const auto& [p, seconds] : rows) {
        ranks.insert(p.ranks);
        sizes.insert(p.bytes);
    }
    const std::string platform = std::filesystem::path(csv).stem().string();
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const auto at = [&](int n, long long b, const std::string& policy, const std::string& side) {
        const auto it = rows.find({n, b, policy, side});
        return it == rows.end() ? nan : it->second;
    };

    gx::line_chart time;
    time.title = platform + ": automatic (solid) and the fastest side (dashed), Sum";
    time.x_label = "ranks";
    time.y_label = "simulated ms";
    time.y_scale = gx::axis_scale::log2;
    gx::line_chart adasum;
    adasum.title = platform + ": Adasum / Sum, recursive halving";
    adasum.x_label = "ranks";
    adasum.y_label = "Adasum's time / Sum's";
    adasum.y_include = {1.0};
    for (const int n : ranks) {
        time.x.push_back(n);
        adasum.x.push_back(n);
    }
    std::size_t c = 0;
    for (const long long b : sizes) {
        const char* colour = colours[c++ % std::size(colours)];
        gx::chart_series automatic{size_text(b), colour, {}, false, {}, {}};
        gx::chart_series fastest{size_text(b) + ", fastest", colour, {}, true, {}, {}};
        gx::chart_series ratio{size_text(b), colour, {}, false, {}, {}};
        for (const int n : ranks) {
            automatic.y.push_back(at(n, b, "sum", "automatic") * 1e3);
            double best = nan;
            for (const auto& [p, seconds] : rows)
                if (p.ranks == n && p.bytes == b && p.policy == "sum" && !(seconds * 1e3 >= best))
                    best = seconds * 1e3;
            fastest.y.push_back(best);
            ratio.y.push_back(at(n, b, "adasum", "recursive_halving") / at(n, b, "sum", "recursive_halving"));
        }
        time.series.push_back(std::move(automatic));
        time.series.push_back(std::move(fastest));
        adasum.series.push_back(std::move(ratio));
    }
    write(time, out_dir / ("scale_" + platform + "_time.svg"));
    write(adasum, out_dir / ("scale_" + platform + "_adasum.svg"));
}

} // namespace

int main(int argc, char** argv)
{
    if (argc < 3) {
        std::fprintf(stderr, "usage: scale_charts OUT_DIR CSV...\n");
        return 2;
    }
    try {
        for (int i = 2; i < argc; ++i)
            charts(argv[1], argv[i]);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
    return 0;
}
