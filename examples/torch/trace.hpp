// train_fashion_mnist --trace FILE: per step, how alike the ranks' vectors are and what the
// policy makes of them (docs/torch.md, "The study"). Two kinds of vector, in units of a
// gradient: every rank's local gradient, and, when each rank steps with its own momentum,
// its momentum buffer after the step (the model change is -rate times it). The trace combines
// each kind with the data_parallel's policy and algorithm (automatic, message passing), layer
// by layer as the data_parallel does, so the model change's run also shows what the policy
// would have made of the gradients at the same parameters. Rank 0 writes, per step and kind:
//   - the mean cosine over every pair of ranks;
//   - norm ratio |combined| / mean_i |v_i|: for Adasum 1 when the vectors are parallel (it
//     averages them), sqrt(N) when N vectors of one norm are orthogonal (it adds them);
//   - signal gain (combined . m) / |m|^2, m the mean of the v_i: how many times the direction
//     the ranks share is taken (Sum: N, Average: 1).
//
// The vectors are gathered with a gradsync reducer, a sum over N slots of which each rank
// fills its own: an allgather over any communicator, exact since the rest are zeros.
#pragma once

#include <torch/torch.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <span>
#include <vector>

#include <gradsync/collective/allreduce.hpp>
#include <gradsync/policy/sum.hpp>
#include <gradsync/selector/automatic.hpp>

#include "output.hpp"

namespace gradsync_examples {

struct trace_means {
    double cosine = 0, norm_ratio = 0, signal_gain = 0;
};

template <class Comm, class Policy>
class combine_trace {
public:
    static constexpr std::array<const char*, 2> kinds{"gradients", "momentum"};

    // params: the module's parameters in the data_parallel's order. A hook on each copies its
    // gradient into this rank's vector in every backward, before it is accumulated (and so
    // before it is reduced). With momentum, the caller sets the second kind (momentum(l)).
    combine_trace(Comm& comm, const std::vector<torch::Tensor>& params, bool momentum,
                  const std::filesystem::path& file)
        : comm_(&comm), params_(params), file_(file), used_(momentum ? 2 : 1),
          gathered_(torch::zeros({std::int64_t(used_), comm.size(), std::int64_t(numel_of(params))})),
          combined_(torch::empty({std::int64_t(numel_of(params))})),
          gather_(comm, std::size_t(gathered_[0].numel())), combine_(comm, sizes_of(params), gradsync::automatic{.share_memory = false})
    {
        std::int64_t at = 0;
        for (const torch::Tensor& p : params_) {
            offsets_.push_back(at);
            at += p.numel();
        }
        for (std::size_t l = 0; l < params_.size(); ++l)
            hooks_.push_back(params_[l].register_hook([this, l](const torch::Tensor& g) { mine(0, l).copy_(g); }));
        if (comm.rank() == 0) {
            csv_ = open_output(file_);
            csv_ << "step,rate,vector,mean_cosine,norm_ratio,signal_gain\n";
        }
    }

    combine_trace(const combine_trace&) = delete;
    combine_trace& operator=(const combine_trace&) = delete;

    ~combine_trace()
    {
        for (std::size_t l = 0; l < hooks_.size(); ++l)
            params_[l].remove_hook(hooks_[l]);
    }

    // Parameter l's part of this rank's momentum vector.
    torch::Tensor momentum(std::size_t l) { return mine(1, l); }

    // Collective: gathers and combines each kind; rank 0 writes the step's lines.
    void record(std::int64_t step, double rate)
    {
        const std::int64_t n = comm_->size(), r = comm_->rank();
        for (std::size_t k = 0; k < used_; ++k) {
            const torch::Tensor all = gathered_[std::int64_t(k)];
            combined_.copy_(all[r]);
            combine_(span_of(combined_));
            if (r > 0)
                all.narrow(0, 0, r).zero_();
            if (r + 1 < n)
                all.narrow(0, r + 1, n - r - 1).zero_();
            gather_(span_of(all));
            if (r == 0)
                write(step, rate, k, all);
        }
    }

    // Rank 0: the means over the steps recorded since the last call, per kind.
    std::vector<trace_means> means()
    {
        std::vector<trace_means> m(used_);
        for (std::size_t k = 0; k < used_; ++k) {
            const double s = double(steps_);
            m[k] = {sums_[k].cosine / s, sums_[k].norm_ratio / s, sums_[k].signal_gain / s};
            sums_[k] = {};
        }
        steps_ = 0;
        return m;
    }

    void close()
    {
        if (comm_->rank() == 0)
            close_output(csv_, file_);
    }

private:
    static std::vector<std::size_t> sizes_of(const std::vector<torch::Tensor>& params)
    {
        std::vector<std::size_t> sizes;
        for (const torch::Tensor& p : params)
            sizes.push_back(std::size_t(p.numel()));
        return sizes;
    }

    static std::size_t numel_of(const std::vector<torch::Tensor>& params)
    {
        std::size_t count = 0;
        for (std::size_t s : sizes_of(params))
            count += s;
        return count;
    }

    static std::span<float> span_of(const torch::Tensor& t)
    {
        return {t.data_ptr<float>(), std::size_t(t.numel())};
    }

    torch::Tensor mine(std::size_t kind, std::size_t l)
    {
        return gathered_[std::int64_t(kind)][comm_->rank()]
            .narrow(0, offsets_[l], params_[l].numel())
            .view(params_[l].sizes());
    }

    void write(std::int64_t step, double rate, std::size_t kind, const torch::Tensor& all)
    {
        torch::NoGradGuard no_grad;
        const std::int64_t n = all.size(0);
        const torch::Tensor v = all.to(torch::kDouble), gram = v.mm(v.t()), norms = gram.diagonal().sqrt();
        const torch::Tensor mean = v.mean(0), c = combined_.to(torch::kDouble);
        const double cosine = n > 1 ? (gram / norms.outer(norms)).triu(1).sum().item<double>() / double(n * (n - 1) / 2)
                                    : std::numeric_limits<double>::quiet_NaN();
        const double ratio = c.norm().item<double>() / norms.mean().item<double>();
        const double gain = c.dot(mean).item<double>() / mean.dot(mean).item<double>();
        csv_ << step << ',' << rate << ',' << kinds[kind] << ',' << cosine << ',' << ratio << ',' << gain << '\n';
        sums_[kind].cosine += cosine;
        sums_[kind].norm_ratio += ratio;
        sums_[kind].signal_gain += gain;
        if (kind + 1 == used_)
            ++steps_;
    }

    Comm* comm_;
    std::vector<torch::Tensor> params_;
    std::filesystem::path file_;
    std::size_t used_;       // kinds traced: the gradients, and the momentum buffers or not
    torch::Tensor gathered_; // [kinds, ranks, parameters]: this rank's row of each is its vector
    torch::Tensor combined_; // this rank's vector of the kind being recorded, then combined
    gradsync::reducer<float, Comm, gradsync::sum> gather_;
    gradsync::reducer<float, Comm, Policy> combine_;
    std::vector<std::int64_t> offsets_;
    std::vector<unsigned> hooks_;
    std::ofstream csv_;
    std::array<trace_means, 2> sums_{};
    std::int64_t steps_ = 0;
};

} // namespace gradsync_examples
