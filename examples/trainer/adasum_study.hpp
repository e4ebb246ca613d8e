// Adasum against Sum with the learning-rate schedule tuned for one rank (the LeNet study of
// Maleki et al., "Scaling Distributed Training with Adaptive Summation", 2020).
//
// With N ranks a step reduces N local mean gradients. Sum adds them: along the directions
// where they agree the step is N times the one-rank step, so a learning rate tuned for one
// rank (usually close to the largest stable one) overshoots more as N grows. Adasum scales
// each pair's shared component by half (A(g, g) = g) and adds orthogonal parts in full, so
// its step stays near the one-rank step where gradients agree. Both runs here use the same
// data, initial weights, sample order and schedule; only the policy differs. The gradients
// go through the synchronizer in one group per step (Adasum stays per layer inside it).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include <gradsync/comm/communicator.hpp>
#include <gradsync/planner/profile.hpp>
#include <gradsync/planner/single.hpp>
#include <gradsync/selector/automatic.hpp>

#include "dataset.hpp"
#include "report.hpp"
#include "train.hpp"

namespace trainer {

struct run_summary {
    double accuracy = 0;   // after the last epoch run
    double loss = 0;       // training loss of the last epoch run
    bool diverged = false; // the loss stopped being finite
};

inline run_summary summarize(const std::vector<epoch_result>& epochs)
{
    run_summary s;
    if (!epochs.empty()) {
        s.accuracy = epochs.back().accuracy;
        s.loss = epochs.back().train_loss;
        s.diverged = !std::isfinite(s.loss);
    }
    return s;
}

// One training run of this rank with `Policy`, printing a progress line per epoch on rank 0.
// label names the run in those lines; eval_name the evaluation set ("test", "validation").
template <class Policy, gradsync::communicator C>
run_summary train_and_report(C& comm, const dataset& train_set, const dataset& eval_set, const char* eval_name,
                             const train_options& o, const std::string& label)
{
    const gradsync::planner::merge_plan one_group =
        gradsync::planner::single(gradsync::planner::profile(2 * (o.widths.size() - 1)));
    const auto progress = [&](const epoch_result& e) {
        if (comm.rank() == 0)
            std::printf("%-22s epoch %2zu/%zu  train loss %8.4f  %s accuracy %7s  %5.1f s\n", label.c_str(), e.epoch,
                        o.epochs, e.train_loss, eval_name, percent(e.accuracy).c_str(), e.seconds);
        if (comm.rank() == 0 && !std::isfinite(e.train_loss))
            std::printf("%-22s diverged (the loss is not finite); stopping this run\n", label.c_str());
        std::fflush(stdout);
    };
    // Message passing: its Adasum is the paper's tree (recursive halving here), where shared
    // memory would run the ring's chains.
    return summarize(train<Policy>(comm, train_set, eval_set, o, one_group,
                                   gradsync::automatic{.share_memory = false}, progress));
}

} // namespace trainer
