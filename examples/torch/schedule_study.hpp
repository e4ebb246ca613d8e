// The scheduling study on LeNet (docs/torch.md, "The scheduling study"): the time of one
// data_parallel step under each merge plan over an emulated slow link, beside the planner's
// prediction, and against the plain libtorch loop, which allreduces every gradient, one call
// per parameter, after backward.
//
//   1. calibrate  gradsync's allreduce (Average, recursive halving) over the link at sizes up
//                 to the whole gradient, fitted to T(M) = a + b M;
//   2. profile    data_parallel's own measurement: its first profile_steps steps time each
//                 layer's backward from its hooks (averaged over the ranks), planning with T;
//                 the time from the start of backward to the first hook (the loss and
//                 log-softmax, which own no parameter) is measured beside it and added to
//                 the last layer's time in the predictions, which start at backward;
//   3. plan       WFBP, one group, 25 MiB buckets, MG-WFBP and the optimum, each with
//                 simulate()'s predicted time for the profile and T, and the plain loop's
//                 prediction, its backward plus one T per parameter;
//   4. measure    the plans (data_parallel::use_plan) and the plain loop take turns in
//                 rounds, each for one untimed and steps_per_round timed SGD steps; a step's
//                 time runs from the start of backward to the end of its last allreduce (the
//                 span simulate() predicts; data_parallel: the synchronizer's timestamp), and
//                 to the return of synchronize() beside it; medians, averaged over the ranks.
//
// Threads: as in the demo trainer's study (../trainer/placement.hpp), where the cores are
// fewer than twice the ranks the communication threads (the synchronizers', created while
// the rank's thread sits on the communication core) get a core of their own, and the
// calibration and the plain loop's allreduces run there too; the ranks' trainer threads
// share the other cores. A trainer thread woken by the end of the last allreduce may find its
// core busy with another rank's backward, an artifact of emulating several ranks on few
// cores, which is why a step's time ends at the allreduce and the return is reported apart.
//
// The plain loop trains a model of its own (the same initial parameters) with persistent
// reducers, one per parameter, so that it pays no per-call planning. Collective: every rank
// calls it with the same arguments. Cost: profile_steps + 6 x rounds x (steps_per_round + 1)
// steps, plus the calibration.
#pragma once

#include <torch/torch.h>

#include <gradsync/torch.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <gradsync/algorithm/recursive_halving.hpp>
#include <gradsync/collective/allreduce.hpp>
#include <gradsync/comm/delay/delay.hpp>
#include <gradsync/comm/communicator.hpp>
#include <gradsync/planner/bucket.hpp>
#include <gradsync/runtime/calibration.hpp>
#include <gradsync/planner/cost_model.hpp>
#include <gradsync/planner/merge_plan.hpp>
#include <gradsync/planner/mgwfbp.hpp>
#include <gradsync/planner/optimal.hpp>
#include <gradsync/planner/profile.hpp>
#include <gradsync/planner/single.hpp>
#include <gradsync/planner/timeline.hpp>
#include <gradsync/planner/wfbp.hpp>
#include <gradsync/policy/sum.hpp>

#include "../rank_stats.hpp"
#include "../trainer/placement.hpp"
#include "lenet.hpp"

namespace gradsync_examples {

struct schedule_options {
    gradsync::emulated_link link{1e-3, 1e-7}; // 1 ms per message, 10 MB/s
    int profile_steps = 20;
    int rounds = 5;
    int steps_per_round = 5;
    int calibration_repetitions = 7;
    std::uint64_t bucket_bytes = 26214400; // PyTorch DDP's default bucket, 25 MiB
    double lr = 0.01;
    double momentum = 0.9;
};

struct schedule_row {
    std::string method;
    gradsync::planner::merge_plan groups; // empty for the plain loop
    double predicted_s = 0;
    double measured_s = 0; // to the end of the last allreduce
    double returned_s = 0; // to the return of synchronize() (the plain loop: as measured_s)
};

struct schedule_result {
    gradsync::planner::profile profile;     // data_parallel's, the time before the first hook added
    double before_first_hook_s = 0;         // median, averaged over the ranks
    gradsync::planner::fit_result fit;      // calibrated over the link
    gradsync::planner::linear_cost planned; // the fit with a and b at least 0, as planned with
    std::vector<schedule_row> rows;         // wfbp, single, bucket, mgwfbp, optimal, plain loop
};

namespace detail {

using gradsync_examples::average_over_ranks;
using gradsync_examples::median;

inline double seconds_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b)
{
    return std::chrono::duration<double>(b - a).count();
}

} // namespace detail

