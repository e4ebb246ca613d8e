// What the backend accepts from torch, checked on the caller's thread so that a call it cannot
// run is refused at once, by name, on the rank that made it: CPU tensors, dense and contiguous,
// of a dtype gradsync reduces (float16, bfloat16, float32, float64, int8, uint8, int32, int64),
// and a ReduceOp defined for that dtype. The keys that name a planned collective
// (collective_cache.hpp) are made here too.
#pragma once

#include <compare>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <gradsync/core/error.hpp>

namespace gradsync::python {

// The reductions the backend runs: torch's ReduceOps, and Adasum, which the DDP hook asks for.
enum class reduction_op { sum, average, minimum, maximum, product, bitwise_and, bitwise_or, bitwise_xor, adasum };

inline const char* name_of(reduction_op op)
{
    static const char* const names[] = {"SUM", "AVG", "MIN", "MAX", "PRODUCT", "BAND", "BOR", "BXOR", "Adasum"};
    return names[int(op)];
}

inline bool floating(at::ScalarType t)
{
    return t == at::kHalf || t == at::kBFloat16 || t == at::kFloat || t == at::kDouble;
}

inline bool integral(at::ScalarType t) { return t == at::kChar || t == at::kByte || t == at::kInt || t == at::kLong; }

// A reduction planned for: its dtype, op and layers; a coalesced call's layers are its tensors,
// gathered into scratch, where one tensor's are reduced in place.
struct reduction_key {
    at::ScalarType dtype;
    reduction_op op;
    std::vector<std::size_t> layers;
    bool coalesced = false;

    auto operator<=>(const reduction_key&) const = default;
};

// A data movement planned for: which collective, the bytes of one rank's block, the root (0
// where there is none), and whether blocks pass through scratch (tensors in a list) or lie in
// one tensor.
enum class movement { broadcast, allgather, gather, scatter, all_to_all };

struct movement_key {
    movement kind;
    std::size_t bytes;
    int root = 0;
    bool staged = false;

