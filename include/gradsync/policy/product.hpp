// Product: an elementwise reduction policy, for every element type.
//
// combine(acc, in): acc[i] = round(acc[i] * in[i]), computed in the accumulate type and
// rounded once per combine step, as Sum adds (kernels/host_product.hpp); integers wrap modulo
// 2^bits, so they are exact in any order. IEEE multiplication is commutative, NaN payloads
// aside (which recursive_doubling makes canonical), so every rank ends with the same bits.
// finish does nothing.
#pragma once

#include <cstdint>

#include <gradsync/core/codes.hpp>
#include <gradsync/kernels/host_product.hpp>
#include <gradsync/policy/combine_with.hpp>

namespace gradsync {

struct product : detail::combine_with<kernels::product_of> {
    static constexpr std::uint32_t code = codes::product;
    static constexpr const char* name = "product";
};

} // namespace gradsync
