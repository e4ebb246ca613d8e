// data_parallel: data parallelism for a libtorch module, with gradsync's merged allreduces
// overlapping backward (the synchronizer) and its policies, Adasum included. libtorch's C++ API
// has no DistributedDataParallel; this is one, over any gradsync communicator. docs/torch.md
// is its manual ("What it does": layers, the flat buffer, hooks, planning, agreement; then
// same start and buffers, accumulation, uneven inputs, mixed precision). Its parts are the
// other headers of this folder; this one ties them to an iteration's calls.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include <gradsync/collective/allreduce.hpp>
#include <gradsync/collective/verify.hpp>
#include <gradsync/comm/communicator.hpp>
#include <gradsync/core/error.hpp>
#include <gradsync/plan/plan.hpp>
#include <gradsync/planner/single.hpp>
#include <gradsync/planner/wfbp.hpp>
#include <gradsync/runtime/synchronizer.hpp>
#include <gradsync/torch/agreement.hpp>
#include <gradsync/torch/buffers.hpp>
#include <gradsync/torch/element.hpp>
#include <gradsync/torch/gradient_memory.hpp>
#include <gradsync/torch/hooks.hpp>
#include <gradsync/torch/join.hpp>
#include <gradsync/torch/local_step.hpp>
#include <gradsync/torch/model_change.hpp>
#include <gradsync/torch/options.hpp>
#include <gradsync/torch/planning.hpp>
#include <gradsync/torch/progress.hpp>
#include <gradsync/torch/state.hpp>

namespace gradsync {

template <class T, communicator Comm, reduction_policy Policy = average, allreduce_algorithm Algorithm = automatic>
class data_parallel {
    static_assert(torch_binding::is_module_element<T>,
                  "gradsync::data_parallel: parameters of float, double, gradsync::half (at::Half) or "
                  "gradsync::bfloat16 (at::BFloat16)");
    using clock = std::chrono::steady_clock;
    using named_tensors = torch_binding::named_tensors;
    template <class W>
    using sync_type = synchronizer<W, Comm, Policy, Algorithm>;
    // The synchronizer of the wire type: T, or fp16 or bf16 when compressed.
    using any_sync = std::variant<std::unique_ptr<sync_type<T>>, std::unique_ptr<sync_type<half>>,
                                  std::unique_ptr<sync_type<bfloat16>>>;

public:
    data_parallel(Comm& comm, torch::nn::Module& module, data_parallel_options options = {}, Algorithm algorithm = {})
        : comm_(&comm), options_(std::move(options)), algorithm_(algorithm)
    {
        torch_binding::check(options_, sizeof(T), prefix());
        for (const auto& item : module.named_parameters(true))
            (item.value().requires_grad() ? params_ : frozen_).add(item.key(), item.value());
        for (const auto& item : module.named_buffers(true))
            buffers_.add(item.key(), item.value());
        check_tensors();
        agree();
        gradients_.emplace(comm, params_.tensors, options_.compress, reads_shared_buffer(algorithm_));
        state_.emplace(comm, std::vector<const named_tensors*>{&params_, &frozen_, &buffers_});
        if (options_.broadcast_start)
            state_->copy_from(0);
        buffers_kept_.emplace(comm, options_.buffers, buffers_);
        if (options_.uneven_inputs)
            vote_.emplace(comm);
        gradients_->point_at_views(params_.tensors);
        const std::size_t layers = params_.tensors.size();
        progress_.emplace(params_, options_.accumulate, prefix());
        measured_.assign(layers, 0.0);
        if (changes_model()) {
            change_.emplace(gradients_->flat(), layers,
                            [this](const at::Tensor& flat, std::size_t l) { return gradients_->view_of(flat, l); });
            build(planner::single(profile_of(measured_)));
        } else {
            measuring_ = options_.measure_iterations;
            build(planner::wfbp(profile_of(measured_)));
        }
        hooks_.install(params_.tensors, [this](std::size_t l) { ready(l); });
    }

    data_parallel(const data_parallel&) = delete;
    data_parallel& operator=(const data_parallel&) = delete;

