// collective_cache: the backend's collectives, planned once per shape and kept. A key's first
// call builds gradsync's collective (its plan, scratch and agreement check: a collective step
// every rank takes at the same call, since every rank makes the same calls); later calls run
// it. Each kind keeps its `most` recently used shapes; beyond them the least recently used is
// dropped, on every rank alike, because every rank sees the same sequence of keys.
//
// Before building, a rank calls the notice, a reducer of one float built with the group: where
// the ranks' calls differ so that one builds while another runs a collective it built before,
// the two are calls of two built collectives, which gradsync names on both sides (the
// position board on one host, the messages' stamps across hosts), instead of an agreement
// check waiting for a peer that is in a call.
//
// Reductions run gradsync's reducer<T, gloo_communicator, Policy> with the automatic
// algorithm: shared memory among the ranks of one host, messages across hosts, there with the
// settings docs/gloo.md gives for Gloo's TCP transport (1 MiB segments, a window of 64,
// recursive doubling up to 256 KiB), so that receives are announced ahead of the data. A
// coalesced call's tensors are the layers of one buffer, copied in and out of scratch planned
// with it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <functional>
#include <iterator>
#include <list>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include <gradsync/collective/all_to_all.hpp>
#include <gradsync/collective/allgather.hpp>
#include <gradsync/collective/allreduce.hpp>
#include <gradsync/collective/broadcast.hpp>
#include <gradsync/collective/gather.hpp>
#include <gradsync/collective/scatter.hpp>
#include <gradsync/comm/gloo/gloo.hpp>
#include <gradsync/policy/adasum.hpp>
#include <gradsync/policy/bitwise.hpp>
#include <gradsync/policy/extrema.hpp>
#include <gradsync/policy/product.hpp>
#include <gradsync/policy/sum.hpp>

#include "tensors.hpp"

namespace gradsync::python {

class planned_reduction {
public:
    virtual ~planned_reduction() = default;
    // Reduces tensors (the key's layers, in order) in place.
    virtual void run(const std::vector<at::Tensor>& tensors) = 0;
    // Reduces the inputs (the key's layers) in scratch and copies layer `block` into output:
    // reduce_scatter, whose inputs stay as they were.
    virtual void run_into(const std::vector<at::Tensor>& inputs, const at::Tensor& output, std::size_t block) = 0;
};

template <class T, class Policy>
class typed_reduction final : public planned_reduction {
public:
    typed_reduction(gloo_communicator& comm, const reduction_key& key)
        : reduce_(comm, key.layers, automatic{.small_bytes = std::size_t(256) << 10},
                  {.pipeline = {.segment_bytes = std::size_t(1) << 20, .window = 64}}),
          staging_(key.coalesced ? reduce_.count() : 0)
    {
    }

    void run(const std::vector<at::Tensor>& tensors) override
    {
        if (tensors.size() == 1)
            return reduce_(std::span<T>(static_cast<T*>(tensors[0].data_ptr()), reduce_.count()));
        stage(tensors);
        const T* from = staging_.data();
        for (const at::Tensor& t : tensors) {
            std::copy_n(from, t.numel(), static_cast<T*>(t.data_ptr()));
            from += t.numel();
        }
    }

    void run_into(const std::vector<at::Tensor>& inputs, const at::Tensor& output, std::size_t block) override
    {
        stage(inputs);
        const std::size_t n = std::size_t(output.numel());
        std::copy_n(staging_.data() + block * n, n, static_cast<T*>(output.data_ptr()));
    }

private:
    // The tensors copied into scratch, one after the other, and reduced there.
    void stage(const std::vector<at::Tensor>& tensors)
    {
        T* at = staging_.data();
        for (const at::Tensor& t : tensors)
            at = std::copy_n(static_cast<const T*>(t.data_ptr()), t.numel(), at);
        reduce_(std::span<T>(staging_));
    }

    reducer<T, gloo_communicator, Policy> reduce_;
    std::vector<T> staging_;
};

// A data movement and, for calls whose blocks are tensors of a list, the scratch of every
// rank's block (N blocks: allgather, all_to_all, the root's gather and scatter).
class planned_movement {
public:
    template <class Collective>
    planned_movement(std::unique_ptr<Collective> collective, std::size_t staging_bytes)
        : run_([c = std::shared_ptr<Collective>(std::move(collective))](std::span<std::byte> data) { (*c)(data); }),
          staging_(staging_bytes)
    {
    }

    // Moves data in place (one tensor's bytes, or the scratch).
    void operator()(std::span<std::byte> data) { run_(data); }
    std::span<std::byte> staging() noexcept { return staging_; }

