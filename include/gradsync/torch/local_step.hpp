// One parameter's local optimizer step, for the model change overlapped with backward: the
// optimizer's groups are narrowed to that parameter for one step() and restored, as Horovod's
// Adasum optimizer does per parameter. The narrowed lists are made once and swapped in and out,
// so a step allocates nothing of ours. Right for optimizers whose step treats each parameter on
// its own (SGD with momentum, Adam, AdamW, Adagrad, RMSprop): one parameter's step then has the
// bits it has in a step of all of them. Not for LBFGS, whose step couples the parameters.
#pragma once

#include <torch/optim/optimizer.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include <gradsync/core/error.hpp>
#include <gradsync/torch/agreement.hpp>

namespace gradsync::torch_binding {

class parameter_steps {
public:
    parameter_steps(torch::optim::Optimizer& optimizer, const named_tensors& params, const std::string& prefix)
        : optimizer_(&optimizer), emptied_(optimizer.param_groups().size())
    {
        const std::vector<torch::optim::OptimizerParamGroup>& groups = optimizer.param_groups();
        for (std::size_t l = 0; l < params.tensors.size(); ++l) {
            std::size_t g = 0;
            const auto holds = [&](const at::Tensor& t) { return t.is_same(params.tensors[l]); };
            while (g < groups.size() && std::none_of(groups[g].params().begin(), groups[g].params().end(), holds))
                ++g;
            if (g == groups.size())
                throw usage_error(prefix + params.name(l) + " is in none of the optimizer's parameter groups");
            group_.push_back(g);
            single_.push_back({params.tensors[l]});
        }
    }

    const torch::optim::Optimizer* optimizer() const noexcept { return optimizer_; }

    // optimizer.step() for parameter l alone.
    void step(std::size_t l)
    {
        swap(l);
        try {
            optimizer_->step();
        } catch (...) {
            swap(l);
            throw;
        }
        swap(l);
    }

private:
    void swap(std::size_t l)
    {
        std::vector<torch::optim::OptimizerParamGroup>& groups = optimizer_->param_groups();
        for (std::size_t g = 0; g < groups.size(); ++g)
            groups[g].params().swap(g == group_[l] ? single_[l] : emptied_[g]);
    }

    torch::optim::Optimizer* optimizer_;
    std::vector<std::size_t> group_;               // the group of each parameter
    std::vector<std::vector<at::Tensor>> single_;  // each parameter alone (a group's list while it steps)
    std::vector<std::vector<at::Tensor>> emptied_; // the other groups' lists while one parameter steps
};

} // namespace gradsync::torch_binding