    // Zeroes every gradient (the flat buffer), pointing any grad that was replaced back at its view.
    void zero_grad()
    {
        gradients_->point_at_views(params_.tensors);
        gradients_->zero();
    }

    // Backward passes inside this scope only accumulate; the next pass outside it reduces the
    // sum (DDP's no_sync()). Ends at the guard's destruction.
    class no_sync_guard {
    public:
        explicit no_sync_guard(data_parallel& dp) : dp_(&dp) { dp_->set_no_sync(true); }
        no_sync_guard(const no_sync_guard&) = delete;
        no_sync_guard& operator=(const no_sync_guard&) = delete;
        ~no_sync_guard() { dp_->set_no_sync(false); }

    private:
        data_parallel* dp_;
    };
    [[nodiscard]] no_sync_guard no_sync() { return no_sync_guard(*this); }

    // Hands over the layers not yet ready, waits for every group's allreduce and ends the
    // iteration (buffers, vote, replica check, planning). Rethrows the synchronizer's error.
    // Gradient mode only.
    void synchronize()
    {
        if (changes_model())
            throw usage_error(prefix() + "it reduces the model change: call step(optimizer), not synchronize()");
        {
            std::lock_guard lock(mutex_);
            progress_->check_passes("synchronize()");
            progress_->hand_over_rest([&](std::size_t l) { hand_over(l); });
        }
        wait();
        end_iteration(true);
    }

    // Ends the iteration with the optimizer's step. Gradients: synchronize(), then the step.
    // Model change: the local step; on the last of options.local_steps, the change reduced
    // and applied on every rank.
    void step(torch::optim::Optimizer& optimizer)
    {
        if (!changes_model()) {
            synchronize();
            optimizer.step();
            return;
        }
        torch::NoGradGuard no_grad;
        if (steps_) {
            if (&optimizer != steps_->optimizer())
                throw usage_error(prefix() + "step() with another optimizer than the one given to overlap()");
            {
                std::lock_guard lock(mutex_);
                progress_->check_passes("step()");
                for (std::size_t l = params_.tensors.size(); l-- > 0;)
                    if (!progress_->done(l))
                        step_locally(l);
                progress_->hand_over_rest([&](std::size_t l) { hand_over(l); });
            }
            wait();
            change_->apply(gradients_->views(), params_.tensors);
            end_iteration(true);
            return;
        }
        {
            std::lock_guard lock(mutex_);
            progress_->check_passes("step()");
            progress_->restart();
        }
        if (local_steps_ == 0)
            change_->keep_start(params_.tensors);
        optimizer.step();
        if (++local_steps_ < options_.local_steps)
            return;
        local_steps_ = 0;
        change_->change_into(gradients_->views(), params_.tensors);
        reduce_change();
    }

    // For a rank that has run out of data (options.uneven_inputs): answers the other ranks'
    // reductions with zeros, and takes the same steps (gradients: optimizer.step() on the
    // reduced gradient; model change: the reduced change), until every rank has joined.
    // Collective in the sense that every rank calls it once it has no data left.
    void join(torch::optim::Optimizer& optimizer)
    {
        if (!vote_)
            throw usage_error(prefix() + "join() needs data_parallel_options::uneven_inputs = true on every rank");
        between_iterations("join()");
        if (local_steps_ != 0)
            throw usage_error(prefix() + "join() after " + std::to_string(local_steps_) + " of " +
                              std::to_string(options_.local_steps) + " local steps: finish the combined step first");
        torch::NoGradGuard no_grad;
        for (;;) {
            gradients_->zero();
            if (changes_model()) {
                change_->keep_start(params_.tensors);
                if (!reduce_change(false))
                    return;
                continue;
            }
            {
                std::lock_guard lock(mutex_);
                progress_->hand_over_rest([&](std::size_t l) { hand_over(l); });
            }
            wait();
            if (!end_iteration(false))
                return;
            optimizer.step();
        }
    }

