// A multi-layer perceptron in plain fp32 loops: dense layers with ReLU between them and a
// softmax cross-entropy loss on the last one, with a backward pass that hands each
// gradient over as soon as it is written (what wait-free backpropagation overlaps).
//
// Parameters live in one flat buffer in forward order, [W0, b0, W1, b1, ...]: every weight
// matrix and every bias vector is one layer for the planner and the synchronizer (so the
// biases are the tiny layers), and a group of consecutive layers is one contiguous span,
// which the synchronizer reduces in place. The gradient buffer has the same layout.
//
// W_k is stored input-major (inputs x outputs), so the forward pass and the weight
// gradient are saxpy loops over the output width; the input gradient is a dot product per
// element, formed with 8 partial sums so that it vectorizes without -ffast-math. Four
// samples share each pass over a weight row, which keeps the row in registers.
//
// Cost per sample, P = number of weights: forward 2P flops, backward 4P (2P for the first
// layer, whose input gradient is not needed). The loss and gradients are means over the
// batch.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <gradsync/core/error.hpp>

#include "random.hpp"

namespace trainer {

namespace detail {

inline float dot8(const float* a, const float* b, std::size_t n) noexcept
{
    float part[8] = {};
    std::size_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (std::size_t t = 0; t < 8; ++t)
            part[t] += a[j + t] * b[j + t];
    float s = ((part[0] + part[4]) + (part[1] + part[5])) + ((part[2] + part[6]) + (part[3] + part[7]));
    for (; j < n; ++j)
        s += a[j] * b[j];
    return s;
}

} // namespace detail

class mlp {
public:
    // widths: inputs, hidden widths..., classes (at least 2 entries, all positive).
    // Weights are drawn He-uniform from `seed`, biases start at 0.
    mlp(std::vector<std::size_t> widths, std::uint64_t seed) : widths_(std::move(widths))
    {
        if (widths_.size() < 2 || std::find(widths_.begin(), widths_.end(), std::size_t(0)) != widths_.end())
            throw gradsync::usage_error("trainer::mlp: needs at least an input and an output width, all positive");
        offsets_.push_back(0);
        for (std::size_t k = 0; k + 1 < widths_.size(); ++k) {
            sizes_.push_back(widths_[k] * widths_[k + 1]);
            sizes_.push_back(widths_[k + 1]);
        }
        for (std::size_t s : sizes_)
            offsets_.push_back(offsets_.back() + s);
        params_.assign(offsets_.back(), 0.0f);
        random_source rng(seed);
        for (std::size_t k = 0; k + 1 < widths_.size(); ++k) {
            const double bound = std::sqrt(6.0 / double(widths_[k]));
            for (float& w : layer(params_, 2 * k))
                w = float((2 * rng.uniform() - 1) * bound);
        }
    }

    std::size_t dense_layers() const noexcept { return widths_.size() - 1; }
    std::span<const std::size_t> widths() const noexcept { return widths_; }
    // Element counts of the parameter layers in forward order: W0, b0, W1, b1, ...
    std::span<const std::size_t> layer_sizes() const noexcept { return sizes_; }
    std::size_t parameter_count() const noexcept { return params_.size(); }
    std::vector<std::string> layer_names() const
    {
        std::vector<std::string> names;
        for (std::size_t k = 0; k < dense_layers(); ++k) {
            names.push_back("fc" + std::to_string(k + 1) + ".weight");
            names.push_back("fc" + std::to_string(k + 1) + ".bias");
        }
        return names;
    }

    std::span<float> parameters() noexcept { return params_; }
    std::span<const float> parameters() const noexcept { return params_; }

    // The span of parameter layer l inside a buffer laid out like the parameters.
    template <class T>
    std::span<T> layer(std::span<T> buffer, std::size_t l) const noexcept
    {
        return buffer.subspan(offsets_[l], sizes_[l]);
    }
    std::span<float> layer(std::vector<float>& buffer, std::size_t l) const noexcept
    {
        return layer(std::span<float>(buffer), l);
    }

    // Runs the batch (batch x inputs, row-major) forward; keeps the activations for
    // backward() and returns the logits (batch x classes).
    std::span<const float> forward(std::span<const float> inputs, std::size_t batch)
    {
        if (batch == 0 || inputs.size() != batch * widths_.front())
            throw gradsync::usage_error("trainer::mlp::forward: " + std::to_string(inputs.size()) +
                                        " input values do not make a non-empty batch of " +
                                        std::to_string(widths_.front()) + "-wide samples");
        batch_ = batch;
        acts_.resize(widths_.size());
        acts_[0].assign(inputs.begin(), inputs.end());
        for (std::size_t k = 0; k < dense_layers(); ++k) {
            const std::size_t in = widths_[k], out = widths_[k + 1];
            const float* w = &params_[offsets_[2 * k]];
            const float* b = &params_[offsets_[2 * k + 1]];
            std::vector<float>& y = acts_[k + 1];
            y.resize(batch * out);
            for (std::size_t i = 0; i < batch; ++i)
                std::copy_n(b, out, &y[i * out]);
            for_sample_blocks(batch, [&](std::size_t i, std::size_t n) {
                const float* x = &acts_[k][i * in];
                float* yi = &y[i * out];
                for (std::size_t a = 0; a < in; ++a) {
                    const float* wa = w + a * out;
                    for (std::size_t s = 0; s < n; ++s) {
                        const float xs = x[s * in + a];
                        float* ys = yi + s * out;
                        for (std::size_t j = 0; j < out; ++j)
                            ys[j] += xs * wa[j];
                    }
                }
            });
            if (k + 1 < dense_layers())
                for (float& v : y)
                    v = std::max(v, 0.0f);
        }
        return acts_.back();
    }

