// Bitwise AND, OR and XOR: elementwise reduction policies for integer elements.
//
// combine(acc, in): acc[i] = acc[i] & in[i] (|, ^; kernels/host_bitwise.hpp), exact and
// independent of the order. finish does nothing. A floating-point element type is refused
// at compile time, as torch.distributed refuses BAND, BOR and BXOR on floating-point tensors.
#pragma once

#include <concepts>
#include <cstdint>
#include <span>

#include <gradsync/core/codes.hpp>
#include <gradsync/core/types.hpp>
#include <gradsync/kernels/host_bitwise.hpp>
#include <gradsync/policy/combine_with.hpp>

namespace gradsync {

namespace detail {

template <class Op>
struct bitwise_policy : combine_with<Op> {
    template <element T>
    static void combine(std::span<T> acc, std::span<const T> in) noexcept
    {
        static_assert(std::integral<T>, "gradsync::bitwise_and, bitwise_or and bitwise_xor reduce integer elements "
                                        "only: the bits of a floating-point value are no number to combine");
        if constexpr (std::integral<T>) // else the assertion alone is reported
            combine_with<Op>::template combine<T>(acc, in);
    }
};

} // namespace detail

struct bitwise_and : detail::bitwise_policy<kernels::and_of> {
    static constexpr std::uint32_t code = codes::bitwise_and;
    static constexpr const char* name = "bitwise_and";
};

struct bitwise_or : detail::bitwise_policy<kernels::or_of> {
    static constexpr std::uint32_t code = codes::bitwise_or;
    static constexpr const char* name = "bitwise_or";
};

struct bitwise_xor : detail::bitwise_policy<kernels::xor_of> {
    static constexpr std::uint32_t code = codes::bitwise_xor;
    static constexpr const char* name = "bitwise_xor";
};

} // namespace gradsync
