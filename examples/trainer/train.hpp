// Data-parallel training over any gradsync communicator.
//
// Every rank builds a replica with the same initial weights. An epoch shuffles the training
// set (one permutation per epoch, the same on every rank) and cuts it into global batches
// of N x local_batch samples; rank r takes the r-th local batch of each, so the compute of
// an epoch does not depend on N (samples that do not fill a last global batch are skipped).
// The synchronizer reduces the local mean gradients with the policy: Sum adds the N of
// them, Adasum combines them adaptively per layer. Every rank then holds the same reduced
// gradient and applies the same update, so the replicas stay identical.
//
// The learning-rate schedule is a function of the share of training samples seen (sgd.hpp)
// and is not changed with N. After each epoch the evaluation set (validation or test) is
// split over the ranks and the correct counts and training losses are summed with
// allreduce, so every rank reports the same numbers. A run whose loss stops being finite
// has diverged and ends after that epoch.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include <gradsync/collective/allreduce.hpp>
#include <gradsync/comm/communicator.hpp>
#include <gradsync/core/error.hpp>
#include <gradsync/runtime/synchronizer.hpp>

#include "dataset.hpp"
#include "random.hpp"
#include "replica.hpp"
#include "sgd.hpp"

namespace trainer {

struct train_options {
    std::vector<std::size_t> widths;
    std::size_t epochs = 1;
    std::size_t local_batch = 16;
    sgd_options sgd;
    std::uint64_t init_seed = 1;  // initial weights
    std::uint64_t order_seed = 1; // sample order
};

struct epoch_result {
    std::size_t epoch = 0; // 1-based
    double train_loss = 0; // mean over the epoch's local batches of all ranks
    double accuracy = 0;   // on the evaluation set
    double seconds = 0;    // wall time of the epoch on this rank, evaluation included
};

// The training set's order in `epoch` (Fisher-Yates from the seed and the epoch).
inline std::vector<std::size_t> epoch_order(std::size_t n, std::uint64_t seed, std::size_t epoch)
{
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), std::size_t(0));
    random_source rng(seed ^ (0x632be59bd9b4e019ull * (epoch + 1)));
    for (std::size_t i = n; i > 1; --i)
        std::swap(order[i - 1], order[rng.below(i)]);
    return order;
}

// v summed over the ranks; every rank gets the same sums.
template <gradsync::communicator C>
std::array<double, 2> sum_over_ranks(C& comm, std::array<double, 2> v)
{
    gradsync::allreduce(comm, std::span<double>(v));
    return v;
}

template <class Policy, class Algorithm, gradsync::communicator C, class OnEpoch>
std::vector<epoch_result> train(C& comm, const dataset& train_set, const dataset& eval_set, const train_options& o,
                                const std::vector<std::vector<std::size_t>>& plan, Algorithm algorithm,
                                OnEpoch&& on_epoch)
{
    const std::size_t ranks = std::size_t(comm.size()), rank = std::size_t(comm.rank());
    const std::size_t global_batch = ranks * o.local_batch;
    if (o.local_batch == 0 || o.epochs == 0 || global_batch > train_set.size())
        throw gradsync::usage_error("trainer::train (" + gradsync::where(comm) + "): " + std::to_string(o.epochs) +
                                    " epochs of global batches of " + std::to_string(ranks) + " x " +
                                    std::to_string(o.local_batch) + " samples cannot be cut from " +
                                    std::to_string(train_set.size()) + " training samples");
    const std::size_t steps = train_set.size() / global_batch;
    replica model(o.widths, o.init_seed, o.sgd);
    gradsync::synchronizer<float, C, Policy, Algorithm> sync(comm, model.model().layer_sizes(), plan, {}, algorithm);

    std::vector<epoch_result> results;
    std::vector<std::size_t> eval_part;
    for (std::size_t i = rank; i < eval_set.size(); i += ranks)
        eval_part.push_back(i);
    for (std::size_t epoch = 0; epoch < o.epochs; ++epoch) {
        const steady::time_point start = steady::now();
        const std::vector<std::size_t> order = epoch_order(train_set.size(), o.order_seed, epoch);
        double loss = 0;
        for (std::size_t s = 0; s < steps; ++s) {
            const std::span<const std::size_t> batch(&order[s * global_batch + rank * o.local_batch], o.local_batch);
            const double progress = double(epoch * steps + s) / double(o.epochs * steps);
            loss += model.step(train_set, batch, sync, progress).loss;
        }
        double right = 0;
        constexpr std::size_t eval_batch = 512;
        const std::span<const std::size_t> mine(eval_part);
        for (std::size_t i = 0; i < mine.size(); i += eval_batch)
            right += double(model.correct(eval_set, mine.subspan(i, std::min(eval_batch, mine.size() - i))));
        const std::array<double, 2> total = sum_over_ranks(comm, {right, loss});
        epoch_result r;
        r.epoch = epoch + 1;
        r.train_loss = total[1] / double(steps * ranks);
        r.accuracy = total[0] / double(eval_set.size());
        r.seconds = std::chrono::duration<double>(steady::now() - start).count();
        results.push_back(r);
        on_epoch(r);
        if (!std::isfinite(r.train_loss))
            break;
    }
    return results;
}

} // namespace trainer
