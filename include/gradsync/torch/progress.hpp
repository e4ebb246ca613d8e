// The layers' progress through one iteration of data_parallel: each gradient's backward passes
// (of data_parallel_options::accumulate) and hook calls, which layers are done, their hand-over
// to the synchronizer in order from the last layer (a layer goes once every layer after it
// has), when each went, and the no_sync() scope; with the misuse each call between these
// states is refused for. Shared with autograd's thread, which runs the hooks: its owner calls
// it under one mutex.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <gradsync/core/error.hpp>
#include <gradsync/torch/agreement.hpp>

namespace gradsync::torch_binding {

class layer_progress {
public:
    using clock = std::chrono::steady_clock;

    // params: the parameters the layers are, named in errors after prefix; kept by reference.
    layer_progress(const named_tensors& params, int accumulate, std::string prefix)
        : params_(&params), accumulate_(accumulate), prefix_(std::move(prefix)), done_(params.tensors.size(), 0),
          passes_(params.tensors.size(), 0), hook_calls_(params.tensors.size(), 0),
          handed_over_at_(params.tensors.size()), next_(params.tensors.size())
    {
    }

    // Parameter l's hook fired (whatever it leads to).
    void count_hook(std::size_t l) { ++hook_calls_[l]; }

    // A backward pass produced parameter l's gradient: true when it was the last of its
    // accumulate passes, outside no_sync(); a pass beyond them is a usage_error naming it.
    bool produced(std::size_t l)
    {
        if (no_sync_)
            return false;
        if (++passes_[l] > accumulate_)
            throw usage_error(prefix_ + params_->name(l) + ": its gradient was produced " +
                              (accumulate_ == 1 ? std::string("twice") : std::to_string(passes_[l]) + " times") +
                              " before synchronize(); " +
                              (accumulate_ == 1 ? std::string("one backward per iteration")
                                                : "data_parallel_options::accumulate is " + std::to_string(accumulate_)));
        return passes_[l] == accumulate_;
    }

    void set_done(std::size_t l) { done_[l] = 1; }
    bool done(std::size_t l) const { return done_[l] != 0; }

    // hand_over(l) for each layer whose turn has come: done, and every layer after it gone.
    template <class HandOver>
    void hand_over_done(HandOver&& hand_over)
    {
        while (next_ > 0 && done_[next_ - 1]) {
            stamp(--next_);
            hand_over(next_);
        }
    }

    // hand_over(l) for every layer not gone yet, in order (the iteration's end).
    template <class HandOver>
    void hand_over_rest(HandOver&& hand_over)
    {
        while (next_ > 0) {
            stamp(--next_);
            hand_over(next_);
        }
    }

    // Layer l goes now (also outside the order: a model change, every layer at once at the step).
    void stamp(std::size_t l) { handed_over_at_[l] = clock::now(); }

    // The next iteration: no pass, no layer done or gone.
    void restart()
    {
        std::fill(done_.begin(), done_.end(), 0);
        std::fill(passes_.begin(), passes_.end(), 0);
        next_ = done_.size();
    }

    // Adds to backward[l] the time between layer l + 1's hand-over and layer l's this iteration.
    void add_backward_times(std::vector<double>& backward) const
    {
        for (std::size_t l = 0; l + 1 < handed_over_at_.size(); ++l)
            backward[l] += std::chrono::duration<double>(handed_over_at_[l] - handed_over_at_[l + 1]).count();
    }

    // A call that ends the iteration (call names it): every layer's gradient produced in none or
    // all of the accumulate passes, outside no_sync().
    void check_passes(const char* call) const
    {
        if (no_sync_)
            throw usage_error(prefix_ + call + " inside a no_sync() scope: end the scope first");
        const int most = passes_.empty() ? 0 : *std::max_element(passes_.begin(), passes_.end());
        if (most != 0 && most != accumulate_)
            throw usage_error(prefix_ + call + " after " + std::to_string(most) + " of " + std::to_string(accumulate_) +
                              " backward passes (data_parallel_options::accumulate)");
    }

    // A call allowed only between iterations: no backward pass since the last one ended.
    void between_iterations(const char* call) const
    {
        if (std::any_of(passes_.begin(), passes_.end(), [](int p) { return p != 0; }))
            throw usage_error(prefix_ + call + " between iterations: backward has run and the iteration has not ended");
    }

    void set_no_sync(bool on)
    {
        if (on && no_sync_)
            throw usage_error(prefix_ + "no_sync() inside a no_sync() scope");
        no_sync_ = on;
    }

    std::span<const std::uint64_t> hook_calls() const noexcept { return hook_calls_; }
    std::span<const clock::time_point> handed_over_at() const noexcept { return handed_over_at_; }

private:
    const named_tensors* params_;
    int accumulate_;
    std::string prefix_;
    bool no_sync_ = false;
    std::vector<char> done_;
    std::vector<int> passes_;
    std::vector<std::uint64_t> hook_calls_;
    std::vector<clock::time_point> handed_over_at_;
    std::size_t next_; // layers below next_ are not handed over yet this iteration
};

} // namespace gradsync::torch_binding
