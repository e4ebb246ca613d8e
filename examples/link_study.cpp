// link_study: the MG-WFBP paper's experiment (Shi, Chu and Li, INFOCOM 2019: 8 nodes, 10 GbE)
// over a real network: one rank per host, Gloo's TCP device, ring allreduce (the paper's).
// Backward is replayed from a layer profile: the profile's backward times (multiplied by
// --scale) are waited out, and each layer's gradient is handed to the plan's synchronizer when
// its time comes, so ranks need no compute and many fit on few cores. Per rank:
//
//   1. calibrate  the ring allreduce (Average) at sizes from 1024 elements to the whole
//                 gradient, fitted to T(M) = a + b M (planner::calibrate);
//   2. plan       WFBP, one group (SyncEASGD), 25 MiB buckets (PyTorch DDP's default),
//                 MG-WFBP and the optimum for the profile and the fitted T, each with its
//                 predicted time (planner::simulate);
//   3. measure    iterations through each plan's synchronizer, the plans taking turns in
//                 rounds; an iteration's time is from the start of backward to the end of
//                 its last allreduce (the span simulate() predicts), the median per rank,
//                 averaged over the ranks.
//
// It also reports how late the replay handed layers over (the median, per iteration, of the
// largest lateness against the profile's ready times), and how busy the machine's cores
// were while measuring: the evidence that the cores did not limit what was measured; and the
// time the communication thread spent on each plan's allreduces against what the fit gives
// them (for WFBP also its allreduces under 4 KiB alone): where a plan's time departs from
// its prediction, whether its allreduces are what cost more.
// Rank 0 prints a markdown table per profile and, with --svg, draws each plan's speedup over
// WFBP, predicted and measured, for every profile in one chart. docs/results_planner.md has
// the study and its command.
//
//   link_study RANK SIZE STORE_DIR ADDRESS --profile CSV [--profile CSV ...] [--scale S]
//              [--rounds R] [--steps K] [--repetitions C] [--rate-mbit R] [--svg FILE]
// --rate-mbit: the link's shaped rate, to set the calibrated b beside the rate's own.
#include <gradsync/comm/gloo/file_store.hpp>
#include <gradsync/comm/gloo/gloo.hpp>
#include <gradsync/comm/gloo/rendezvous.hpp>
#include <gradsync/gradsync.hpp>
#include <gradsync/planner/bucket.hpp>
#include <gradsync/planner/cost_model.hpp>
#include <gradsync/planner/mgwfbp.hpp>
#include <gradsync/planner/optimal.hpp>
#include <gradsync/planner/profile_csv.hpp>
#include <gradsync/planner/single.hpp>
#include <gradsync/planner/timeline.hpp>
#include <gradsync/planner/wfbp.hpp>
#include <gradsync/runtime/calibration.hpp>
#include <gradsync/runtime/synchronizer.hpp>

#include "line_chart.hpp"
#include "rank_stats.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <exception>
#include <fstream>
#include <numeric>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

namespace gp = gradsync::planner;
using steady = std::chrono::steady_clock;
using comm_type = gradsync::gloo_communicator;
using sync_type = gradsync::synchronizer<float, comm_type, gradsync::average, gradsync::ring>;

struct arguments {
    int rank = -1, size = 0;
    std::string store, address, svg;
    std::vector<std::string> profiles;
    double scale = 1;
    int rounds = 3, steps = 3, repetitions = 5;
    double rate_mbit = 0;
};

[[noreturn]] void usage(const std::string& why)
{
    std::fprintf(stderr,
                 "link_study: %s\nusage: link_study RANK SIZE STORE_DIR ADDRESS --profile CSV [--profile CSV ...] "
                 "[--scale S] [--rounds R] [--steps K] [--repetitions C] [--rate-mbit R] [--svg FILE]\n",
                 why.c_str());
    std::exit(2);
}

