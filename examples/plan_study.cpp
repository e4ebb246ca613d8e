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
#include <gradsync/core/error.hpp>
#include <gradsync/planner.hpp>

#include "line_chart.hpp"

#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace {

namespace gp = gradsync::planner;
namespace gx = gradsync_examples;
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
    std::function<gp::merge_plan(const gp::profile&, const gp::linear_cost&)> make;
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

// Speedup against N on log-log axes (powers of two), so that the linear ideal is a straight
// line and small speedups stay readable; one polyline per planner and the ideal. The axis
// always shows speedup 1, one node's.
void write_speedup_chart(const fs::path& file, const std::string& title, const std::vector<gx::chart_series>& lines)
{
    const gx::line_chart chart{.title = title,
                               .x_label = "nodes N",
                               .y_label = "speedup over one node (log scale)",
                               .x = {node_counts.begin(), node_counts.end()},
                               .y_scale = gx::axis_scale::log2,
                               .y_include = {1},
                               .series = lines};
    std::ofstream out(file, std::ios::binary);
    gx::write_line_chart_svg(out, chart);
    if (!out)
        throw gradsync::usage_error("plan_study: cannot write " + file.string());
}

void write_timeline(const fs::path& file, const gp::profile& p, const gp::merge_plan& groups, const gp::linear_cost& cost,
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

        std::vector<gx::chart_series> lines;
        for (const planner& pl : planners)
            lines.push_back({pl.name, pl.color, {}});
        gx::chart_series ideal{"linear (ideal)", "#888888", {}, true};
        for (int n : node_counts) {
            const gp::linear_cost cost = gp::ring_cost(link, n);
            std::vector<double> speedup;
            std::vector<std::size_t> group_count;
            for (const planner& pl : planners) {
                const gp::merge_plan groups = pl.make(p, cost);
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
