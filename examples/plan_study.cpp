// plan_study: the simulation study of the MG-WFBP paper (Shi, Chu and Li, INFOCOM 2019) on
// measured layer profiles. For N = 4 … 64 nodes it predicts the speedup of synchronous
// data-parallel SGD with WFBP (one allreduce per layer), SyncEASGD (one allreduce of all
// gradients), DDP-style 25 MiB buckets, MG-WFBP and the exact optimum, in two scenarios:
//   paper: the paper's 10 GbE cluster, ring allreduce, the profile's own compute times;
//   fast:  the same network, forward and backward 10x shorter (newer GPUs, same network),
//          so that communication dominates.
// Iteration time = forward + the plan's predicted time (backward plus the communication it does
// not hide); one node needs forward + backward; speedup = N x one node's time / iteration time.
// Prints one markdown table per model and scenario, writes one SVG chart of speedup against N
// per table, and per model the timelines of MG-WFBP's and the optimal plan (fast, N = 16).
//
// usage: plan_study --out DIR PROFILE.csv [PROFILE.csv ...]
#include <gradsync/error.hpp>
#include <gradsync/planner.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace gp = gradsync::planner;
namespace fs = std::filesystem;

// The paper's measured ring start-up a = 2(N−1)α at N = 2, 4, 8 on its 10 GbE cluster;
// α is the least-squares fit of 2(N−1)α to the three (through the origin; they agree exactly).
double fitted_alpha()
{
    const double ranks[] = {2, 4, 8};
    const double startup_s[] = {90.52e-6, 271.56e-6, 633.64e-6};
    double xy = 0, xx = 0;
    for (int i = 0; i < 3; ++i) {
        const double x = 2 * (ranks[i] - 1);
        xy += x * startup_s[i];
        xx += x * x;
    }
    return xy / xx;
}

constexpr double beta_10gbe = 1 / 1.25e9; // seconds per byte at the 10 Gb/s line rate
const std::vector<int> node_counts{4, 8, 16, 32, 64};
constexpr int timeline_nodes = 16;

struct scenario {
    const char* key;
    const char* title;
    double compute_scale;
};
const std::vector<scenario> scenarios{
    {"paper", "10 GbE ring, measured compute", 1.0},
    {"fast", "10 GbE ring, compute 10x faster", 0.1},
};

struct planner {
    const char* name;
    const char* color;
    std::function<gp::plan(const gp::profile&, const gp::linear_cost&)> make;
};
const std::vector<planner> planners{
    {"WFBP", "#1f77b4", [](const gp::profile& p, const gp::linear_cost&) { return gp::wfbp(p); }},
    {"SyncEASGD", "#ff7f0e", [](const gp::profile& p, const gp::linear_cost&) { return gp::single(p); }},
    {"bucket 25 MiB", "#2ca02c",
     [](const gp::profile& p, const gp::linear_cost&) { return gp::bucket(p, std::uint64_t(25) << 20); }},
    {"MG-WFBP", "#d62728", [](const gp::profile& p, const gp::linear_cost& c) { return gp::mgwfbp(p, c); }},
    {"optimal", "#9467bd", [](const gp::profile& p, const gp::linear_cost& c) { return gp::optimal(p, c); }},
};
constexpr std::size_t mgwfbp_at = 3, optimal_at = 4;

gp::profile scaled(const gp::profile& p, double s)
{
    gp::profile out = p;
    for (auto& layer : out) {
        layer.backward_s *= s;
        if (layer.forward_s)
            *layer.forward_s *= s;
    }
    return out;
}

double forward_total(const gp::profile& p)
{
    double sum = 0;
    for (const auto& layer : p)
        sum += *layer.forward_s;
    return sum;
}

double backward_total(const gp::profile& p)
{
    double sum = 0;
    for (const auto& layer : p)
        sum += layer.backward_s;
    return sum;
}

std::string xml_escaped(const std::string& s)
{
    std::string out;
    for (char c : s) {
        if (c == '&')
            out += "&amp;";
        else if (c == '<')
            out += "&lt;";
        else if (c == '>')
            out += "&gt;";
        else
            out += c;
    }
    return out;
}

struct line {
    std::string name;
    const char* color;
    std::vector<double> y; // one per node count
    bool dashed = false;
};