    // Model change: from the next iteration, each parameter's local step runs in its hook as
    // soon as its gradient is ready, and its change is handed over at once, so that the
    // changes' reductions overlap backward as the gradients' do (Horovod's Adasum optimizer).
    // step(optimizer) then steps the parameters whose gradients were not produced, waits and
    // applies. The plan is measured and planned as in gradient mode. Collective, between
    // iterations; local_steps must be 1, and the optimizer must step each parameter on its own
    // (local_step.hpp).
    void overlap(torch::optim::Optimizer& optimizer)
    {
        between_iterations("overlap()");
        if (!changes_model())
            throw usage_error(prefix() + "overlap() is for reduce = reduction_target::model_change; gradients "
                                         "overlap backward already");
        if (options_.local_steps != 1)
            throw usage_error(prefix() + "overlap() takes one local step per combined change; local_steps is " +
                              std::to_string(options_.local_steps));
        steps_.emplace(optimizer, params_, prefix());
        measure_again();
    }

    // Copies rank 0's parameters and buffers to every rank (after restoring a checkpoint on
    // rank 0 only). Collective, between iterations.
    void broadcast_module()
    {
        between_iterations("broadcast_module()");
        state_->copy_from(0);
    }

    // Copies rank 0's optimizer state (every tensor of it, and each group's options) into
    // every rank's optimizer. Collective, between iterations.
    void broadcast_state(torch::optim::Optimizer& optimizer)
    {
        between_iterations("broadcast_state()");
        torch_binding::copy_optimizer_state(*comm_, optimizer, prefix());
    }

    // Compares every rank's parameters and buffers with rank 0's, bit for bit: a difference is a
    // mismatch_error on every rank naming the first tensor that differs and the ranks.
    // Collective, between iterations; options.check_every runs it on its own.
    void check_replicas()
    {
        const std::size_t mine = state_->first_difference();
        const std::vector<std::size_t> ones(std::size_t(comm_->size()), 1);
        const auto all = gradsync::detail::gather_all(*comm_, std::span<const std::size_t>(&mine, 1), ones);
        std::size_t first = state_->none;
        std::string ranks;
        for (int k = 1; k < comm_->size(); ++k)
            if (const std::size_t i = all[std::size_t(k)].front(); i != state_->none) {
                first = std::min(first, i);
                ranks += (ranks.empty() ? "" : ", ") + std::to_string(k);
            }
        if (first != state_->none)
            throw mismatch_error(prefix() + "replicas differ after " + std::to_string(iterations_) +
                                 (iterations_ == 1 ? " iteration: " : " iterations: ") + state_->name(first) +
                                 " differs from rank 0's; ranks that differ: " + ranks);
    }

    // Measures options.measure_iterations iterations again from the next one, then plans.
    // Collective, between iterations; gradient mode only (model changes are not overlapped).
    void replan()
    {
        between_iterations("replan()");
        if (changes_model() && !steps_)
            throw usage_error(prefix() + "replan() measures backward, which a model-change data_parallel does "
                                         "not overlap before overlap(); use_plan() sets a plan");
        measure_again();
    }

    // Runs `p` from the next iteration on, measuring no more. Collective, between iterations;
    // the synchronizer checks the plan and that all ranks pass the same one.
    void use_plan(const planner::merge_plan& p)
    {
        between_iterations("use_plan()");
        build(p);
        measuring_ = 0;
    }

