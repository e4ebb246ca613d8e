// plan_replay: the planner at scale (docs/results_scale.md, "The planner at scale"). The
// MG-WFBP study's plans of a layer profile, replayed on a simulated cluster by SimGrid's SMPI
// (scripts/plan_replay.sh), each predicted by the planner's model and timed on simulated time.
// Per profile, on every rank:
//
//   1. calibrate  gradsync's ring allreduce (Average, fp32) on the simulated platform, fitted
//                 to T(M) = a + b M (planner::calibrate on MPI_Wtime);
//   2. plan       WFBP, one group (SyncEASGD), 25 MiB buckets, MG-WFBP and the optimum with
//                 that T, each with its predicted iteration (planner::simulate);
//   3. replay     one iteration per plan (simulated time repeats exactly: a second, untimed
//                 one comes first), as the paper's model runs it: backward computes on its own
//                 device, so the rank is the communication engine alone. It sleeps on simulated
//                 time until each group's gradients are ready (the profile's backward times)
//                 and then reduces the group with its reducer, planned once; the groups go in
//                 order, one at a time. The iteration is forward + max(backward, the slowest
//                 rank's end of its last group).
//
// Rank 0 prints one markdown row per plan (--header: the table's header first):
//   | profile | N | plan | groups | predicted ms | simulated ms | simulated / predicted |
//     allreduces, simulated / fit | speedup over WFBP, predicted | simulated |
//     speedup over one node, simulated |
// "allreduces, simulated / fit": the groups' summed simulated durations over what the fit
// gives them, which says whether a plan that departs from its prediction does so in its
// allreduces (the fit prices them wrong) or elsewhere (their order, the waits).
// Large buffers share simulated memory (shared_memory_hook.hpp): the values are garbage, the
// times are not.
//
//   plan_replay --profile CSV [--scale S] [--header]
#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <exception>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include <gradsync/comm/mpi/mpi.hpp>
#include <gradsync/gradsync.hpp>
#include <gradsync/planner/bucket.hpp>
#include <gradsync/planner/mgwfbp.hpp>
#include <gradsync/planner/optimal.hpp>
#include <gradsync/planner/profile_csv.hpp>
#include <gradsync/planner/single.hpp>
#include <gradsync/planner/timeline.hpp>
#include <gradsync/planner/wfbp.hpp>
#include <gradsync/runtime/calibration.hpp>

#include "shared_memory_hook.hpp"

static_assert(gradsync::detail::simulated_mpi, "plan_replay is built with SimGrid's smpicxx");

namespace {

namespace gp = gradsync::planner;
using comm_type = gradsync::mpi_communicator;
using group_reducer = gradsync::reducer<float, comm_type, gradsync::average, gradsync::ring>;

struct options {
    std::string profile;
    double scale = 1;
    bool header = false;
};

[[noreturn]] void usage(const std::string& why)
{
    std::fprintf(stderr, "plan_replay: %s\nusage: plan_replay --profile CSV [--scale S] [--header]\n", why.c_str());
    MPI_Abort(MPI_COMM_WORLD, 2);
    std::abort();
}

options parse(int argc, char** argv)
{
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--header") {
            o.header = true;
            continue;
        }
        if (i + 1 >= argc)
            usage(a + " needs a value");
        const std::string value = argv[++i];
        if (a == "--profile") {
            o.profile = value;
        } else if (a == "--scale") {
            char* end = nullptr;
            o.scale = std::strtod(value.c_str(), &end);
            if (*end || !(o.scale > 0))
                usage("--scale '" + value + "' is not a positive number");
        } else {
            usage("unknown argument '" + a + "'");
        }
    }
    if (o.profile.empty())
        usage("no --profile");
    return o;
}

