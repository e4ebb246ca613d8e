// The model change of reduction_target::model_change (the Adasum paper's Figure 3): the
// parameters x0 kept before the local optimizer steps, the change d = x1 - x0 written into
// the gradient buffer's views, and x = x0 + reduced d applied on every rank. One buffer the
// size of the parameters, made once.
#pragma once

#include <ATen/ATen.h>

#include <cstddef>
#include <vector>

namespace gradsync::torch_binding {

class model_change {
public:
    // `like`: the flat gradient buffer; `view(start, l)`: layer l's view of a flat buffer.
    template <class View>
    model_change(const at::Tensor& like, std::size_t layers, View view) : start_(at::empty_like(like))
    {
        for (std::size_t l = 0; l < layers; ++l)
            views_.push_back(view(start_, l));
    }

    void keep_start(std::size_t l, const at::Tensor& parameter) { views_[l].copy_(parameter); }

    void change_into(std::size_t l, const at::Tensor& change, const at::Tensor& parameter) const
    {
        change.copy_(parameter).sub_(views_[l]);
    }

    void keep_start(const std::vector<at::Tensor>& parameters)
    {
        for (std::size_t l = 0; l < parameters.size(); ++l)
            keep_start(l, parameters[l]);
    }

    void change_into(const std::vector<at::Tensor>& changes, const std::vector<at::Tensor>& parameters) const
    {
        for (std::size_t l = 0; l < parameters.size(); ++l)
            change_into(l, changes[l], parameters[l]);
    }

    void apply(const std::vector<at::Tensor>& changes, const std::vector<at::Tensor>& parameters) const
    {
        for (std::size_t l = 0; l < parameters.size(); ++l)
            parameters[l].copy_(views_[l]).add_(changes[l]);
    }

private:
    at::Tensor start_;
    std::vector<at::Tensor> views_;
};

} // namespace gradsync::torch_binding