arguments parse(int argc, char** argv)
{
    if (argc < 5)
        usage("missing arguments");
    arguments a;
    try {
        a.rank = std::stoi(argv[1]);
        a.size = std::stoi(argv[2]);
        a.store = argv[3];
        a.address = argv[4];
        for (int i = 5; i < argc; i += 2) {
            const std::string key = argv[i];
            if (i + 1 >= argc)
                usage(key + " needs a value");
            const std::string value = argv[i + 1];
            if (key == "--profile")
                a.profiles.push_back(value);
            else if (key == "--svg")
                a.svg = value;
            else if (key == "--scale")
                a.scale = std::stod(value);
            else if (key == "--rounds")
                a.rounds = std::stoi(value);
            else if (key == "--steps")
                a.steps = std::stoi(value);
            else if (key == "--repetitions")
                a.repetitions = std::stoi(value);
            else if (key == "--rate-mbit")
                a.rate_mbit = std::stod(value);
            else
                usage("unknown option " + key);
        }
    } catch (const std::logic_error&) {
        usage("a number is not a number");
    }
    if (a.profiles.empty() || a.size < 1 || a.rank < 0 || a.rank >= a.size || !(a.scale > 0) || a.rounds < 1 ||
        a.steps < 1 || a.repetitions < 1 || a.rate_mbit < 0)
        usage("needs --profile, 0 <= RANK < SIZE, and positive counts and scale");
    return a;
}

using gradsync_examples::average_over_ranks;
using gradsync_examples::median;

// Busy and total jiffies of every core (the first line of /proc/stat).
std::pair<double, double> cpu_jiffies()
{
    std::ifstream stat("/proc/stat");
    std::string cpu;
    double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
    const double busy = user + nice + system + irq + softirq + steal;
    return {busy, busy + idle + iowait};
}

// Per iteration: the span, the largest lateness, and the time the communication thread spent
// on the plan's groups, in all and on each group under small_bytes.
struct measured {
    std::vector<double> span_s, late_s, groups_s, small_s;
};

constexpr std::uint64_t small_bytes = 4096; // the smallest calibrated size, 1024 fp32

// One replayed iteration through `sync`: waits out each layer's backward, hands it over,
// waits for the plan's last allreduce; records what `measured` holds.
void replay(sync_type& sync, const std::vector<double>& ready_s, std::vector<float>& grad,
            const std::vector<std::size_t>& offset, const std::vector<std::uint64_t>& group_bytes, measured* out)
{
    const steady::time_point start = steady::now();
    double late = 0;
    for (std::size_t l = ready_s.size(); l-- > 0;) {
        const steady::time_point due = start + std::chrono::duration_cast<steady::duration>(
                                                   std::chrono::duration<double>(ready_s[l]));
        std::this_thread::sleep_until(due);
        late = std::max(late, std::chrono::duration<double>(steady::now() - due).count());
        sync.ready(l, std::span<float>(grad).subspan(offset[l], offset[l + 1] - offset[l]));
    }
    sync.wait();
    if (out) {
        const auto times = sync.last_times();
        out->span_s.push_back(std::chrono::duration<double>(times.back().end - start).count());
        out->late_s.push_back(late);
        double all = 0;
        for (std::size_t g = 0; g < times.size(); ++g) {
            const double took = std::chrono::duration<double>(times[g].end - times[g].start).count();
            all += took;
            if (group_bytes[g] < small_bytes)
                out->small_s.push_back(took);
        }
        out->groups_s.push_back(all);
    }
}

// One profile's study, on every rank; what rank 0 reports and draws.
struct study {
    std::string name;
    std::vector<std::string> plans;
    std::vector<double> predicted_s, measured_s; // iterations: forward + the span
};

