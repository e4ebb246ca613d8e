// Where data_parallel's gradients live. Every parameter's gradient is a view of one flat tensor,
// so autograd accumulates straight into the buffer the reducers work on and nothing is copied
// in or out (DDP's gradient_as_bucket_view). Under data_parallel_options::compress the reducers
// work on a 16-bit copy instead: each layer rounded to fp16 or bf16 as it is handed over (to
// nearest, ties to even: core/types.hpp), widened back exactly once the iteration's reduction
// has ended; half the bytes of fp32 on the wire, a quarter of fp64's. Where the algorithm reads
// a shared_buffer in place, the buffer the reducers work on (the flat tensor or the copy) is
// this rank's slot of one, so ranks of one host reduce it where it lies. All of it is made
// once, at construction.
#pragma once

#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include <gradsync/comm/communicator.hpp>
#include <gradsync/comm/shared/buffer.hpp>
#include <gradsync/core/types.hpp>
#include <gradsync/torch/element.hpp>
#include <gradsync/torch/options.hpp>

namespace gradsync::torch_binding {

template <class T>
class gradient_memory {
public:
    // One layer per parameter, in order. Collective where `in_shared_buffer`: the shared_buffer
    // is made through comm, with the same byte count on every rank.
    template <communicator Comm>
    gradient_memory(Comm& comm, const std::vector<at::Tensor>& parameters, compression compress, bool in_shared_buffer)
    {
        std::size_t total = 0;
        for (const at::Tensor& p : parameters) {
            offsets_.push_back(total);
            sizes_.push_back(std::size_t(p.numel()));
            shapes_.push_back(p.sizes().vec());
            total += sizes_.back();
        }
        const at::TensorOptions type = at::TensorOptions().dtype(scalar_type_of<T>());
        const bool compressed = compress != compression::none;
        if (in_shared_buffer)
            shared_ = std::make_shared<shared_buffer>(comm, total * (compressed ? sizeof(half) : sizeof(T)));
        if (shared_ && !compressed)
            flat_ = at::from_blob(
                shared_->slot(shared_->rank()), {std::int64_t(total)}, [keep = shared_](void*) {}, type);
        else
            flat_ = at::zeros({std::int64_t(total)}, type);
        if (compressed && shared_)
            compressed_ = shared_->slot(shared_->rank());
        else if (compressed) {
            own_.resize(total * 2);
            compressed_ = own_.data();
        }
        for (std::size_t l = 0; l < sizes_.size(); ++l)
            views_.push_back(view_of(flat_, l));
    }

    gradient_memory(const gradient_memory&) = delete;
    gradient_memory& operator=(const gradient_memory&) = delete;

    // The flat tensor every gradient is a view of; it keeps the shared_buffer it lies in alive.
    const at::Tensor& flat() const noexcept { return flat_; }
    const std::vector<std::size_t>& sizes() const noexcept { return sizes_; }
    // Each layer's gradient, shaped as its parameter: what the parameters' grads are.
    const std::vector<at::Tensor>& views() const noexcept { return views_; }
    // Layer l of a tensor laid out as flat(), shaped as its parameter.
    at::Tensor view_of(const at::Tensor& flat, std::size_t l) const
    {
        return flat.narrow(0, std::int64_t(offsets_[l]), std::int64_t(sizes_[l])).view(shapes_[l]);
    }

    // The shared_buffer the reducers' buffer lies in; null where none was made.
    const shared_buffer* buffer() const noexcept { return shared_.get(); }
    // Whether the reducers' buffer lies in memory the ranks share (ranks of one host).
    bool shared() const noexcept { return shared_ && shared_->shared(); }

    void zero() const { flat_.zero_(); }

    // Points every parameter's grad at its view where something replaced it.
    void point_at_views(const std::vector<at::Tensor>& parameters) const
    {
        for (std::size_t l = 0; l < parameters.size(); ++l) {
            const at::Tensor& g = parameters[l].grad();
            if (!g.defined() || g.data_ptr() != views_[l].data_ptr() || !g.is_same_size(views_[l]))
                parameters[l].mutable_grad() = views_[l];
        }
    }

    // Layer l's gradient, just accumulated: where autograd replaced the view with a tensor of
    // its own, that tensor is copied into the flat tensor and `grad` points at the view again.
    void take_back(std::size_t l, at::Tensor& grad) const
    {
        if (grad.data_ptr() != views_[l].data_ptr()) {
            views_[l].copy_(grad);
            grad = views_[l];
        }
    }

    // Layer l's elements in the flat tensor.
    std::span<T> layer(std::size_t l) const noexcept { return {elements_of<T>(flat_) + offsets_[l], sizes_[l]}; }

    // Layer l rounded to W into the compressed copy, as W's span there.
    template <class W>
    std::span<W> narrow(std::size_t l)
    {
        const std::span<const T> from = layer(l);
        W* to = compressed<W>() + offsets_[l];
        for (std::size_t i = 0; i < from.size(); ++i)
            to[i] = W(accumulate_t<T>(from[i]));
        return {to, from.size()};
    }

    // The compressed copy, every layer, widened into the flat tensor.
    template <class W>
    void widen()
    {
        const std::span<T> to(elements_of<T>(flat_), std::size_t(flat_.numel()));
        const W* from = compressed<W>();
        for (std::size_t i = 0; i < to.size(); ++i)
            to[i] = T(float(from[i]));
    }

private:
    static_assert(sizeof(half) == 2 && sizeof(bfloat16) == 2);

    template <class W>
    W* compressed() noexcept
    {
        return reinterpret_cast<W*>(compressed_);
    }

    std::vector<std::size_t> offsets_, sizes_;
    std::vector<std::vector<std::int64_t>> shapes_;
    std::shared_ptr<shared_buffer> shared_;
    at::Tensor flat_;
    std::vector<at::Tensor> views_;
    std::vector<std::byte> own_;      // the compressed copy, where not in shared_
    std::byte* compressed_ = nullptr; // null where not compressed
};

} // namespace gradsync::torch_binding
