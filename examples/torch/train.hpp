// One rank's training run: momentum SGD under the warm-up and decay schedule, the policy
// combining the gradients or each rank's own step through data_parallel, and its outcome.
#pragma once

#include <torch/torch.h>

#include <gradsync/core/error.hpp>
#include <gradsync/policy/adasum.hpp>
#include <gradsync/policy/sum.hpp>
#include <gradsync/torch.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "dataset.hpp"
#include "lenet.hpp"
#include "options.hpp"
#include "trace.hpp"

namespace fashion_mnist {

using gradsync_examples::lenet;

inline double accuracy(lenet& model, const images& test)
{
    torch::NoGradGuard no_grad;
    model->eval();
    std::int64_t right = 0;
    for (std::int64_t at = 0; at < test.x.size(0); at += 1000) {
        const std::int64_t n = std::min<std::int64_t>(1000, test.x.size(0) - at);
        right += model->forward(test.x.narrow(0, at, n)).argmax(1).eq(test.y.narrow(0, at, n)).sum().item<std::int64_t>();
    }
    model->train();
    return double(right) / double(test.x.size(0));
}

// Zero to peak over the first `warmup` share of the steps, then back to zero at the last.
inline double rate_at(const options& o, std::int64_t step, std::int64_t steps)
{
    const double t = double(step) / double(steps), w = std::max(o.warmup, 1e-9);
    return o.lr * (t < w ? t / w : std::max(0.0, (1 - t) / (1 - w)));
}

struct outcome {
    double test_accuracy = 0;
    double train_loss = 0;          // rank 0's mean over the last epoch
    double seconds = 0;
    std::uint64_t parameters = 0;   // FNV-1a of the final parameters' bytes: equal runs, equal bits
};

inline std::uint64_t fingerprint(lenet& model)
{
    std::uint64_t h = 14695981039346656037ull;
    for (const torch::Tensor& p : model->parameters()) {
        const torch::Tensor c = p.detach().contiguous();
        const auto* bytes = static_cast<const unsigned char*>(c.data_ptr());
        for (std::size_t i = 0; i < std::size_t(c.nbytes()); ++i)
            h = (h ^ bytes[i]) * 1099511628211ull;
    }
    return h;
}

// The momentum buffer that libtorch's SGD keeps for p, from its first step on.
inline torch::Tensor& momentum_buffer(torch::optim::SGD& sgd, const torch::Tensor& p)
{
    auto& state = sgd.state().at(c10::guts::to_string(p.unsafeGetTensorImpl()));
    return static_cast<torch::optim::SGDParamState&>(*state).momentum_buffer();
}

template <class Policy, class Comm>
outcome train(Comm& comm, lenet& model, const images& train_set, const images& test, const options& o, bool printing)
{
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    const std::int64_t n = comm.size(), r = comm.rank();
    const std::int64_t per_step = o.batch * n, steps_per_epoch = train_set.x.size(0) / per_step;
    if (steps_per_epoch == 0)
        throw gradsync::usage_error("train_fashion_mnist: " + std::to_string(train_set.x.size(0)) +
                                    " images are fewer than one step of " + std::to_string(per_step));
    const std::int64_t steps = steps_per_epoch * o.epochs;
    torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0).momentum(o.momentum));
    const bool model_change = o.reduce == "model_change";
    gradsync::data_parallel_options dp_options;
    if (model_change)
        dp_options.reduce = gradsync::reduction_target::model_change;
    dp_options.compress = o.compress == "fp16"   ? gradsync::compression::fp16
                          : o.compress == "bf16" ? gradsync::compression::bf16
                                                 : gradsync::compression::none;
    // Message passing: Adasum in the paper's tree (recursive halving here), where shared
    // memory would run the ring's chains.
    gradsync::data_parallel<float, Comm, Policy> dp(comm, *model, dp_options, gradsync::automatic{.share_memory = false});
    // The trace follows the momentum buffers too when each rank steps with its own.
    const std::vector<torch::Tensor> params = model->parameters();
    const bool buffers = model_change && o.momentum > 0;
    std::optional<gradsync_examples::combine_trace<Comm, Policy>> trace;
    if (!o.trace.empty())
        trace.emplace(comm, params, buffers, o.trace);
    outcome out;
    for (int e = 0; e < o.epochs; ++e) {
        torch::Generator shuffle = at::detail::createCPUGenerator(o.seed * 1000 + std::uint64_t(e));
        const torch::Tensor order = torch::randperm(train_set.x.size(0), shuffle);
        double loss_sum = 0;
        for (std::int64_t s = 0; s < steps_per_epoch; ++s) {
            const torch::Tensor picked = order.narrow(0, s * per_step + r * o.batch, o.batch);
            const double rate = rate_at(o, e * steps_per_epoch + s, steps);
            for (auto& group : sgd.param_groups())
                static_cast<torch::optim::SGDOptions&>(group.options()).lr(rate);
            dp.zero_grad();
            const torch::Tensor loss = torch::nll_loss(model->forward(train_set.x.index_select(0, picked)),
                                                       train_set.y.index_select(0, picked));
            loss.backward();
            dp.step(sgd);
            loss_sum += loss.item<double>();
            if (trace) {
                if (buffers)
                    for (std::size_t l = 0; l < params.size(); ++l)
                        trace->momentum(l).copy_(momentum_buffer(sgd, params[l]));
                trace->record(e * steps_per_epoch + s, rate);
            }
            // The diagnostic: every rank's momentum as if its step had made the combined change.
            if (o.momentum_buffer == "combined")
                for (const torch::Tensor& p : params) {
                    torch::Tensor& buffer = momentum_buffer(sgd, p);
                    if (rate > 0)
                        buffer.copy_(p.grad()).div_(-rate);
                    else
                        buffer.zero_();
                }
        }
        if (printing) {
            out.test_accuracy = accuracy(model, test);
            out.seconds = std::chrono::duration<double>(clock::now() - start).count();
            out.train_loss = loss_sum / double(steps_per_epoch);
            std::printf("epoch %d/%d: %lld ranks, %s, train loss %.4f (rank 0), test accuracy %.2f%%, %.1f s", e + 1,
                        o.epochs, static_cast<long long>(n), o.policy.c_str(), loss_sum / double(steps_per_epoch),
                        100 * out.test_accuracy, out.seconds);
            if (trace) {
                const std::vector<gradsync_examples::trace_means> means = trace->means();
                for (std::size_t k = 0; k < means.size(); ++k)
                    std::printf("; %s: mean cosine %.3f, norm ratio %.3f, signal gain %.2f", trace->kinds[k],
                                means[k].cosine, means[k].norm_ratio, means[k].signal_gain);
            }
            std::printf("\n");
            std::fflush(stdout);
        }
    }
    if (trace)
        trace->close();
    out.parameters = fingerprint(model);
    return out;
}

template <class Comm>
outcome train_with(Comm& comm, lenet& model, const images& train_set, const images& test, const options& o,
                   bool printing)
{
    if (o.policy == "sum")
        return train<gradsync::sum>(comm, model, train_set, test, o, printing);
    if (o.policy == "adasum")
        return train<gradsync::adasum>(comm, model, train_set, test, o, printing);
    return train<gradsync::average>(comm, model, train_set, test, o, printing);
}

// Every replica starts from the parameters of the one built from the seed.
inline lenet replica(const options& o, std::uint64_t rank)
{
    torch::manual_seed(o.seed);
    lenet model(o.seed * 7919 + rank);
    return model;
}

} // namespace fashion_mnist