// Speedup against N on log-log axes (powers of two), so that the linear ideal is a straight
// line and small speedups stay readable; one polyline per planner and the ideal.
void write_speedup_chart(const fs::path& file, const std::string& title, const std::vector<line>& lines)
{
    const double width = 760, height = 460, left = 70, right = width - 190, top = 50, bottom = height - 60;
    double y_min = 1, y_max = 1;
    for (const line& l : lines)
        for (double y : l.y) {
            y_min = std::min(y_min, y);
            y_max = std::max(y_max, y);
        }
    const double ly0 = std::floor(std::log2(y_min)), ly1 = std::ceil(std::log2(y_max));
    const double lx0 = std::log2(node_counts.front()), lx1 = std::log2(node_counts.back());
    auto px = [&](int n) { return left + (std::log2(n) - lx0) / (lx1 - lx0) * (right - left); };
    auto py = [&](double y) { return bottom - (std::log2(y) - ly0) / (ly1 - ly0) * (bottom - top); };

    std::ostringstream svg;
    svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
        << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
        << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
        << "<text x=\"" << width / 2 << "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">" << xml_escaped(title)
        << "</text>\n";
    for (double e = ly0; e <= ly1; ++e) {
        const double y = std::exp2(e);
        svg << "<line x1=\"" << left << "\" x2=\"" << right << "\" y1=\"" << py(y) << "\" y2=\"" << py(y)
            << "\" stroke=\"#ddd\"/>\n"
            << "<text x=\"" << left - 8 << "\" y=\"" << py(y) + 4 << "\" text-anchor=\"end\">" << y << "</text>\n";
    }
    for (int n : node_counts)
        svg << "<line x1=\"" << px(n) << "\" x2=\"" << px(n) << "\" y1=\"" << bottom << "\" y2=\"" << bottom + 5
            << "\" stroke=\"black\"/>\n"
            << "<text x=\"" << px(n) << "\" y=\"" << bottom + 20 << "\" text-anchor=\"middle\">" << n << "</text>\n";
    svg << "<line x1=\"" << left << "\" x2=\"" << right << "\" y1=\"" << bottom << "\" y2=\"" << bottom
        << "\" stroke=\"black\"/>\n"
        << "<line x1=\"" << left << "\" x2=\"" << left << "\" y1=\"" << top << "\" y2=\"" << bottom
        << "\" stroke=\"black\"/>\n"
        << "<text x=\"" << (left + right) / 2 << "\" y=\"" << height - 18
        << "\" text-anchor=\"middle\">nodes N</text>\n"
        << "<text transform=\"translate(20," << (top + bottom) / 2
        << ") rotate(-90)\" text-anchor=\"middle\">speedup over one node (log scale)</text>\n";
    for (std::size_t i = 0; i < lines.size(); ++i) {
        const line& l = lines[i];
        const char* dash = l.dashed ? " stroke-dasharray=\"6 4\"" : "";
        svg << "<polyline fill=\"none\" stroke=\"" << l.color << "\" stroke-width=\"2\"" << dash << " points=\"";
        for (std::size_t k = 0; k < node_counts.size(); ++k)
            svg << (k ? " " : "") << px(node_counts[k]) << "," << py(l.y[k]);
        svg << "\"/>\n";
        for (std::size_t k = 0; k < node_counts.size(); ++k)
            svg << "<circle cx=\"" << px(node_counts[k]) << "\" cy=\"" << py(l.y[k]) << "\" r=\"3\" fill=\"" << l.color
                << "\"/>\n";
        const double ly = top + 10 + 22 * double(i);
        svg << "<line x1=\"" << right + 20 << "\" x2=\"" << right + 50 << "\" y1=\"" << ly << "\" y2=\"" << ly
            << "\" stroke=\"" << l.color << "\" stroke-width=\"2\"" << dash << "/>\n"
            << "<text x=\"" << right + 56 << "\" y=\"" << ly + 4 << "\">" << xml_escaped(l.name) << "</text>\n";
    }
    svg << "</svg>\n";
    std::ofstream out(file, std::ios::binary);
    out << svg.str();
    if (!out)
        throw gradsync::usage_error("plan_study: cannot write " + file.string());
}

void write_timeline(const fs::path& file, const gp::profile& p, const gp::plan& groups, const gp::linear_cost& cost,
                    const std::string& title)
{
    std::ofstream out(file, std::ios::binary);
    gp::write_timeline_svg(out, p, groups, gp::simulate(p, groups, cost), title);
    if (!out)
        throw gradsync::usage_error("plan_study: cannot write " + file.string());
}

struct worst_case {
    double ratio = 1;
    std::string where;
};

