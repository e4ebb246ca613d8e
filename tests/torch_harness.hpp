// What the libtorch tests share: LeNet-5, inputs made from one seed, replicas with equal
// parameters, flat copies of tensors, and the reference reduction of each rank's gradients
// group by group with a plain reducer. libtorch first: it brings glog, whose CHECK macro
// Catch's must replace, not the other way.
#pragma once

#include <gradsync/torch.hpp>

#include <gradsync/gradsync.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace gradsync_test {

using gradsync::local_communicator;
using gradsync::local_group;

// LeNet-5 for 28x28 images, as in Horovod's PyTorch MNIST example's shape.
struct lenet_impl : torch::nn::Module {
    explicit lenet_impl(int fc1_out = 120)
        : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 6, 5).padding(2)))),
          conv2(register_module("conv2", torch::nn::Conv2d(6, 16, 5))),
          fc1(register_module("fc1", torch::nn::Linear(16 * 5 * 5, fc1_out))),
          fc2(register_module("fc2", torch::nn::Linear(fc1_out, 84))),
          fc3(register_module("fc3", torch::nn::Linear(84, 10)))
    {
    }

    torch::Tensor forward(torch::Tensor x)
    {
        x = torch::max_pool2d(torch::relu(conv1->forward(x)), 2);
        x = torch::max_pool2d(torch::relu(conv2->forward(x)), 2);
        x = torch::relu(fc1->forward(x.flatten(1)));
        x = torch::relu(fc2->forward(x));
        return torch::log_softmax(fc3->forward(x), 1);
    }

    torch::nn::Conv2d conv1, conv2;
    torch::nn::Linear fc1, fc2, fc3;
};
TORCH_MODULE_IMPL(lenet, lenet_impl);

struct batch {
    torch::Tensor x, y;
};

// Inputs per [step][rank], made on the main thread from one seed.
inline std::vector<std::vector<batch>> batches(int steps, int n)
{
    torch::manual_seed(7);
    std::vector<std::vector<batch>> b(static_cast<std::size_t>(steps));
    for (auto& step : b)
        for (int r = 0; r < n; ++r)
            step.push_back({torch::randn({4, 1, 28, 28}), torch::randint(0, 10, {4})});
    return b;
}

// n replicas with equal parameters.
inline std::vector<lenet> replicas(int n)
{
    torch::manual_seed(1);
    std::vector<lenet> m{lenet()};
    for (int r = 1; r < n; ++r) {
        lenet copy;
        torch::NoGradGuard no_grad;
        for (std::size_t i = 0; i < copy->parameters().size(); ++i)
            copy->parameters()[i].copy_(m[0]->parameters()[i]);
        m.push_back(copy);
    }
    return m;
}

inline std::vector<float> flat_of(const std::vector<torch::Tensor>& tensors)
{
    std::vector<float> v;
    for (const torch::Tensor& t : tensors) {
        const torch::Tensor c = t.contiguous();
        v.insert(v.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
    }
    return v;
}

inline std::vector<float> gradients_of(lenet& m)
{
    std::vector<torch::Tensor> g;
    for (const torch::Tensor& p : m->parameters())
        g.push_back(p.grad());
    return flat_of(g);
}

inline void backward(lenet& m, const batch& b) { torch::nll_loss(m->forward(b.x), b.y).backward(); }

// Each rank's gradients reduced group by group, as the synchronizer does with the plan.
template <class Policy, class E = float>
std::vector<std::vector<E>> reduce_by_group(std::vector<std::vector<E>> local, const std::vector<std::size_t>& sizes,
                                            const gradsync::planner::merge_plan& plan)
{
    const int n = int(local.size());
    std::vector<std::size_t> offset{0};
    for (std::size_t s : sizes)
        offset.push_back(offset.back() + s);
    local_group group(n);
    group.run([&](local_communicator& comm) {
        std::vector<E>& mine = local[std::size_t(comm.rank())];
        for (const std::vector<std::size_t>& g : plan) {
            const std::span<const std::size_t> layers = std::span(sizes).subspan(g.front(), g.size());
            gradsync::reducer<E, local_communicator, Policy> r(comm, layers);
            r(std::span<E>(mine).subspan(offset[g.front()], offset[g.back() + 1] - offset[g.front()]));
        }
    });
    return local;
}

// One group per layer, in backward order: the plan while measuring, and with measure_iterations = 0.
inline gradsync::planner::merge_plan per_layer_plan(std::size_t layers)
{
    gradsync::planner::merge_plan p;
    for (std::size_t l = layers; l-- > 0;)
        p.push_back({l});
    return p;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b)
{
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// One intra-op thread: each rank is a thread, and torch's pool would otherwise be shared and
// reorder nothing but the time.
struct one_thread {
    one_thread() { torch::set_num_threads(1); }
};
inline const one_thread single_intra_op_thread;

} // namespace gradsync_test