// Sleeps on simulated time until MPI_Wtime() reaches `due` (no-op once past it).
void sleep_until(double due)
{
    const double left = due - MPI_Wtime();
    if (left <= 0)
        return;
    const auto ns = static_cast<long long>(left * 1e9);
    const timespec t{static_cast<std::time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    smpi_nanosleep(&t, nullptr);
}

// One plan: its groups' reducers and where each group lies in the gradient.
struct replayed_plan {
    std::string name;
    gp::merge_plan groups;
    std::deque<group_reducer> reducers;
    std::vector<std::size_t> first, count; // per group: first element, elements
};

struct iteration {
    double span_s = 0;      // from the start of backward to the end of the last group
    double allreduces_s = 0; // the groups' durations, summed
};

iteration replay(replayed_plan& plan, const std::vector<double>& ready_s, std::span<float> grad, MPI_Comm world)
{
    MPI_Barrier(world);
    const double start = MPI_Wtime();
    iteration it;
    for (std::size_t g = 0; g < plan.groups.size(); ++g) {
        sleep_until(start + ready_s[plan.groups[g].front()]);
        const double began = MPI_Wtime();
        plan.reducers[g](grad.subspan(plan.first[g], plan.count[g]));
        it.allreduces_s += MPI_Wtime() - began;
    }
    it.span_s = std::max(MPI_Wtime() - start, ready_s.empty() ? 0.0 : ready_s[0]);
    double slowest[2] = {0, 0}, mine[2] = {it.span_s, it.allreduces_s};
    MPI_Allreduce(mine, slowest, 2, MPI_DOUBLE, MPI_MAX, world);
    return {slowest[0], slowest[1]};
}

void run(comm_type& comm, const options& o)
{
    gp::profile profile = gp::read_profile_csv(o.profile);
    double forward_s = 0;
    std::vector<std::size_t> sizes, offset{0};
    for (gp::layer_profile& l : profile) {
        l.backward_s *= o.scale;
        if (l.forward_s)
            forward_s += (*l.forward_s *= o.scale);
        sizes.push_back(std::size_t(l.params));
        offset.push_back(offset.back() + sizes.back());
    }
    const std::size_t total = offset.back();
    const std::vector<double> ready_s = gp::ready_times(profile);

    const gp::fit_result fit =
        gp::calibrate<float, comm_type, gradsync::average, gradsync::ring>(comm, gp::model_counts(total), 1);
    const gp::linear_cost cost{std::max(fit.cost.a, 0.0), std::max(fit.cost.b, 0.0)};

    std::deque<replayed_plan> plans;
    plans.push_back({"WFBP", gp::wfbp(profile), {}, {}, {}});
    plans.push_back({"single group", gp::single(profile), {}, {}, {}});
    plans.push_back({"25 MiB buckets", gp::bucket(profile, std::uint64_t(25) << 20), {}, {}, {}});
    plans.push_back({"MG-WFBP", gp::mgwfbp(profile, cost), {}, {}, {}});
    plans.push_back({"optimal", gp::optimal(profile, cost), {}, {}, {}});
    for (replayed_plan& p : plans)
        for (const auto& group : p.groups) {
            p.first.push_back(offset[group.front()]);
            p.count.push_back(offset[group.back() + 1] - offset[group.front()]);
            const std::span<const std::size_t> layers(sizes.data() + group.front(), group.size());
            p.reducers.emplace_back(comm, p.count.back(), layers);
        }

    float* data = static_cast<float*>(SMPI_SHARED_MALLOC(total * sizeof(float)));
    const std::span<float> grad(data, total);
    std::vector<double> predicted, simulated, ratio_fit;
    for (replayed_plan& p : plans) {
        replay(p, ready_s, grad, comm.native());
        const iteration it = replay(p, ready_s, grad, comm.native());
        double fit_s = 0;
        for (const std::size_t c : p.count)
            fit_s += cost(double(c) * sizeof(float));
        predicted.push_back(forward_s + gp::simulate(profile, p.groups, cost).predicted_s);
        simulated.push_back(forward_s + it.span_s);
        ratio_fit.push_back(it.allreduces_s / fit_s);
    }
    SMPI_SHARED_FREE(data);
    if (comm.rank() != 0)
        return;
    const std::string name = o.profile.substr(o.profile.find_last_of('/') + 1);
    const double one_node_s = forward_s + (ready_s.empty() ? 0.0 : ready_s[0]);
    if (o.header)
        std::printf("| profile | N | plan | groups | predicted ms | simulated ms | simulated / predicted | "
                    "allreduces, simulated / fit | speedup over WFBP, predicted | simulated | "
                    "speedup over one node, simulated |\n|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for (std::size_t p = 0; p < plans.size(); ++p)
        std::printf("| %s | %d | %s | %zu | %.1f | %.1f | %.3f | %.3f | %.3f | %.3f | %.2f |\n", name.c_str(),
                    comm.size(), plans[p].name.c_str(), plans[p].groups.size(), predicted[p] * 1e3,
                    simulated[p] * 1e3, simulated[p] / predicted[p], ratio_fit[p], predicted[0] / predicted[p],
                    simulated[0] / simulated[p], comm.size() * one_node_s / simulated[p]);
    std::printf("<!-- %s N=%d: T(M) = %.1f us + M x %.4f ns/B, rms residual %.3f ms -->\n", name.c_str(),
                comm.size(), fit.cost.a * 1e6, fit.cost.b * 1e9, fit.residual_rms_s * 1e3);
    std::fflush(stdout);
}

} // namespace

int main(int argc, char** argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const options o = parse(argc, argv);
    simulation::share_large_allocations(true);
    try {
        comm_type comm(MPI_COMM_WORLD);
        run(comm, o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "plan_replay (rank %d of %d): %s\n", rank, size, e.what());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Finalize();
    return 0;
}