    // Each tensor's bytes into its block of the scratch (block i at i*b), or out of it.
    void stage(const std::vector<at::Tensor>& blocks)
    {
        std::byte* at = staging_.data();
        for (const at::Tensor& t : blocks)
            at = std::copy_n(static_cast<const std::byte*>(t.data_ptr()), bytes_of(t), at);
    }
    void unstage(const std::vector<at::Tensor>& blocks) const
    {
        const std::byte* from = staging_.data();
        for (const at::Tensor& t : blocks) {
            std::copy_n(from, bytes_of(t), static_cast<std::byte*>(t.data_ptr()));
            from += bytes_of(t);
        }
    }

private:
    std::function<void(std::span<std::byte>)> run_;
    std::vector<std::byte> staging_;
};

namespace detail {

template <class T>
inline constexpr bool floating_element = !std::is_integral_v<T>;

// The reduction of (T, op); op is one tensors.hpp accepted for T's dtype.
template <class T>
std::unique_ptr<planned_reduction> typed(gloo_communicator& comm, const reduction_key& key)
{
    const auto make = [&]<class Policy>(Policy) -> std::unique_ptr<planned_reduction> {
        return std::make_unique<typed_reduction<T, Policy>>(comm, key);
    };
    switch (key.op) {
    case reduction_op::sum: return make(sum{});
    case reduction_op::minimum: return make(minimum{});
    case reduction_op::maximum: return make(maximum{});
    case reduction_op::product: return make(product{});
    default: break;
    }
    if constexpr (floating_element<T>) {
        if (key.op == reduction_op::average)
            return make(average{});
        if (key.op == reduction_op::adasum)
            return make(adasum{});
    } else {
        if (key.op == reduction_op::bitwise_and)
            return make(bitwise_and{});
        if (key.op == reduction_op::bitwise_or)
            return make(bitwise_or{});
        if (key.op == reduction_op::bitwise_xor)
            return make(bitwise_xor{});
    }
    throw usage_error(std::string("gradsync backend: ") + name_of(key.op) + " is not defined for " +
                      c10::toString(key.dtype));
}

inline std::unique_ptr<planned_reduction> reduction_for(gloo_communicator& comm, const reduction_key& key)
{
    switch (key.dtype) {
    case at::kHalf: return typed<half>(comm, key);
    case at::kBFloat16: return typed<bfloat16>(comm, key);
    case at::kFloat: return typed<float>(comm, key);
    case at::kDouble: return typed<double>(comm, key);
    case at::kChar: return typed<std::int8_t>(comm, key);
    case at::kByte: return typed<std::uint8_t>(comm, key);
    case at::kInt: return typed<std::int32_t>(comm, key);
    case at::kLong: return typed<std::int64_t>(comm, key);
    default: throw usage_error(std::string("gradsync backend: no reduction for ") + c10::toString(key.dtype));
    }
}

// The `most` recently used values by key, the least recently used dropped first.
template <class Key, class Value>
class recent {
public:
    explicit recent(std::size_t most) : most_(most) {}

    template <class Make>
    Value& find_or(const Key& key, Make make)
    {
        if (auto it = index_.find(key); it != index_.end()) {
            order_.splice(order_.begin(), order_, it->second);
            return it->second->second;
        }
        Value made = make();
        if (order_.size() == most_) {
            index_.erase(order_.back().first);
            order_.pop_back();
        }
        order_.emplace_front(key, std::move(made));
        index_.emplace(key, order_.begin());
        return order_.front().second;
    }

private:
    using entry = std::pair<Key, Value>;
    std::size_t most_;
    std::list<entry> order_; // most recent first
    std::map<Key, typename std::list<entry>::iterator> index_;
};

} // namespace detail

class collective_cache {
public:
    static constexpr std::size_t most = 64;

    explicit collective_cache(gloo_communicator& comm)
        : comm_(&comm), notice_(comm, std::size_t(1)), barrier_(comm, std::size_t(1))
    {
    }

    planned_reduction& reduction(const reduction_key& key)
    {
        return *reductions_.find_or(key, [&] {
            notify();
            return detail::reduction_for(*comm_, key);
        });
    }

    planned_movement& movement(const movement_key& key)
    {
        return *movements_.find_or(key, [&] {
            notify();
            return std::make_unique<planned_movement>(made(key));
        });
    }

    // One float summed: returns once every rank has called.
    void barrier()
    {
        float one = 1;
        barrier_(std::span<float>(&one, 1));
    }

    // The notice's identity, which names it in errors (core/tags.hpp).
    std::uint64_t notice_identity() const noexcept { return notice_.identity(); }

private:
    planned_movement made(const movement_key& key)
    {
        const std::size_t n = std::size_t(comm_->size()), all = key.staged ? n * key.bytes : 0;
        const bool root = comm_->rank() == key.root;
        switch (key.kind) {
        case python::movement::broadcast:
            return {std::make_unique<broadcaster<std::byte, gloo_communicator>>(*comm_, key.bytes, key.root), 0};
        case python::movement::allgather:
            return {std::make_unique<allgatherer<gloo_communicator>>(*comm_, key.bytes), all};
        case python::movement::gather:
            return {std::make_unique<gatherer<gloo_communicator>>(*comm_, key.bytes, key.root), root ? all : 0};
        case python::movement::scatter:
            return {std::make_unique<scatterer<gloo_communicator>>(*comm_, key.bytes, key.root), root ? all : 0};
        case python::movement::all_to_all:
            return {std::make_unique<exchanger<gloo_communicator>>(*comm_, key.bytes), all};
        }
        throw usage_error("gradsync backend: no such data movement");
    }

    void notify()
    {
        float one = 1;
        notice_(std::span<float>(&one, 1));
    }

    gloo_communicator* comm_;
    reducer<float, gloo_communicator> notice_, barrier_;
    detail::recent<reduction_key, std::unique_ptr<planned_reduction>> reductions_{most};
    detail::recent<movement_key, std::unique_ptr<planned_movement>> movements_{most};
};

} // namespace gradsync::python