    const planner::merge_plan& plan() const noexcept
    {
        return std::visit([](const auto& s) -> const planner::merge_plan& { return s->plan(); }, sync_);
    }
    // The profile the current plan came from (zero times until the first plan).
    const planner::profile& profile() const noexcept { return profile_; }
    std::span<const std::size_t> layer_sizes() const noexcept { return gradients_->sizes(); }
    const std::vector<std::string>& parameter_names() const noexcept { return params_.names; }
    // The flat buffer every gradient is a view of, in parameters() order.
    const at::Tensor& gradients() const noexcept { return gradients_->flat(); }
    // Whether the buffer the reducers work on (gradients(), or the compressed copy) lies in
    // memory the ranks share, reduced there in place with no copy in (reads_shared_buffer()).
    bool gradients_shared() const noexcept { return gradients_->shared(); }
    // How many times each parameter's hook fired since construction.
    std::span<const std::uint64_t> hook_calls() const noexcept { return progress_->hook_calls(); }
    std::uint64_t iterations() const noexcept { return iterations_; }
    // When each layer (by index) was handed to the synchronizer in the last iteration, the
    // last layer first, and the start and end of each group's allreduce in it (plan order).
    std::span<const clock::time_point> handed_over_at() const noexcept { return progress_->handed_over_at(); }
    std::span<const group_times> last_times() const
    {
        return std::visit([](const auto& s) { return s->last_times(); }, sync_);
    }

private:
    bool changes_model() const noexcept { return options_.reduce == reduction_target::model_change; }

    void measure_again()
    {
        std::fill(measured_.begin(), measured_.end(), 0.0);
        measuring_ = std::max(options_.measure_iterations, 1);
        build(planner::wfbp(profile_of(measured_)));
    }

    // Model change overlapped: parameter l's local step and its change (under mutex_).
    void step_locally(std::size_t l)
    {
        torch::NoGradGuard no_grad;
        change_->keep_start(l, params_.tensors[l]);
        steps_->step(l);
        change_->change_into(l, gradients_->views()[l], params_.tensors[l]);
        progress_->set_done(l);
    }

    std::string prefix() const { return "gradsync::data_parallel (" + where(*comm_) + "): "; }

    void check_tensors() const
    {
        for (std::size_t l = 0; l < params_.tensors.size(); ++l) {
            const at::Tensor& p = params_.tensors[l];
            std::string problem = torch_binding::layout_problem(p);
            if (p.scalar_type() != torch_binding::scalar_type_of<T>())
                problem = std::string("is of type ") + c10::toString(p.scalar_type()) + ", the data_parallel's is " +
                    c10::toString(torch_binding::scalar_type_of<T>());
            if (!problem.empty())
                throw usage_error(prefix() + params_.name(l) + " " + problem);
        }
        for (const named_tensors* list : {&frozen_, &buffers_})
            for (std::size_t i = 0; i < list->tensors.size(); ++i)
                if (const std::string problem = torch_binding::layout_problem(list->tensors[i]); !problem.empty())
                    throw usage_error(prefix() + list->name(i) + " " + problem);
    }

    // The ranks' tensors and the options that decide which collectives run, against rank 0's.
    void agree()
    {
        for (const named_tensors* list : {&params_, &frozen_, &buffers_})
            torch_binding::agree_on(*comm_, *list, prefix());
        torch_binding::agree_on(*comm_, options_, reads_shared_buffer(algorithm_), prefix());
    }

    // The change in the gradient buffer (zero for a rank that has joined) reduced and applied.
    // False when the vote found no rank with data left.
    bool reduce_change(bool active = true)
    {
        {
            std::lock_guard lock(mutex_);
            for (std::size_t l = params_.tensors.size(); l-- > 0;) {
                progress_->stamp(l);
                hand_over(l);
            }
        }
        wait();
        change_->apply(gradients_->views(), params_.tensors);
        return end_iteration(active);
    }

    // What every rank does after an iteration's reduction, in the same order on every rank:
    // measuring, the vote, the buffers, the replica check. False when no rank voted active.
    bool end_iteration(bool active)
    {
        {
            std::lock_guard lock(mutex_);
            progress_->restart();
        }
        ++iterations_;
        if (measuring_ > 0) {
            progress_->add_backward_times(measured_);
            if (--measuring_ == 0)
                build(std::visit(
                    [&]<class W>(const std::unique_ptr<sync_type<W>>&) {
                        return torch_binding::plan_measured<W, Policy>(*comm_, options_, algorithm_, params_.names,
                                                                       gradients_->sizes(), measured_, profile_);
                    },
                    sync_));
        }
        int root = 0;
        if (vote_) {
            const std::vector<char>& voted = vote_->cast(active);
            const auto first = std::find(voted.begin(), voted.end(), 1);
            if (first == voted.end())
                return false;
            root = int(first - voted.begin());
        }
        (*buffers_kept_)(root);
        if (options_.check_every > 0 && iterations_ % std::uint64_t(options_.check_every) == 0)
            check_replicas();
        return true;
    }

