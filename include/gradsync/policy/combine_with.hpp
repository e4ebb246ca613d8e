// An elementwise policy made of one kernel op (kernels/host_elementwise.hpp): combine sets
// acc[i] = Op(acc[i], in[i]) and finish does nothing. Sum, Minimum, Maximum, Product and the
// bitwise policies are this with their op, a code and a name.
#pragma once

#include <span>

#include <gradsync/core/types.hpp>
#include <gradsync/kernels/host_elementwise.hpp>

namespace gradsync::detail {

template <class Op>
struct combine_with {
    template <element T>
    static void combine(std::span<T> acc, std::span<const T> in) noexcept
    {
        kernels::combine<Op>(acc, in);
    }

    template <element T>
    static void finish(std::span<T>, int) noexcept
    {
    }
};

} // namespace gradsync::detail
