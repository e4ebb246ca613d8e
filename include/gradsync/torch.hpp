// data_parallel: data parallelism for a libtorch module, with gradsync's merged allreduces
// overlapping backward (the synchronizer) and its policies, Adasum included. libtorch's C++ API
// has no DistributedDataParallel; this is one, over any gradsync communicator.
//
//   gradsync::data_parallel<float, Comm, gradsync::average> dp(comm, *model); // collective
//   for each batch:
//       dp.zero_grad();                      // not optimizer.zero_grad(), which throws on views
//       loss = criterion(model->forward(x), y);
//       loss.backward();                     // each group's allreduce starts during backward
//       dp.step(optimizer);                  // every gradient reduced in place, then the step
//
// dp.step(optimizer) is dp.synchronize() then optimizer.step(); a loop may call the two itself.
//
// Layers: the module's parameters that require a gradient, in parameters() order
// (registration order: forward order for torch::nn::Sequential and most modules), one planner
// layer each. All must be dense, contiguous, on the CPU and of type T (float or double). Their
// gradients are views of one flat buffer, so nothing is copied (DDP's gradient_as_bucket_view):
// the constructor and zero_grad() point every parameter's grad at its view, and autograd
// accumulates into it in place.
//
// Hooks: a post hook on each parameter's gradient accumulator marks it ready. A layer is handed
// to the synchronizer once it and every layer above it are ready (the synchronizer takes the
// layers in backward order, and autograd may finish the parameters of one module in either
// order), so the merged allreduces start as backward goes. synchronize() hands over the layers
// whose hooks did not fire (parameters unused this iteration: their gradient is zero), waits,
// and rethrows the synchronizer's error, if any. One backward per iteration: a second one
// before synchronize() is refused by its hooks with a usage_error.
//
// Planning: the first options.measure_iterations iterations run one allreduce per layer
// (wfbp) and record when each layer is handed over; layer l's backward time is the gap to the
// layer above it (the time before the first hook, the loss's own backward, is not counted).
// Then every rank averages those times (an allreduce, so all plan from the same profile), the
// cost model is options.cost or, when that is zero, calibrated over the communicator, and
// options.plan_with (default: planner::optimal) gives the plan that the synchronizer is rebuilt
// with. replan() measures again from the next iteration.
//
// use_plan(plan) replaces the plan (collective, between iterations), for plans made elsewhere:
// gradsync-plan, another planner, a study comparing plans.
//
// Model change (options.reduce = reduction_target::model_change, the Adasum paper's Figure 3,
// meant for Adam-like optimizers whose update is not a linear function of the gradient): step()
// keeps the parameters x0, runs the optimizer on each rank's own gradient, reduces the changes
// d = x1 - x0 with the policy and sets x = x0 + reduced d on every rank. Optimizer states stay
// local. All changes exist only after the local step, so there is nothing to overlap with
// backward and nothing to measure: the plan is one group (one set of messages; Adasum stays
// per layer inside it). The gradient buffer holds the changes after step(), reduced.
//
// Agreement: construction is collective; ranks whose modules differ in the number, types or
// shapes of their parameters get a mismatch_error on every rank naming the first parameter
// that differs, before any hook is installed.
#pragma once

#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <gradsync/allreduce.hpp>
#include <gradsync/communicator.hpp>
#include <gradsync/error.hpp>
#include <gradsync/planner.hpp>
#include <gradsync/planner/calibration.hpp>
#include <gradsync/runtime/synchronizer.hpp>
#include <gradsync/verify.hpp>

