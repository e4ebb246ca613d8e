// Module buffers (BatchNorm's running statistics) made equal once per iteration, as
// data_parallel_options::buffers says: copied from one rank (buffer_sync::broadcast), or the
// buffers of the element type averaged by one reducer and the others copied
// (buffer_sync::average). The lists, the byte buffer, the reducer and its scratch are made
// once; a call copies the averaged buffers into the scratch and back.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include <gradsync/collective/allreduce.hpp>
#include <gradsync/comm/communicator.hpp>
#include <gradsync/torch/agreement.hpp>
#include <gradsync/torch/element.hpp>
#include <gradsync/torch/options.hpp>
#include <gradsync/torch/state.hpp>

namespace gradsync::torch_binding {

template <class T, communicator Comm>
class buffer_keeper {
public:
    // `buffers` must outlive this. Collective only in its later calls.
    buffer_keeper(Comm& comm, buffer_sync mode, const named_tensors& buffers)
    {
        if (mode == buffer_sync::none)
            return;
        std::size_t averaged = 0;
        for (std::size_t i = 0; i < buffers.tensors.size(); ++i) {
            const at::Tensor& b = buffers.tensors[i];
            const bool mean = mode == buffer_sync::average && b.scalar_type() == scalar_type_of<T>();
            (mean ? averaged_ : copied_).add(buffers.names[i], b);
            averaged += mean ? std::size_t(b.numel()) : 0;
        }
        if (!copied_.tensors.empty())
            copied_state_.emplace(comm, std::vector<const named_tensors*>{&copied_});
        if (!averaged_.tensors.empty()) {
            means_.resize(averaged);
            mean_.emplace(comm, averaged);
        }
    }

    // The lists are pointed at by copied_state_.
    buffer_keeper(const buffer_keeper&) = delete;
    buffer_keeper& operator=(const buffer_keeper&) = delete;

    // Every rank's buffers made equal, those copied taken from `root`. Collective.
    void operator()(int root)
    {
        if (copied_state_)
            copied_state_->copy_from(root);
        if (!mean_)
            return;
        std::size_t at = 0;
        for (const at::Tensor& b : averaged_.tensors) {
            std::copy_n(elements_of<T>(b), b.numel(), means_.begin() + std::ptrdiff_t(at));
            at += std::size_t(b.numel());
        }
        (*mean_)(std::span<T>(means_));
        at = 0;
        for (const at::Tensor& b : averaged_.tensors) {
            std::copy_n(means_.begin() + std::ptrdiff_t(at), b.numel(), elements_of<T>(b));
            at += std::size_t(b.numel());
        }
    }

private:
    named_tensors averaged_{"buffer", "averaged buffers", {}, {}};
    named_tensors copied_{"buffer", "copied buffers", {}, {}};
    std::optional<module_state<Comm>> copied_state_;
    std::optional<reducer<T, Comm, average>> mean_;
    std::vector<T> means_;
};

} // namespace gradsync::torch_binding
