// Host kernels of the bitwise policies: acc[i] = acc[i] & in[i], | or ^, on integers only, in
// the loop of kernels/host_elementwise.hpp. Exact, and independent of the operands' order.
#pragma once

#include <concepts>
#include <functional>

#include <gradsync/kernels/host_elementwise.hpp>

namespace gradsync::kernels {

namespace detail {

template <class F>
struct bits_of {
    template <std::integral T>
    static T one(T a, T b) noexcept
    {
        return T(F()(a, b));
    }
};

} // namespace detail

using and_of = detail::bits_of<std::bit_and<>>;
using or_of = detail::bits_of<std::bit_or<>>;
using xor_of = detail::bits_of<std::bit_xor<>>;

} // namespace gradsync::kernels