namespace gradsync {

// What data_parallel reduces: the gradients during backward, or the model change after a
// local optimizer step.
enum class reduction_target { gradients, model_change };

struct data_parallel_options {
    reduction_target reduce = reduction_target::gradients;
    // Iterations measured (one allreduce per layer) before the first plan; 0 keeps wfbp.
    int measure_iterations = 3;
    // The model's allreduce cost; zero: calibrated over the communicator when planning.
    planner::linear_cost cost{};
    // The planner: profile and cost to plan (bytes per element are the element type's).
    std::function<planner::plan(const planner::profile&, const planner::linear_cost&, std::size_t)> plan_with =
        [](const planner::profile& p, const planner::linear_cost& c, std::size_t bytes) {
            return planner::optimal(p, c, bytes);
        };
    synchronizer_options sync{};
};

template <class T, communicator Comm, reduction_policy Policy = average, allreduce_algorithm Algorithm = automatic>
class data_parallel {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                  "gradsync::data_parallel: parameters of float or double");
    using clock = std::chrono::steady_clock;

public:
    data_parallel(Comm& comm, torch::nn::Module& module, data_parallel_options options = {},
                  Algorithm algorithm = {})
        : comm_(&comm), options_(std::move(options)), algorithm_(algorithm)
    {
        if (options_.measure_iterations < 0)
            throw usage_error(prefix() + "measure_iterations must not be negative");
        for (const auto& item : module.named_parameters(true))
            if (item.value().requires_grad()) {
                names_.push_back(item.key());
                params_.push_back(item.value());
            }
        check_parameters();
        agree_on_shapes();
        std::size_t total = 0;
        for (const torch::Tensor& p : params_) {
            offsets_.push_back(total);
            sizes_.push_back(std::size_t(p.numel()));
            total += sizes_.back();
        }
        flat_ = torch::zeros({std::int64_t(total)}, torch::TensorOptions().dtype(torch::CppTypeToScalarType<T>()));
        for (std::size_t l = 0; l < params_.size(); ++l)
            views_.push_back(view_of(flat_, l));
        point_grads_at_views();
        done_.assign(params_.size(), 0);
        hook_calls_.assign(params_.size(), 0);
        handed_over_at_.assign(params_.size(), clock::time_point{});
        measured_.assign(params_.size(), 0.0);
        next_ = params_.size();
        if (changes_model()) {
            start_ = torch::empty_like(flat_);
            for (std::size_t l = 0; l < params_.size(); ++l)
                start_views_.push_back(view_of(start_, l));
            build(planner::single(profile_of(measured_)));
        } else {
            measuring_ = options_.measure_iterations;
            build(planner::wfbp(profile_of(measured_)));
        }
        install_hooks();
    }

    data_parallel(const data_parallel&) = delete;
    data_parallel& operator=(const data_parallel&) = delete;

    ~data_parallel()
    {
        for (std::size_t l = 0; l < accumulators_.size(); ++l)
            accumulators_[l]->del_post_hook(hook_keys_[l]);
    }

    // Zeroes every gradient (the flat buffer), pointing any grad that was replaced back at its view.
    void zero_grad()
    {
        point_grads_at_views();
        flat_.zero_();
    }

    // Hands over the layers not yet ready, waits for every group's allreduce and, after the
    // measured iterations, plans. Rethrows the synchronizer's error. Gradient mode only.
    void synchronize()
    {
        if (changes_model())
            throw usage_error(prefix() + "it reduces the model change: call step(optimizer), not synchronize()");
        {
            std::lock_guard lock(mutex_);
            while (next_ > 0)
                hand_over(--next_);
        }
        sync_->wait();
        end_iteration();
        if (measuring_ > 0) {
            for (std::size_t l = 0; l + 1 < params_.size(); ++l)
                measured_[l] += std::chrono::duration<double>(handed_over_at_[l] - handed_over_at_[l + 1]).count();
            if (--measuring_ == 0)
                plan_from_measurements();
        }
    }

    // Ends the iteration with the optimizer's step. Gradients: synchronize(), then the step.
    // Model change: the local step, then the changes reduced and applied on every rank.
    void step(torch::optim::Optimizer& optimizer)
    {
        if (!changes_model()) {
            synchronize();
            optimizer.step();
            return;
        }
        torch::NoGradGuard no_grad;
        for (std::size_t l = 0; l < params_.size(); ++l)
            start_views_[l].copy_(params_[l]);
        optimizer.step();
        for (std::size_t l = 0; l < params_.size(); ++l)
            views_[l].copy_(params_[l]).sub_(start_views_[l]);
        {
            std::lock_guard lock(mutex_);
            for (std::size_t l = params_.size(); l-- > 0;)
                hand_over(l);
        }
        sync_->wait();
        for (std::size_t l = 0; l < params_.size(); ++l)
            params_[l].copy_(start_views_[l]).add_(views_[l]);
        end_iteration();
    }

    // Measures options.measure_iterations iterations again from the next one, then plans.
    // Collective, between iterations; gradient mode only (model changes are not overlapped).
    void replan()
    {
        between_iterations("replan()");
        if (changes_model())
            throw usage_error(prefix() + "replan() measures backward, which a model-change data_parallel does "
                                         "not overlap; use_plan() sets a plan");
        std::fill(measured_.begin(), measured_.end(), 0.0);
        measuring_ = std::max(options_.measure_iterations, 1);
        build(planner::wfbp(profile_of(measured_)));
    }

    // Runs `p` from the next iteration on, measuring no more. Collective, between iterations;
    // the synchronizer checks the plan and that all ranks pass the same one.
    void use_plan(const planner::plan& p)
    {
        between_iterations("use_plan()");
        build(p);
        measuring_ = 0;
    }