    void between_iterations(const char* call) const
    {
        std::lock_guard lock(mutex_);
        progress_->between_iterations(call);
    }

    void set_no_sync(bool on)
    {
        std::lock_guard lock(mutex_);
        progress_->set_no_sync(on);
    }

    // Parameter l's gradient is accumulated (autograd's thread).
    void ready(std::size_t l)
    {
        std::lock_guard lock(mutex_);
        progress_->count_hook(l);
        gradients_->take_back(l, params_.tensors[l].mutable_grad());
        if (!progress_->produced(l))
            return;
        if (steps_)
            step_locally(l);
        progress_->set_done(l);
        if (changes_model() && !steps_)
            return;
        progress_->hand_over_done([&](std::size_t k) { hand_over(k); });
    }

    // Layer l to the synchronizer (progress_ has stamped it).
    void hand_over(std::size_t l)
    {
        std::visit(
            [&]<class W>(std::unique_ptr<sync_type<W>>& s) {
                if constexpr (std::is_same_v<W, T>)
                    s->ready(l, gradients_->layer(l));
                else
                    s->ready(l, gradients_->template narrow<W>(l));
            },
            sync_);
    }

    // Waits for the iteration's reduction; compressed gradients widened back into the buffer.
    void wait()
    {
        std::visit(
            [&]<class W>(std::unique_ptr<sync_type<W>>& s) {
                s->wait();
                if constexpr (!std::is_same_v<W, T>)
                    gradients_->template widen<W>();
            },
            sync_);
    }

    planner::profile profile_of(const std::vector<double>& backward) const
    {
        return torch_binding::profile_of(params_.names, gradients_->sizes(), backward);
    }

    // The old synchronizer stays until the new one is built, so a plan refused on every rank
    // leaves the data_parallel working as before.
    void build(const planner::merge_plan& plan)
    {
        synchronizer_options sync = options_.sync;
        sync.shared = gradients_->buffer();
        const auto make = [&]<class W>(std::type_identity<W>) {
            return std::make_unique<sync_type<W>>(*comm_, gradients_->sizes(), plan, Policy{}, algorithm_, sync);
        };
        switch (options_.compress) {
        case compression::none: sync_.template emplace<0>(make(std::type_identity<T>{})); break;
        case compression::fp16: sync_.template emplace<1>(make(std::type_identity<half>{})); break;
        case compression::bf16: sync_.template emplace<2>(make(std::type_identity<bfloat16>{})); break;
        }
    }

    Comm* comm_;
    data_parallel_options options_;
    Algorithm algorithm_;
    named_tensors params_{"parameter", "parameters that require a gradient", {}, {}};
    named_tensors frozen_{"frozen parameter", "parameters that require no gradient", {}, {}};
    named_tensors buffers_{"buffer", "buffers", {}, {}};
    std::optional<torch_binding::gradient_memory<T>> gradients_;
    std::optional<torch_binding::module_state<Comm>> state_; // parameters and buffers
    std::optional<torch_binding::buffer_keeper<T, Comm>> buffers_kept_;
    std::optional<torch_binding::active_vote<Comm>> vote_;
    std::optional<torch_binding::model_change> change_;
    std::optional<torch_binding::parameter_steps> steps_; // model change overlapped: overlap()
    int local_steps_ = 0; // model change: local steps taken towards the next combined one
    any_sync sync_;
    planner::profile profile_;

    mutable std::mutex mutex_; // guards progress_, shared with autograd's thread
    std::optional<torch_binding::layer_progress> progress_;
    std::vector<double> measured_;
    int measuring_ = 0;
    std::uint64_t iterations_ = 0;
    torch_binding::gradient_hooks hooks_; // last: removed first, before what they call
};

} // namespace gradsync