    // Mean softmax cross-entropy of the last forward() batch against labels, and its
    // gradient written into grad (laid out like the parameters). Calls ready(l, grad of
    // layer l) for l = L-1 down to 0, each as soon as that layer's gradient is complete.
    template <class Ready>
    double backward(std::span<const std::uint32_t> labels, std::span<float> grad, Ready&& ready)
    {
        if (labels.size() != batch_ || grad.size() != params_.size())
            throw gradsync::usage_error("trainer::mlp::backward: " + std::to_string(labels.size()) + " labels and " +
                                        std::to_string(grad.size()) + " gradient values for a batch of " +
                                        std::to_string(batch_) + " and " + std::to_string(params_.size()) +
                                        " parameters");
        const std::size_t classes = widths_.back();
        const float scale = 1.0f / float(batch_);
        // dz: gradient of the loss with respect to the current layer's outputs.
        dz_.assign(acts_.back().begin(), acts_.back().end());
        double loss = 0;
        for (std::size_t i = 0; i < batch_; ++i) {
            float* z = &dz_[i * classes];
            const float top = *std::max_element(z, z + classes);
            double total = 0;
            for (std::size_t c = 0; c < classes; ++c)
                total += std::exp(double(z[c] - top));
            if (labels[i] >= classes)
                throw gradsync::usage_error("trainer::mlp::backward: label " + std::to_string(labels[i]) +
                                            " of sample " + std::to_string(i) + " is not below " +
                                            std::to_string(classes));
            loss += std::log(total) - double(z[labels[i]] - top);
            for (std::size_t c = 0; c < classes; ++c)
                z[c] = float(std::exp(double(z[c] - top)) / total) * scale;
            z[labels[i]] -= scale;
        }
        for (std::size_t k = dense_layers(); k-- > 0;) {
            const std::size_t in = widths_[k], out = widths_[k + 1];
            const std::span<float> gw = layer(grad, 2 * k), gb = layer(grad, 2 * k + 1);
            std::fill(gb.begin(), gb.end(), 0.0f);
            for (std::size_t i = 0; i < batch_; ++i)
                for (std::size_t j = 0; j < out; ++j)
                    gb[j] += dz_[i * out + j];
            ready(2 * k + 1, gb);
            const std::vector<float>& x = acts_[k];
            for (std::size_t a = 0; a < in; ++a) {
                float* g = &gw[a * out];
                std::fill(g, g + out, 0.0f);
                for (std::size_t i = 0; i < batch_; ++i) {
                    const float xa = x[i * in + a];
                    const float* d = &dz_[i * out];
                    for (std::size_t j = 0; j < out; ++j)
                        g[j] += xa * d[j];
                }
            }
            ready(2 * k, gw);
            if (k == 0)
                break;
            // Input gradient, masked by the ReLU that produced x (x > 0 where it passed).
            const float* w = &params_[offsets_[2 * k]];
            dx_.resize(batch_ * in);
            for (std::size_t i = 0; i < batch_; ++i)
                for (std::size_t a = 0; a < in; ++a)
                    dx_[i * in + a] = x[i * in + a] > 0 ? detail::dot8(&dz_[i * out], w + a * out, out) : 0.0f;
            dz_.swap(dx_);
        }
        return loss / double(batch_);
    }

    // Index of the largest logit of sample i of the last forward() batch.
    std::uint32_t predicted(std::size_t i) const noexcept
    {
        const std::size_t classes = widths_.back();
        const float* z = &acts_.back()[i * classes];
        return std::uint32_t(std::max_element(z, z + classes) - z);
    }

private:
    // Calls f(first sample, count) over the batch in blocks of up to 4 samples.
    template <class F>
    static void for_sample_blocks(std::size_t batch, F&& f)
    {
        for (std::size_t i = 0; i < batch; i += 4)
            f(i, std::min<std::size_t>(4, batch - i));
    }

    std::vector<std::size_t> widths_;
    std::vector<std::size_t> sizes_;
    std::vector<std::size_t> offsets_;
    std::vector<float> params_;
    std::size_t batch_ = 0;
    std::vector<std::vector<float>> acts_; // acts_[0] inputs, acts_[k] output of dense layer k-1
    std::vector<float> dz_, dx_;
};

} // namespace trainer