    const planner::plan& plan() const noexcept { return sync_->plan(); }
    // The profile the current plan came from (zero times until the first plan).
    const planner::profile& profile() const noexcept { return profile_; }
    std::span<const std::size_t> layer_sizes() const noexcept { return sizes_; }
    const std::vector<std::string>& parameter_names() const noexcept { return names_; }
    // The flat buffer every gradient is a view of, in parameters() order.
    const torch::Tensor& gradients() const noexcept { return flat_; }
    // How many times each parameter's hook fired since construction.
    std::span<const std::uint64_t> hook_calls() const noexcept { return hook_calls_; }
    std::uint64_t iterations() const noexcept { return iterations_; }
    // When each layer (by index) was handed to the synchronizer in the last iteration, the
    // last layer first, and the start and end of each group's allreduce in it (plan order).
    std::span<const clock::time_point> handed_over_at() const noexcept { return handed_over_at_; }
    std::span<const group_times> last_times() const { return sync_->last_times(); }

private:
    bool changes_model() const noexcept { return options_.reduce == reduction_target::model_change; }

    torch::Tensor view_of(const torch::Tensor& flat, std::size_t l) const
    {
        return flat.narrow(0, std::int64_t(offsets_[l]), std::int64_t(sizes_[l])).view(params_[l].sizes());
    }

    void end_iteration()
    {
        std::fill(done_.begin(), done_.end(), 0);
        next_ = params_.size();
        ++iterations_;
    }

    void between_iterations(const char* call) const
    {
        if (std::find(done_.begin(), done_.end(), 1) != done_.end())
            throw usage_error(prefix() + call + " between iterations: backward has run and the iteration has not "
                                                "ended");
    }

    std::string prefix() const { return "gradsync::data_parallel (" + where(*comm_) + "): "; }

    std::string parameter(std::size_t l) const
    {
        return "parameter " + std::to_string(l) + " (" + names_[l] + ")";
    }

    void check_parameters() const
    {
        for (std::size_t l = 0; l < params_.size(); ++l) {
            const torch::Tensor& p = params_[l];
            std::string problem;
            if (p.scalar_type() != torch::CppTypeToScalarType<T>())
                problem = std::string("is of type ") + c10::toString(p.scalar_type()) + ", the data_parallel's is " +
                    c10::toString(torch::CppTypeToScalarType<T>());
            else if (!p.device().is_cpu())
                problem = "is not on the CPU";
            else if (p.is_sparse() || !p.is_contiguous())
                problem = "is not dense and contiguous";
            if (!problem.empty())
                throw usage_error(prefix() + parameter(l) + " " + problem);
        }
    }

    // Every rank's parameter types and shapes, gathered, against rank 0's.
    void agree_on_shapes()
    {
        std::vector<std::size_t> mine{params_.size()};
        for (const torch::Tensor& p : params_) {
            mine.push_back(std::size_t(p.scalar_type()));
            mine.push_back(std::size_t(p.dim()));
            for (std::int64_t d : p.sizes())
                mine.push_back(std::size_t(d));
        }
        const std::size_t length = mine.size();
        const std::vector<std::size_t> ones(std::size_t(comm_->size()), 1);
        std::vector<std::size_t> lengths;
        for (const std::vector<std::size_t>& l : detail::gather_all(*comm_, std::span(&length, 1), ones))
            lengths.push_back(l.front());
        const auto all = detail::gather_all(*comm_, std::span<const std::size_t>(mine), lengths);
        for (int k = 1; k < comm_->size(); ++k)
            if (all[std::size_t(k)] != all[0])
                throw mismatch_error(prefix() + "ranks disagree on the module's parameters: " +
                                     shape_difference(all[0], all[std::size_t(k)], k));
    }

    // "parameter 2 (conv2.weight) has shape [16, 6, 5, 5] on rank 0 and [16, 6, 3, 3] on rank 1"
    std::string shape_difference(const std::vector<std::size_t>& a, const std::vector<std::size_t>& b, int k) const
    {
        const std::string rank = "rank " + std::to_string(k);
        if (a[0] != b[0])
            return "rank 0 has " + std::to_string(a[0]) + " parameters that require a gradient, " + rank + " has " +
                std::to_string(b[0]);
        const auto shape = [](const std::vector<std::size_t>& d, std::size_t& at) {
            const std::string type = c10::toString(c10::ScalarType(d[at]));
            const std::size_t dims = d[at + 1];
            std::string s = type + " [";
            for (std::size_t i = 0; i < dims; ++i)
                s += (i ? ", " : "") + std::to_string(d[at + 2 + i]);
            at += 2 + dims;
            return s + "]";
        };
        std::size_t i = 1, j = 1;
        for (std::size_t l = 0; l < a[0]; ++l) {
            const std::string sa = shape(a, i), sb = shape(b, j);
            if (sa != sb)
                return parameter(l) + " is " + sa + " on rank 0 and " + sb + " on " + rank;
        }
        return "their parameter lists";
    }