    auto operator<=>(const movement_key&) const = default;
};

inline std::string described(const at::Tensor& t)
{
    return std::string("a ") + c10::toString(t.scalar_type()) + " tensor of " + std::to_string(t.numel()) +
        " elements on " + t.device().str();
}

// Each tensor torch passes must be one gradsync can read and write in place.
inline void check_tensor(const std::string& who, const char* call, const at::Tensor& t)
{
    const auto refuse = [&](const std::string& why) {
        throw usage_error(who + ": " + call + ": " + described(t) + ": " + why);
    };
    if (!t.defined())
        throw usage_error(who + ": " + call + ": an undefined tensor");
    if (!t.device().is_cpu())
        refuse("the gradsync backend reduces CPU tensors only (docs/python.md, \"Limits\")");
    if (t.is_sparse() || t.layout() != at::kStrided)
        refuse("only dense (strided) tensors are supported");
    if (!t.is_contiguous())
        refuse("the tensor is not contiguous (call .contiguous() first)");
}

inline const at::Tensor& one_tensor(const std::string& who, const char* call, const std::vector<at::Tensor>& tensors)
{
    if (tensors.size() != 1)
        throw usage_error(who + ": " + call + ": " + std::to_string(tensors.size()) +
                          " tensors given; the gradsync backend takes one CPU tensor per call");
    check_tensor(who, call, tensors[0]);
    return tensors[0];
}

inline void check_root(const std::string& who, const char* call, long long root, int size)
{
    if (root < 0 || root >= size)
        throw usage_error(who + ": " + call + ": root rank " + std::to_string(root) + " is not a rank of the group (0 to " +
                          std::to_string(size - 1) + ")");
}

// torch's list of lists holds one list (one tensor per rank) for CPU tensors.
inline void check_one_list(const std::string& who, const char* call, const std::vector<std::vector<at::Tensor>>& lists)
{
    if (lists.size() != 1)
        throw usage_error(who + ": " + call + ": " + std::to_string(lists.size()) +
                          " lists of tensors given; the gradsync backend takes one");
}

// all: one tensor holding the blocks of the group's `size` ranks, each like `block`.
inline void check_flat(const std::string& who, const char* call, const at::Tensor& all, const at::Tensor& block, int size)
{
    check_tensor(who, call, all);
    check_tensor(who, call, block);
    if (all.scalar_type() != block.scalar_type() || all.numel() != block.numel() * size)
        throw usage_error(who + ": " + call + ": " + described(all) + " must hold " + std::to_string(size) +
                          " blocks like " + described(block));
}

// Message tags below the collectives' bases (core/tags.hpp), so that no send meets a
// collective's message.
inline constexpr int most_tag = 16383;

// A send or receive by `rank` of a group of `size`: one tensor, another rank, a tag in range.
inline void check_message(const std::string& who, const char* call, const std::vector<at::Tensor>& tensors, int peer,
                          int tag, int rank, int size)
{
    one_tensor(who, call, tensors);
    if (peer < 0 || peer >= size || peer == rank)
        throw usage_error(who + ": " + call + ": rank " + std::to_string(peer) + " is not another rank of the group (0 to " +
                          std::to_string(size - 1) + ", not " + std::to_string(rank) + ")");
    if (tag < 0 || tag > most_tag)
        throw usage_error(who + ": " + call + ": tag " + std::to_string(tag) + " is out of range (0 to " +
                          std::to_string(most_tag) + ")");
}

inline reduction_op op_of(const std::string& who, const char* call, const c10d::ReduceOp& op, at::ScalarType dtype)
{
    const auto refuse = [&](const std::string& why) {
        throw usage_error(who + ": " + call + ": " + why);
    };
    reduction_op mine = reduction_op::sum;
    switch (op.op_) {
    case c10d::ReduceOp::SUM: mine = reduction_op::sum; break;
    case c10d::ReduceOp::AVG: mine = reduction_op::average; break;
    case c10d::ReduceOp::MIN: mine = reduction_op::minimum; break;
    case c10d::ReduceOp::MAX: mine = reduction_op::maximum; break;
    case c10d::ReduceOp::PRODUCT: mine = reduction_op::product; break;
    case c10d::ReduceOp::BAND: mine = reduction_op::bitwise_and; break;
    case c10d::ReduceOp::BOR: mine = reduction_op::bitwise_or; break;
    case c10d::ReduceOp::BXOR: mine = reduction_op::bitwise_xor; break;
    default: refuse("ReduceOp " + std::to_string(int(op.op_)) + " (PREMUL_SUM) is not supported by the gradsync backend");
    }
    if (!floating(dtype) && !integral(dtype))
        refuse(std::string("dtype ") + c10::toString(dtype) +
               " is not reduced by the gradsync backend (float16, bfloat16, float32, float64, int8, uint8, int32, int64 are)");
    if (mine == reduction_op::average && !floating(dtype))
        refuse(std::string("ReduceOp.AVG is not defined for ") + c10::toString(dtype) +
               " (an integer mean would be rounded; SUM, MIN, MAX, PRODUCT, BAND, BOR and BXOR are)");
    if ((mine == reduction_op::bitwise_and || mine == reduction_op::bitwise_or || mine == reduction_op::bitwise_xor) &&
        !integral(dtype))
        refuse(std::string("ReduceOp.") + name_of(mine) + " is defined for integer dtypes only, not " +
               c10::toString(dtype));
    return mine;
}

inline reduction_key reduction_of(const std::string& who, const char* call, const at::Tensor& t, const c10d::ReduceOp& op)
{
    return {t.scalar_type(), op_of(who, call, op, t.scalar_type()), {std::size_t(t.numel())}};
}

// A coalesced call: tensors of one dtype reduced as the layers of one buffer.
inline reduction_key coalesced_reduction_of(const std::string& who, const char* call,
                                            const std::vector<at::Tensor>& tensors, const c10d::ReduceOp& op)
{
    if (tensors.empty())
        throw usage_error(who + ": " + call + ": no tensors given");
    reduction_key key{tensors[0].scalar_type(), reduction_op::sum, {}, true};
    for (const at::Tensor& t : tensors) {
        check_tensor(who, call, t);
        if (t.scalar_type() != key.dtype)
            throw usage_error(who + ": " + call + ": tensors of " + c10::toString(key.dtype) + " and " +
                              c10::toString(t.scalar_type()) + " in one call; coalesced tensors share a dtype");
        key.layers.push_back(std::size_t(t.numel()));
    }
    key.op = op_of(who, call, op, key.dtype);
    return key;
}

inline std::size_t bytes_of(const at::Tensor& t) { return std::size_t(t.numel()) * t.element_size(); }

// A list of tensors each like `like` (dtype and element count), as torch passes one per rank;
// `expected` of them.
inline void check_like(const std::string& who, const char* call, const std::vector<at::Tensor>& list,
                       const at::Tensor& like, std::size_t expected)
{
    if (list.size() != expected)
        throw usage_error(who + ": " + call + ": " + std::to_string(list.size()) + " tensors in the list, the group has " +
                          std::to_string(expected) + " ranks");
    for (const at::Tensor& t : list) {
        check_tensor(who, call, t);
        if (t.scalar_type() != like.scalar_type() || t.numel() != like.numel())
            throw usage_error(who + ": " + call + ": " + described(t) + " in a list of " + described(like) +
                              "s; every tensor of the call must have the same dtype and size");
    }
}

inline std::span<std::byte> bytes(const at::Tensor& t)
{
    return {static_cast<std::byte*>(t.data_ptr()), bytes_of(t)};
}

} // namespace gradsync::python
