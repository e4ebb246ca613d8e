// The communication-scheduling study: the measured iteration time of each merge plan
// under an emulated slow network, beside the planner's prediction.
//
//   1. profile    the ranks run steps together without communication, timing each
//                 layer's backward: the group's profile (group_profile.hpp);
//   2. calibrate  the library's own allreduce (Average, recursive halving) over the
//                 emulated link at sizes up to the whole gradient, fitted to T(M) = a + b M;
//   3. plan       WFBP, one group, 25 MiB buckets, MG-WFBP and the optimum, each with
//                 simulate()'s predicted iteration time for the profile and the fitted T;
//   4. measure    training steps through each plan's synchronizer, the plans taking turns
//                 in rounds; the iteration time is the median from the start of backward
//                 to the end of the plan's last allreduce, when wait() returns (the span
//                 simulate() predicts), averaged over the ranks.
//
// Threads: where cores are fewer than twice the ranks, the communication threads get a core
// of their own (placement.hpp), for profiling, calibration and training alike, and the
// ranks' compute threads share the other cores. A rank's trainer thread woken by wait()
// may then find its core busy with another rank's forward pass; that wait for a core is
// an artifact of emulating several ranks on one core, not a cost of the plan, so the end
// of an iteration is the synchronizer's own timestamp of its last allreduce
// (last_times()), and the delay until the trainer thread ran again is reported apart.
//
// The link is gradsync::delay_communicator: alpha seconds per message and beta per byte
// on each rank's outgoing link. Recursive halving over N = 2^k ranks sends 2k messages per
// allreduce, each rank 2 (N-1)/N of the bytes, so the fit should land near
// a = 2 log2(N) alpha, b = 2 (N-1)/N beta (recursive_halving_cost, reported beside it) plus
// the real cost of copying and combining. The algorithm is fixed because the automatic
// choice switches algorithm with the size, which no single line fits.
//
// Collective: every rank calls it with the same arguments. Cost: profile steps + 5 plans x
// rounds x (steps per round + 1) iterations, plus the calibration.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <gradsync/algorithm/recursive_halving.hpp>
#include <gradsync/collective/allreduce.hpp>
#include <gradsync/comm/communicator.hpp>
#include <gradsync/comm/delay/delay.hpp>
#include <gradsync/planner/bucket.hpp>
#include <gradsync/planner/cost_model.hpp>
#include <gradsync/planner/mgwfbp.hpp>
#include <gradsync/planner/optimal.hpp>
#include <gradsync/planner/profile.hpp>
#include <gradsync/planner/single.hpp>
#include <gradsync/planner/timeline.hpp>
#include <gradsync/planner/wfbp.hpp>
#include <gradsync/policy/sum.hpp>
#include <gradsync/runtime/calibration.hpp>
#include <gradsync/runtime/synchronizer.hpp>

#include "dataset.hpp"
#include "../rank_stats.hpp"
#include "group_profile.hpp"
#include "placement.hpp"
#include "replica.hpp"
#include "train.hpp"

