// The ranks' modules agree: every rank describes its tensors (types and shapes), the
// descriptions are gathered, and ranks that differ get a mismatch_error on every rank naming
// the first tensor that differs. Checked at construction, before any hook is installed or
// any data moves.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <gradsync/collective/verify.hpp>
#include <gradsync/comm/communicator.hpp>
#include <gradsync/core/error.hpp>
#include <gradsync/torch/options.hpp>

namespace gradsync::torch_binding {

// The tensors of one kind (parameters that require a gradient, buffers) by name, in module order.
struct named_tensors {
    const char* kind;    // "parameter", "buffer"
    const char* counted; // "parameters that require a gradient", "buffers"
    std::vector<std::string> names;
    std::vector<at::Tensor> tensors;

    void add(std::string name, at::Tensor tensor)
    {
        names.push_back(std::move(name));
        tensors.push_back(std::move(tensor));
    }

    std::string name(std::size_t i) const { return std::string(kind) + " " + std::to_string(i) + " (" + names[i] + ")"; }
};

// A tensor data_parallel can view in place: dense, contiguous, on the CPU. Empty if it is.
inline std::string layout_problem(const at::Tensor& t)
{
    if (!t.device().is_cpu())
        return "is not on the CPU";
    if (t.is_sparse() || !t.is_contiguous())
        return "is not dense and contiguous";
    return {};
}

namespace detail {

inline std::vector<std::size_t> describe(const named_tensors& list)
{
    std::vector<std::size_t> d{list.tensors.size()};
    for (const at::Tensor& t : list.tensors) {
        d.push_back(std::size_t(t.scalar_type()));
        d.push_back(std::size_t(t.dim()));
        for (std::int64_t s : t.sizes())
            d.push_back(std::size_t(s));
    }
    return d;
}

// "parameter 2 (conv2.weight) is Float [16, 6, 5, 5] on rank 0 and Float [16, 6, 3, 3] on rank 1"
inline std::string difference(const named_tensors& list, const std::vector<std::size_t>& a,
                              const std::vector<std::size_t>& b, int k)
{
    const std::string rank = "rank " + std::to_string(k);
    if (a[0] != b[0])
        return "rank 0 has " + std::to_string(a[0]) + " " + list.counted + ", " + rank + " has " + std::to_string(b[0]);
    const auto shape = [](const std::vector<std::size_t>& d, std::size_t& at) {
        const std::size_t dims = d[at + 1];
        std::string s = std::string(c10::toString(c10::ScalarType(d[at]))) + " [";
        for (std::size_t i = 0; i < dims; ++i)
            s += (i ? ", " : "") + std::to_string(d[at + 2 + i]);
        at += 2 + dims;
        return s + "]";
    };
    std::size_t i = 1, j = 1;
    for (std::size_t l = 0; l < a[0]; ++l) {
        const std::string sa = shape(a, i), sb = shape(b, j);
        if (sa != sb)
            return list.name(l) + " is " + sa + " on rank 0 and " + sb + " on " + rank;
    }
    return "their " + std::string(list.kind) + " lists";
}

} // namespace detail

// Every rank's types and shapes of `list`, gathered and compared with rank 0's. Collective.
template <communicator Comm>
void agree_on(Comm& comm, const named_tensors& list, const std::string& prefix)
{
    const std::vector<std::size_t> mine = detail::describe(list);
    const std::size_t length = mine.size();
    const std::vector<std::size_t> ones(std::size_t(comm.size()), 1);
    std::vector<std::size_t> lengths;
    for (const std::vector<std::size_t>& l : gradsync::detail::gather_all(comm, std::span(&length, 1), ones))
        lengths.push_back(l.front());
    const auto all = gradsync::detail::gather_all(comm, std::span<const std::size_t>(mine), lengths);
    for (int k = 1; k < comm.size(); ++k)
        if (all[std::size_t(k)] != all[0])
            throw mismatch_error(prefix + "ranks disagree on the module's " + list.kind +
                                 "s: " + detail::difference(list, all[0], all[std::size_t(k)], k));
}

// Every rank's options that decide which collectives run, and whether its algorithm shares
// memory, against rank 0's. Collective.
template <communicator Comm>
void agree_on(Comm& comm, const data_parallel_options& options, bool shares_memory, const std::string& prefix)
{
    const std::vector<std::size_t> mine{std::size_t(options.reduce),      std::size_t(options.broadcast_start),
                                        std::size_t(options.buffers),     std::size_t(options.accumulate),
                                        std::size_t(options.local_steps), std::size_t(options.uneven_inputs),
                                        std::size_t(options.check_every), std::size_t(options.compress),
                                        std::size_t(shares_memory)};
    static constexpr const char* names[] = {
        "data_parallel_options::reduce",      "data_parallel_options::broadcast_start",
        "data_parallel_options::buffers",     "data_parallel_options::accumulate",
        "data_parallel_options::local_steps", "data_parallel_options::uneven_inputs",
        "data_parallel_options::check_every", "data_parallel_options::compress",
        "whether the algorithm shares memory (share_memory)"};
    const std::vector<std::size_t> lengths(std::size_t(comm.size()), mine.size());
    const auto all = gradsync::detail::gather_all(comm, std::span<const std::size_t>(mine), lengths);
    for (int k = 1; k < comm.size(); ++k)
        for (std::size_t i = 0; i < mine.size(); ++i)
            if (all[std::size_t(k)][i] != all[0][i])
                throw mismatch_error(prefix + "ranks disagree on " + names[i] + ": " + std::to_string(all[0][i]) +
                                     " on rank 0, " + std::to_string(all[std::size_t(k)][i]) + " on rank " +
                                     std::to_string(k));
}

} // namespace gradsync::torch_binding
