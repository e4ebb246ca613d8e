// One rank's copy of the model and its data-parallel step: gather the local batch, run
// forward, run backward handing every layer's gradient to the synchronizer as soon as it
// is written (L-1 down to 0), wait for the reduced gradients, then update.
//
// The step records when backward started, when each layer's gradient was ready and when
// wait() returned, the raw material of a profile and of a measured iteration. Any type with
// ready(layer, span) and wait() serves as the synchronizer; local_only runs the step with
// no communication at all, for profiling.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "dataset.hpp"
#include "mlp.hpp"
#include "sgd.hpp"

namespace trainer {

using steady = std::chrono::steady_clock;

struct local_only {
    void ready(std::size_t, std::span<float>) noexcept {}
    void wait() noexcept {}
};

struct step_record {
    double loss = 0;                           // mean over the local batch, before the update
    steady::time_point backward_start{};
    std::vector<steady::time_point> ready_at;   // per parameter layer
    steady::time_point end{};                   // wait() returned
};

class replica {
public:
    replica(std::vector<std::size_t> widths, std::uint64_t init_seed, sgd_options o)
        : model_(std::move(widths), init_seed), grad_(model_.parameter_count()),
          optimizer_(model_.parameter_count(), o)
    {
        record_.ready_at.resize(model_.layer_sizes().size());
    }

    mlp& model() noexcept { return model_; }
    const mlp& model() const noexcept { return model_; }
    // The last step's gradient as the synchronizer left it (reduced over the ranks).
    std::span<const float> gradient() const noexcept { return grad_; }

    // One step on the samples `batch` of d; progress in [0, 1] sets the learning rate.
    template <class Sync>
    const step_record& step(const dataset& d, std::span<const std::size_t> batch, Sync& sync, double progress)
    {
        gather(d, batch);
        model_.forward(inputs_, batch.size());
        record_.backward_start = steady::now();
        record_.loss = model_.backward(labels_, grad_, [&](std::size_t l, std::span<float> g) {
            record_.ready_at[l] = steady::now();
            sync.ready(l, g);
        });
        sync.wait();
        record_.end = steady::now();
        optimizer_.step(model_.parameters(), grad_, progress);
        return record_;
    }

    // Number of samples in `batch` that the model classifies correctly.
    std::size_t correct(const dataset& d, std::span<const std::size_t> batch)
    {
        gather(d, batch);
        model_.forward(inputs_, batch.size());
        std::size_t right = 0;
        for (std::size_t i = 0; i < batch.size(); ++i)
            right += model_.predicted(i) == labels_[i];
        return right;
    }

private:
    void gather(const dataset& d, std::span<const std::size_t> batch)
    {
        inputs_.resize(batch.size() * d.inputs());
        labels_.resize(batch.size());
        for (std::size_t i = 0; i < batch.size(); ++i) {
            const std::span<const float> x = d.sample(batch[i]);
            std::copy(x.begin(), x.end(), inputs_.begin() + std::ptrdiff_t(i * d.inputs()));
            labels_[i] = d.label(batch[i]);
        }
    }

    mlp model_;
    std::vector<float> grad_;
    sgd optimizer_;
    std::vector<float> inputs_;
    std::vector<std::uint32_t> labels_;
    step_record record_;
};

} // namespace trainer