study run_profile(comm_type& comm, const arguments& a, const std::string& path)
{
    gp::profile profile = gp::read_profile_csv(path);
    double forward_s = 0;
    for (gp::layer_profile& l : profile) {
        l.backward_s *= a.scale;
        if (l.forward_s)
            forward_s += (*l.forward_s *= a.scale);
    }
    std::vector<std::size_t> sizes, offset{0};
    for (const gp::layer_profile& l : profile) {
        sizes.push_back(std::size_t(l.params));
        offset.push_back(offset.back() + sizes.back());
    }
    const std::size_t total = offset.back();
    const std::vector<double> ready_s = gp::ready_times(profile);

    const gp::fit_result fit = gp::calibrate<float, comm_type, gradsync::average, gradsync::ring>(
        comm, gp::model_counts(total), a.repetitions);
    const gp::linear_cost cost{std::max(fit.cost.a, 0.0), std::max(fit.cost.b, 0.0)};

    const std::vector<std::pair<std::string, gp::merge_plan>> plans{
        {"WFBP", gp::wfbp(profile)},
        {"single group", gp::single(profile)},
        {"25 MiB buckets", gp::bucket(profile, std::uint64_t(25) << 20)},
        {"MG-WFBP", gp::mgwfbp(profile, cost)},
        {"optimal", gp::optimal(profile, cost)}};
    std::deque<sync_type> syncs;
    std::vector<std::vector<std::uint64_t>> group_bytes; // per plan, per group
    for (const auto& named : plans) {
        syncs.emplace_back(comm, sizes, named.second);
        auto& bytes = group_bytes.emplace_back();
        for (const auto& group : named.second)
            bytes.push_back(std::accumulate(group.begin(), group.end(), std::uint64_t(0),
                                            [&](std::uint64_t b, std::size_t l) { return b + 4 * sizes[l]; }));
    }

    std::vector<float> grad(total, 1.0f); // Average keeps ones ones
    std::vector<measured> times(plans.size());
    const auto [busy0, all0] = cpu_jiffies();
    const steady::time_point began = steady::now();
    for (int round = 0; round < a.rounds; ++round)
        for (std::size_t p = 0; p < plans.size(); ++p)
            for (int k = 0; k <= a.steps; ++k) // the first after a change of plan warms its buffers
                replay(syncs[p], ready_s, grad, offset, group_bytes[p], k == 0 ? nullptr : &times[p]);
    const auto [busy1, all1] = cpu_jiffies();
    const double study_s = std::chrono::duration<double>(steady::now() - began).count();
    const double busy = (busy1 - busy0) / std::max(all1 - all0, 1.0);

    study result{path.substr(path.find_last_of('/') + 1), {}, {}, {}};
    // The groups' time against the fit's, and WFBP's (the first plan's) small groups alone.
    std::vector<double> span, late, groups_ratio;
    for (std::size_t p = 0; p < plans.size(); ++p) {
        result.plans.push_back(plans[p].first);
        result.predicted_s.push_back(forward_s + gp::simulate(profile, plans[p].second, cost).predicted_s);
        span.push_back(average_over_ranks(comm, median(times[p].span_s)));
        late.push_back(average_over_ranks(comm, median(times[p].late_s)));
        result.measured_s.push_back(forward_s + span.back());
        double fit_s = 0;
        for (std::uint64_t b : group_bytes[p])
            fit_s += cost(double(b));
        groups_ratio.push_back(average_over_ranks(comm, median(times[p].groups_s)) / fit_s);
    }
    const std::size_t small_groups = std::size_t(
        std::count_if(group_bytes[0].begin(), group_bytes[0].end(), [](std::uint64_t b) { return b < small_bytes; }));
    const double small_s = small_groups ? average_over_ranks(comm, median(times[0].small_s)) : 0.0;
    if (comm.rank() != 0)
        return result;
    const double backward_s = ready_s.empty() ? 0.0 : ready_s[0];
    std::printf("## %s, %d ranks, times x %g\n\n", path.c_str(), comm.size(), a.scale);
    std::printf("%zu layers, %.1f MB of fp32 gradients, forward %.1f ms, backward %.1f ms\n\n", profile.size(),
                double(total) * 4 / 1e6, forward_s * 1e3, backward_s * 1e3);
    std::printf("calibrated ring allreduce: T(M) = %.1f us + M x %.4f ns/byte (rms residual %.2f ms)", fit.cost.a * 1e6,
                fit.cost.b * 1e9, fit.residual_rms_s * 1e3);
    if (a.rate_mbit > 0) {
        const double n = comm.size(), link_b = 2 * (n - 1) / n * 8 / (a.rate_mbit * 1e6);
        std::printf("; the link rate alone gives b = %.4f ns/byte (calibrated / rate's: %.2f)", link_b * 1e9,
                    fit.cost.b / link_b);
    }
    std::printf("\n\nmeasuring took %.0f s with the machine's cores %.0f %% busy\n\n", study_s, busy * 100);
    if (small_groups)
        std::printf("%s: %zu of its %zu allreduces under %llu bytes, each a median %.2f ms (the fit's a: %.2f ms)\n\n",
                    plans[0].first.c_str(), small_groups, group_bytes[0].size(), (unsigned long long)small_bytes,
                    small_s * 1e3, cost.a * 1e3);
    // Over one node: N x (forward + backward) / the iteration, as the paper's speedups are.
    const double one_node_s = forward_s + backward_s;
    std::printf("| plan | groups | predicted ms | measured ms | measured / predicted | allreduces, measured / fit | "
                "replay late ms | speedup over WFBP, predicted | measured | speedup over one node, measured |\n"
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (std::size_t p = 0; p < plans.size(); ++p)
        std::printf("| %s | %zu | %.1f | %.1f | %.3f | %.3f | %.2f | %.3f | %.3f | %.2f |\n", plans[p].first.c_str(),
                    plans[p].second.size(), result.predicted_s[p] * 1e3, result.measured_s[p] * 1e3,
                    span[p] / (result.predicted_s[p] - forward_s), groups_ratio[p], late[p] * 1e3,
                    result.predicted_s[0] / result.predicted_s[p], result.measured_s[0] / result.measured_s[p],
                    comm.size() * one_node_s / result.measured_s[p]);
    std::printf("\n");
    std::fflush(stdout);
    return result;
}

// Each plan's speedup over WFBP, predicted (dashed) and measured, one pair of lines per profile.
void write_chart(const arguments& a, int ranks, const std::vector<study>& studies)
{
    namespace gx = gradsync_examples;
    const char* colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd"};
    gx::line_chart chart;
    chart.title = "Speedup over WFBP, " + std::to_string(ranks) + " hosts, ring allreduce over TCP";
    chart.x_label = "plan";
    chart.y_label = "speedup over WFBP";
    for (std::size_t p = 0; p < studies.front().plans.size(); ++p) {
        chart.x.push_back(double(std::size_t(1) << p));
        chart.x_tick_labels.push_back(studies.front().plans[p]);
    }
    chart.y_include = {1.0};
    for (std::size_t s = 0; s < studies.size(); ++s) {
        gx::chart_series predicted{studies[s].name + ", predicted", colours[s % 4], {}, true};
        gx::chart_series measured{studies[s].name + ", measured", colours[s % 4], {}, false};
        for (std::size_t p = 0; p < studies[s].plans.size(); ++p) {
            predicted.y.push_back(studies[s].predicted_s[0] / studies[s].predicted_s[p]);
            measured.y.push_back(studies[s].measured_s[0] / studies[s].measured_s[p]);
        }
        chart.series.push_back(std::move(predicted));
        chart.series.push_back(std::move(measured));
    }
    std::ofstream out(a.svg);
    gx::write_line_chart_svg(out, chart);
    if (!out)
        throw gradsync::usage_error("link_study: cannot write " + a.svg);
}

int run(const arguments& a)
{
    const auto store = gradsync::gloo_file_store(a.store);
    gradsync::gloo_connect_options connect;
    connect.hostname = a.address;
    comm_type comm(gradsync::gloo_connect(*store, a.rank, a.size, connect), {.deadline = std::chrono::seconds(120)});
    std::vector<study> studies;
    for (const std::string& path : a.profiles)
        studies.push_back(run_profile(comm, a, path));
    if (a.rank == 0 && !a.svg.empty())
        write_chart(a, a.size, studies);
    return 0;
}

} // namespace

int main(int argc, char** argv)
{
    const arguments a = parse(argc, argv);
    try {
        return run(a);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "link_study (rank %d of %d): %s\n", a.rank, a.size, e.what());
        return 1;
    }
}
