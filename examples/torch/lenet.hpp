// The network of Horovod's PyTorch MNIST example, which the Adasum paper's LeNet-5 study
// trains: two 5x5 convolutions (10 and 20 channels) with 2x2 max pooling, dropout on the
// second, then 320 -> 50 -> 10 fully connected, log-softmax out. Dropout draws from the
// replica's own generator, so that ranks running as threads neither share nor race for
// libtorch's global one and a seed gives the same run twice.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace gradsync_examples {

struct lenet_impl : torch::nn::Module {
    explicit lenet_impl(std::uint64_t dropout_seed)
        : conv1(register_module("conv1", torch::nn::Conv2d(1, 10, 5))),
          conv2(register_module("conv2", torch::nn::Conv2d(10, 20, 5))),
          fc1(register_module("fc1", torch::nn::Linear(320, 50))),
          fc2(register_module("fc2", torch::nn::Linear(50, 10))),
          dropout_(at::detail::createCPUGenerator(dropout_seed))
    {
    }

    torch::Tensor forward(torch::Tensor x)
    {
        x = torch::relu(torch::max_pool2d(conv1->forward(x), 2));
        x = torch::relu(torch::max_pool2d(drop(conv2->forward(x), 0.5, true), 2));
        x = drop(torch::relu(fc1->forward(x.view({-1, 320}))), 0.5, false);
        return torch::log_softmax(fc2->forward(x), 1);
    }

    // Restarts dropout's stream: a program that seeds it from its position (the step, the
    // rank) draws the same masks when it redoes a step or resumes from a checkpoint.
    void seed_dropout(std::uint64_t seed) { dropout_.set_current_seed(seed); }

    torch::nn::Conv2d conv1, conv2;
    torch::nn::Linear fc1, fc2;

private:
    // Inverted dropout in training mode; whole channels for a convolution's output
    // (Dropout2d), single elements otherwise.
    torch::Tensor drop(const torch::Tensor& x, double p, bool channels)
    {
        if (!is_training())
            return x;
        const torch::Tensor shape = channels ? torch::empty({x.size(0), x.size(1), 1, 1}) : torch::empty_like(x);
        const torch::Tensor keep = torch::bernoulli(torch::full_like(shape, 1 - p), dropout_);
        return x * keep / (1 - p);
    }

    at::Generator dropout_;
};
TORCH_MODULE_IMPL(lenet, lenet_impl);

} // namespace gradsync_examples