namespace trainer {

struct schedule_options {
    gradsync::emulated_link link{2e-3, 5e-8}; // 2 ms per message, 20 MB/s
    std::size_t local_batch = 256;
    std::size_t profile_steps = 24;
    std::size_t rounds = 5;          // the plans take turns, round after round
    std::size_t steps_per_round = 5; // measured steps of a plan in a round, after one untimed
    int calibration_repetitions = 7;
    std::uint64_t bucket_bytes = 26214400; // PyTorch DDP's default bucket, 25 MiB
};

struct method_result {
    std::string method;
    gradsync::planner::merge_plan groups;
    double predicted_s = 0;
    double measured_s = 0;
    double wake_s = 0; // from the last allreduce's end until the trainer thread ran (median)
};

struct schedule_result {
    gradsync::planner::profile profile;
    gradsync::planner::fit_result fit;      // calibrated on the emulated link
    gradsync::planner::linear_cost planned; // the fit with a and b at least 0, as planned with
    gradsync::planner::linear_cost nominal; // recursive_halving_cost of the link alone
    std::vector<method_result> methods;     // wfbp, single, bucket, mgwfbp, optimal
    bool separate_cores = false;            // communication had a core of its own (placement.hpp)
};

namespace detail {
using gradsync_examples::average_over_ranks;
} // namespace detail

// on_method(result) is called on every rank after each plan is measured.
template <gradsync::communicator C>
schedule_result schedule_study(C& inner, const dataset& train_set, const train_options& o,
                               const schedule_options& s, const std::function<void(const method_result&)>& on_method)
{
    namespace planner = gradsync::planner;
    using link_comm = gradsync::delay_communicator<C>;
    using sync_type = gradsync::synchronizer<float, link_comm, gradsync::average, gradsync::recursive_halving>;
    link_comm comm(inner, s.link);
    const std::size_t ranks = std::size_t(comm.size()), rank = std::size_t(comm.rank());
    const std::size_t global_batch = ranks * s.local_batch;
    if (s.local_batch == 0 || global_batch > train_set.size() || s.profile_steps == 0 || s.rounds == 0 ||
        s.steps_per_round == 0)
        throw gradsync::usage_error("trainer::schedule_study (" + gradsync::where(comm) + "): needs positive step "
                                    "counts and global batches of " + std::to_string(ranks) + " x " +
                                    std::to_string(s.local_batch) + " samples from " +
                                    std::to_string(train_set.size()) + " training samples");
    const std::vector<std::size_t> order = epoch_order(train_set.size(), o.order_seed, 0);
    const std::size_t batches = train_set.size() / global_batch;
    const auto batch = [&](std::size_t step) {
        return std::span<const std::size_t>(order).subspan((step % batches) * global_batch + rank * s.local_batch,
                                                            s.local_batch);
    };

    // Profiling updates each rank's weights with its own gradient, so it uses a replica of
    // its own and the measured steps start again from the common initial weights.
    replica model(o.widths, o.init_seed, o.sgd);
    const std::span<const std::size_t> sizes = model.model().layer_sizes();

    schedule_result result;
    core_placement cores{int(ranks)};
    result.separate_cores = cores.active();
    {
        replica probe(o.widths, o.init_seed, o.sgd);
        cores.compute();
        result.profile = measure_group_profile(inner, probe, train_set, batch, s.profile_steps);
    }

    std::vector<std::size_t> counts;
    const std::size_t total = model.model().parameter_count();
    for (std::size_t d : {256, 64, 16, 4, 2, 1})
        counts.push_back(std::max<std::size_t>(total / d, 1));
    counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
    cores.communicate(); // calibrate where the synchronizers' threads will reduce, and create them there
    result.fit = planner::calibrate<float, link_comm, gradsync::average, gradsync::recursive_halving>(
        comm, counts, s.calibration_repetitions);
    result.nominal = planner::recursive_halving_cost({s.link.alpha, s.link.beta, 0.0}, int(ranks));

    // Noise around a cost near zero (one rank, a fast link) can fit a slightly negative a
    // or b, which no allreduce has and the planner refuses.
    const planner::linear_cost cost{std::max(result.fit.cost.a, 0.0), std::max(result.fit.cost.b, 0.0)};
    result.planned = cost;
    const std::vector<std::pair<std::string, planner::merge_plan>> plans{
        {"WFBP", planner::wfbp(result.profile)},
        {"single group", planner::single(result.profile)},
        {"25 MiB buckets", planner::bucket(result.profile, s.bucket_bytes)},
        {"MG-WFBP", planner::mgwfbp(result.profile, cost)},
        {"optimal", planner::optimal(result.profile, cost)}};
    // One synchronizer per plan (created in the same order on every rank: construction is
    // collective), then rounds in which each plan trains in turn, so that a change in the
    // machine's load during the study hits every plan alike.
    std::deque<sync_type> syncs;
    for (const auto& named : plans)
        syncs.emplace_back(comm, sizes, named.second);
    cores.compute();
    std::vector<std::vector<double>> seconds(plans.size()), wake(plans.size());
    std::size_t step = 0;
    for (std::size_t round = 0; round < s.rounds; ++round)
        for (std::size_t p = 0; p < plans.size(); ++p)
            for (std::size_t k = 0; k <= s.steps_per_round; ++k, ++step) {
                const step_record& r = model.step(train_set, batch(step), syncs[p], 0.0);
                const steady::time_point reduced = syncs[p].last_times().back().end;
                if (k == 0) // the first step after a change of plan warms its buffers
                    continue;
                seconds[p].push_back(std::chrono::duration<double>(reduced - r.backward_start).count());
                wake[p].push_back(std::chrono::duration<double>(r.end - reduced).count());
            }
    for (std::size_t p = 0; p < plans.size(); ++p) {
        const planner::merge_plan& groups = plans[p].second;
        method_result m{plans[p].first, groups, planner::simulate(result.profile, groups, cost).predicted_s, 0.0, 0.0};
        m.measured_s = detail::average_over_ranks(comm, median(seconds[p]));
        m.wake_s = detail::average_over_ranks(comm, median(wake[p]));
        on_method(m);
        result.methods.push_back(std::move(m));
    }
    return result;
}

} // namespace trainer
