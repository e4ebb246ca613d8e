// Adasum (Maleki et al., "Scaling Distributed Training with Adaptive Summation", 2020):
// the adaptive combiner of two gradients a and b of one layer,
//
//   d = a.b, na = a.a, nb = b.b                      (all in double)
//   ca = 1 - d/(2 na)  if na >= sqrt(DBL_MIN), else 1
//   cb = 1 - d/(2 nb)  if nb >= sqrt(DBL_MIN), else 1
//   A(a, b) = ca a + cb b                            (formed in double, rounded once)
//
// so A(x, 0) = x, A(0, 0) = 0, A(v, v) = v, and A(x, y) = x + y when x is orthogonal to y.
// It is applied per layer of a fused buffer. Unlike Sum it is not elementwise: the
// algorithms need the layer layout and a dot-product triple per layer, so every algorithm
// has an Adasum plan of its own (the table, selector/plan_table.hpp, chooses it).
#pragma once

#include <cstdint>
#include <span>
#include <type_traits>

#include <gradsync/core/codes.hpp>
#include <gradsync/core/types.hpp>
#include <gradsync/kernels/adasum_part.hpp>
#include <gradsync/kernels/host_adasum.hpp>

namespace gradsync {

struct adasum {
    static constexpr std::uint32_t code = codes::adasum;
    static constexpr const char* name = "adasum";

    using coefficients = kernels::coefficient_pair;

    static coefficients from(const kernels::dot_triple& t) noexcept { return kernels::adasum_coefficients(t); }

    // out = A(a, b) for one whole layer held locally; out may be a or b.
    template <element T>
    static void combine_layer(std::span<T> out, std::span<const T> a, std::span<const T> b) noexcept
    {
        const coefficients c = from(kernels::triple(a, b));
        kernels::scaled_add(out, c.a, a, c.b, b);
    }
};

template <class P>
inline constexpr bool is_adasum = std::is_same_v<P, adasum>;

} // namespace gradsync