void study(const fs::path& csv, const fs::path& out_dir, worst_case& worst)
{
    const gp::profile measured = gp::read_profile_csv(csv);
    for (std::size_t l = 0; l < measured.size(); ++l)
        if (!measured[l].forward_s)
            throw gradsync::usage_error(csv.string() + ": layer " + std::to_string(l) +
                                        " has no forward_ms; the study needs forward times");
    const std::string model = csv.stem().string();
    const gp::link_parameters link{fitted_alpha(), beta_10gbe, 0};

    for (const scenario& sc : scenarios) {
        const gp::profile p = scaled(measured, sc.compute_scale);
        const double forward = forward_total(p), backward = backward_total(p);
        const double single_node = forward + backward;
        std::printf("\n### %s, %s\n\n", model.c_str(), sc.title);
        std::printf("One node: forward %.2f ms + backward %.2f ms = %.2f ms per iteration.\n\n", forward * 1e3,
                    backward * 1e3, single_node * 1e3);
        std::printf("| N | a (µs) |");
        for (const planner& pl : planners)
            std::printf(" %s |", pl.name);
        std::printf(" optimal / MG-WFBP | groups MG-WFBP / optimal |\n|--:|--:|");
        for (std::size_t i = 0; i < planners.size(); ++i)
            std::printf("--:|");
        std::printf("--:|--:|\n");

        std::vector<line> lines;
        for (const planner& pl : planners)
            lines.push_back({pl.name, pl.color, {}});
        line ideal{"linear (ideal)", "#888888", {}, true};
        for (int n : node_counts) {
            const gp::linear_cost cost = gp::ring_cost(link, n);
            std::vector<double> speedup;
            std::vector<std::size_t> group_count;
            for (const planner& pl : planners) {
                const gp::plan groups = pl.make(p, cost);
                const double iteration = forward + gp::simulate(p, groups, cost).predicted_s;
                speedup.push_back(n * single_node / iteration);
                group_count.push_back(groups.size());
            }
            const double ratio = speedup[optimal_at] / speedup[mgwfbp_at];
            if (ratio > worst.ratio)
                worst = {ratio, model + ", " + sc.key + ", N = " + std::to_string(n)};
            std::printf("| %d | %.1f |", n, cost.a * 1e6);
            for (std::size_t i = 0; i < planners.size(); ++i) {
                std::printf(" %.2f |", speedup[i]);
                lines[i].y.push_back(speedup[i]);
            }
            std::printf(" %.4f | %zu / %zu |\n", ratio, group_count[mgwfbp_at], group_count[optimal_at]);
            ideal.y.push_back(n);
        }
        lines.push_back(ideal);
        write_speedup_chart(out_dir / ("plan_speedup_" + model + "_" + sc.key + ".svg"),
                            model + ": speedup, " + sc.title, lines);
    }

    // The timelines: the fast scenario at N = 16, where merging matters most.
    const scenario& fast = scenarios.back();
    const gp::profile p = scaled(measured, fast.compute_scale);
    const gp::linear_cost cost = gp::ring_cost(link, timeline_nodes);
    const std::string where = model + ", " + fast.title + ", N = " + std::to_string(timeline_nodes);
    for (std::size_t i : {mgwfbp_at, optimal_at}) {
        const std::string key = i == mgwfbp_at ? "mgwfbp" : "optimal";
        write_timeline(out_dir / ("plan_timeline_" + model + "_" + key + ".svg"), p, planners[i].make(p, cost), cost,
                       where + ": " + planners[i].name);
    }
}

} // namespace

int main(int argc, char** argv)
{
    try {
        fs::path out_dir;
        std::vector<fs::path> profiles;
        for (int i = 1; i < argc; ++i) {
            const std::string arg = argv[i];
            if (arg == "--out" && i + 1 < argc)
                out_dir = argv[++i];
            else if (arg.starts_with("-"))
                throw gradsync::usage_error("unknown option '" + arg + "'");
            else
                profiles.emplace_back(arg);
        }
        if (out_dir.empty() || profiles.empty())
            throw gradsync::usage_error("usage: plan_study --out DIR PROFILE.csv [PROFILE.csv ...]");
        fs::create_directories(out_dir);

        const double alpha = fitted_alpha();
        std::printf("Ring allreduce on 10 GbE: a = 2(N-1)·alpha, b = 2(N-1)/N·beta, alpha = %.4f µs (fitted), "
                    "beta = %.4f ns/B (1/1.25e9).\n",
                    alpha * 1e6, beta_10gbe * 1e9);
        worst_case worst;
        for (const fs::path& csv : profiles)
            study(csv, out_dir, worst);
        std::printf("\nLargest optimal / MG-WFBP speedup ratio: %.4f (%s).\n", worst.ratio,
                    worst.where.empty() ? "none above 1" : worst.where.c_str());
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "plan_study: %s\n", e.what());
        return 2;
    }
}
