// The layer profile of a group of ranks as synchronous data-parallel training sees it.
//
// Every rank runs training steps without communication, the ranks starting each step
// together (a barrier), and records on the shared steady_clock when backward started and
// when each layer's gradient was ready. An allreduce finishes only after the last rank has
// joined it, so for the group a layer is ready when the slowest rank has it: per step, the
// layer's ready time is the latest over the ranks, counted from the ranks' mean backward
// start (where the iteration times that the ranks measure, averaged, begin). Per layer the
// median over the steps; a layer's backward time is its ready time minus the next layer's
// (the last layer's is its ready time). On one rank this is the plain median profile.
// Medians keep the order of the ready times, so no backward time is negative.
//
// Collective. Cost: the steps, a one-element allreduce per step and one allreduce of
// ranks x steps x (layers + 1) doubles, on `comm` (give it the undelayed transport).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <gradsync/collective/allreduce.hpp>
#include <gradsync/comm/communicator.hpp>
#include <gradsync/planner/profile.hpp>

#include "../rank_stats.hpp"
#include "dataset.hpp"
#include "replica.hpp"

namespace trainer {

using gradsync_examples::median;

// batch(step) gives this rank's local batch of the step.
template <gradsync::communicator C, class Batch>
gradsync::planner::profile measure_group_profile(C& comm, replica& probe, const dataset& train_set, Batch&& batch,
                                                 std::size_t steps)
{
    const std::size_t ranks = std::size_t(comm.size()), rank = std::size_t(comm.rank());
    const std::span<const std::size_t> sizes = probe.model().layer_sizes();
    const std::size_t layers = sizes.size(), width = layers + 1;
    const auto seconds = [](steady::time_point t) {
        return std::chrono::duration<double>(t.time_since_epoch()).count();
    };

    // stamps[(step * ranks + r) * width]: rank r's backward start, then layer l's ready time
    // at + 1 + l. Each rank fills its own slots; the sum over ranks gathers them.
    std::vector<double> stamps(steps * ranks * width, 0.0);
    local_only none;
    for (std::size_t step = 0; step < steps; ++step) {
        double together = 0;
        gradsync::allreduce(comm, std::span<double>(&together, 1));
        const step_record& r = probe.step(train_set, batch(step), none, 0.0);
        double* mine = &stamps[(step * ranks + rank) * width];
        mine[0] = seconds(r.backward_start);
        for (std::size_t l = 0; l < layers; ++l)
            mine[1 + l] = seconds(r.ready_at[l]);
    }
    gradsync::allreduce(comm, std::span<double>(stamps));

    std::vector<std::vector<double>> ready(layers);
    for (std::size_t step = 0; step < steps; ++step) {
        const double* row = &stamps[step * ranks * width];
        double start = 0;
        for (std::size_t r = 0; r < ranks; ++r)
            start += row[r * width] / double(ranks);
        for (std::size_t l = 0; l < layers; ++l) {
            double latest = row[1 + l];
            for (std::size_t r = 1; r < ranks; ++r)
                latest = std::max(latest, row[r * width + 1 + l]);
            ready[l].push_back(latest - start);
        }
    }
    const std::vector<std::string> names = probe.model().layer_names();
    gradsync::planner::profile p;
    for (std::size_t l = 0; l < layers; ++l) {
        const double r = median(ready[l]), next = l + 1 < layers ? median(ready[l + 1]) : 0.0;
        p.push_back({names[l], sizes[l], r - next, std::nullopt});
    }
    return p;
}

} // namespace trainer