    void point_grads_at_views()
    {
        for (std::size_t l = 0; l < params_.size(); ++l) {
            const torch::Tensor& g = params_[l].grad();
            if (!g.defined() || g.data_ptr() != views_[l].data_ptr() || !g.is_same_size(views_[l]))
                params_[l].mutable_grad() = views_[l];
        }
    }

    void install_hooks()
    {
        for (std::size_t l = 0; l < params_.size(); ++l) {
            accumulators_.push_back(torch::autograd::impl::grad_accumulator(params_[l]));
            hook_keys_.push_back(accumulators_.back()->add_post_hook(
                std::make_unique<torch::autograd::utils::LambdaPostHook>(
                    [this, l](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
                        ready(l);
                        return outputs;
                    })));
        }
    }

    // Parameter l's gradient is accumulated (autograd's thread).
    void ready(std::size_t l)
    {
        std::lock_guard lock(mutex_);
        ++hook_calls_[l];
        if (done_[l])
            throw usage_error(prefix() + parameter(l) +
                              ": its gradient was produced twice before synchronize(); one backward per iteration");
        done_[l] = 1;
        torch::Tensor& g = params_[l].mutable_grad();
        if (g.data_ptr() != views_[l].data_ptr()) { // autograd replaced the view: keep the flat buffer
            views_[l].copy_(g);
            g = views_[l];
        }
        while (!changes_model() && next_ > 0 && done_[next_ - 1])
            hand_over(--next_);
    }

    void hand_over(std::size_t l)
    {
        handed_over_at_[l] = clock::now();
        sync_->ready(l, std::span<T>(flat_.data_ptr<T>() + offsets_[l], sizes_[l]));
    }

    planner::profile profile_of(const std::vector<double>& backward) const
    {
        planner::profile p;
        for (std::size_t l = 0; l < params_.size(); ++l)
            p.push_back({names_[l], sizes_[l], backward[l], std::nullopt});
        return p;
    }

    void plan_from_measurements()
    {
        std::vector<double> seconds(measured_);
        for (double& s : seconds)
            s /= double(options_.measure_iterations);
        gradsync::allreduce(*comm_, std::span<double>(seconds), average{});
        profile_ = profile_of(seconds);
        planner::linear_cost cost = options_.cost;
        if (cost.a == 0 && cost.b == 0) {
            const std::size_t total = std::max<std::size_t>(std::size_t(flat_.numel()), 4096);
            const std::vector<std::size_t> counts{256, total / 4, total};
            cost = planner::calibrate<T>(*comm_, counts, 5, Policy{}, algorithm_).cost;
            cost.a = std::max(cost.a, 0.0); // a fit's intercept can dip below zero
            cost.b = std::max(cost.b, 0.0);
        }
        build(options_.plan_with(profile_, cost, sizeof(T)));
    }

    // The old synchronizer stays until the new one is built, so a plan refused on every rank
    // leaves the data_parallel working as before.
    void build(const planner::plan& plan)
    {
        sync_ = std::make_unique<synchronizer<T, Comm, Policy, Algorithm>>(*comm_, sizes_, plan, Policy{}, algorithm_,
                                                                           options_.sync);
    }

    Comm* comm_;
    data_parallel_options options_;
    Algorithm algorithm_;
    std::vector<std::string> names_;
    std::vector<torch::Tensor> params_;
    std::vector<std::size_t> offsets_, sizes_;
    torch::Tensor flat_;
    std::vector<torch::Tensor> views_;
    torch::Tensor start_; // model change: the parameters before the local step
    std::vector<torch::Tensor> start_views_;
    std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_; // kept alive, as DDP does
    std::vector<std::uintptr_t> hook_keys_;
    std::unique_ptr<synchronizer<T, Comm, Policy, Algorithm>> sync_;
    planner::profile profile_;

    std::mutex mutex_; // the hand-over state, shared with autograd's thread
    std::vector<char> done_;
    std::size_t next_ = 0; // layers below next_ are not handed over yet this iteration
    std::vector<std::uint64_t> hook_calls_;
    std::vector<clock::time_point> handed_over_at_;
    std::vector<double> measured_;
    int measuring_ = 0;
    std::uint64_t iterations_ = 0;
};

} // namespace gradsync
