// A post hook on each parameter's gradient accumulator, calling back with the parameter's
// index once autograd has accumulated its gradient (autograd's thread). The accumulators are
// kept alive, as DDP does, so the hooks stay while the parameters' gradients are produced;
// the destructor removes them.
#pragma once

#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace gradsync::torch_binding {

class gradient_hooks {
public:
    gradient_hooks() = default;
    gradient_hooks(const gradient_hooks&) = delete;
    gradient_hooks& operator=(const gradient_hooks&) = delete;

    ~gradient_hooks()
    {
        for (std::size_t l = 0; l < accumulators_.size(); ++l)
            accumulators_[l]->del_post_hook(keys_[l]);
    }

    void install(const std::vector<at::Tensor>& parameters, std::function<void(std::size_t)> ready)
    {
        ready_ = std::move(ready);
        for (std::size_t l = 0; l < parameters.size(); ++l) {
            accumulators_.push_back(torch::autograd::impl::grad_accumulator(parameters[l]));
            keys_.push_back(accumulators_.back()->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
                [this, l](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
                    ready_(l);
                    return outputs;
                })));
        }
    }

private:
    std::function<void(std::size_t)> ready_;
    std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
    std::vector<std::uintptr_t> keys_;
};

} // namespace gradsync::torch_binding