// batch(step) gives this rank's (images, labels) for a step. `model` and `plain` start from the
// same parameters; neither may have a data_parallel of its own.
template <gradsync::communicator C>
schedule_result schedule_study(C& inner, lenet& model, lenet& plain,
                               const std::function<std::pair<torch::Tensor, torch::Tensor>(int)>& batch,
                               const schedule_options& s)
{
    namespace planner = gradsync::planner;
    using clock = std::chrono::steady_clock;
    using link_comm = gradsync::delay_communicator<C>;
    using policy = gradsync::average;
    using algorithm = gradsync::recursive_halving;
    if (s.profile_steps < 1 || s.rounds < 1 || s.steps_per_round < 1 || s.calibration_repetitions < 1)
        throw gradsync::usage_error("schedule_study (" + gradsync::where(inner) +
                                    "): profile steps, rounds, steps per round and calibration repetitions must "
                                    "be at least 1");
    link_comm comm(inner, s.link);
    schedule_result result;
    trainer::core_placement cores{comm.size()};
    cores.communicate();

    const std::vector<torch::Tensor> params = model->parameters(), plain_params = plain->parameters();
    std::size_t total = 0;
    for (const torch::Tensor& p : params)
        total += std::size_t(p.numel());
    std::vector<std::size_t> counts;
    for (std::size_t d : {64, 16, 4, 2, 1})
        counts.push_back(std::max<std::size_t>(total / d, 1));
    result.fit = planner::calibrate<float, link_comm, policy, algorithm>(comm, counts, s.calibration_repetitions);
    result.planned = {std::max(result.fit.cost.a, 0.0), std::max(result.fit.cost.b, 0.0)};

    gradsync::data_parallel_options options;
    options.measure_iterations = s.profile_steps;
    options.cost = result.planned;
    gradsync::data_parallel<float, link_comm, policy, algorithm> dp(comm, *model, options);
    cores.compute();
    torch::optim::SGD sgd(params, torch::optim::SGDOptions(s.lr).momentum(s.momentum));
    torch::optim::SGD plain_sgd(plain_params, torch::optim::SGDOptions(s.lr).momentum(s.momentum));
    int step = 0;
    struct step_times {
        double reduced_s, returned_s, first_hook_s; // from the start of backward
    };
    const auto dp_step = [&] {
        const auto [x, y] = batch(step++);
        dp.zero_grad();
        const torch::Tensor loss = torch::nll_loss(model->forward(x), y);
        const clock::time_point start = clock::now();
        loss.backward();
        dp.synchronize();
        const clock::time_point end = clock::now();
        sgd.step();
        return step_times{detail::seconds_between(start, dp.last_times().back().end),
                          detail::seconds_between(start, end),
                          detail::seconds_between(start, dp.handed_over_at().back())};
    };

    std::vector<double> before_first;
    for (int k = 0; k < s.profile_steps; ++k)
        before_first.push_back(dp_step().first_hook_s);
    result.before_first_hook_s = detail::average_over_ranks(comm, detail::median(before_first));
    result.profile = dp.profile();
    result.profile.back().backward_s += result.before_first_hook_s;

    const planner::profile& p = result.profile;
    const planner::linear_cost& cost = result.planned;
    const std::vector<std::pair<std::string, planner::merge_plan>> plans{
        {"WFBP", planner::wfbp(p)},
        {"single group", planner::single(p)},
        {"25 MiB buckets", planner::bucket(p, s.bucket_bytes)},
        {"MG-WFBP", planner::mgwfbp(p, cost)},
        {"optimal", planner::optimal(p, cost)}};

    std::deque<gradsync::reducer<float, link_comm, policy, algorithm>> per_parameter;
    for (const torch::Tensor& q : plain_params)
        per_parameter.emplace_back(comm, std::vector<std::size_t>{std::size_t(q.numel())});
    const auto plain_step = [&] {
        const auto [x, y] = batch(step++);
        for (const torch::Tensor& q : plain_params)
            if (q.grad().defined())
                q.mutable_grad().zero_();
        const torch::Tensor loss = torch::nll_loss(plain->forward(x), y);
        const clock::time_point start = clock::now();
        loss.backward();
        cores.communicate();
        for (std::size_t i = 0; i < plain_params.size(); ++i)
            per_parameter[i](std::span<float>(plain_params[i].grad().data_ptr<float>(),
                                              std::size_t(plain_params[i].numel())));
        const double seconds = detail::seconds_between(start, clock::now());
        cores.compute();
        plain_sgd.step();
        return seconds;
    };

    std::vector<std::vector<double>> seconds(plans.size() + 1), returned(plans.size());
    for (int round = 0; round < s.rounds; ++round) {
        for (std::size_t m = 0; m < plans.size(); ++m) {
            cores.communicate();
            dp.use_plan(plans[m].second);
            cores.compute();
            for (int k = 0; k <= s.steps_per_round; ++k) {
                const step_times t = dp_step();
                if (k > 0) { // the first step after a change of plan warms its buffers
                    seconds[m].push_back(t.reduced_s);
                    returned[m].push_back(t.returned_s);
                }
            }
        }
        for (int k = 0; k <= s.steps_per_round; ++k) {
            const double t = plain_step();
            if (k > 0)
                seconds.back().push_back(t);
        }
    }

    for (std::size_t m = 0; m < plans.size(); ++m)
        result.rows.push_back({plans[m].first, plans[m].second, planner::simulate(p, plans[m].second, cost).predicted_s,
                               detail::average_over_ranks(comm, detail::median(seconds[m])),
                               detail::average_over_ranks(comm, detail::median(returned[m]))});
    double plain_predicted = 0;
    for (const planner::layer_profile& l : p)
        plain_predicted += l.backward_s + cost(double(l.params * sizeof(float)));
    const double plain_s = detail::average_over_ranks(comm, detail::median(seconds.back()));
    result.rows.push_back({"allreduce after backward", {}, plain_predicted, plain_s, plain_s});
    return result;
}

} // namespace gradsync_examples
