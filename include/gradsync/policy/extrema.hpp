// Minimum and Maximum: elementwise reduction policies, for every element type.
//
// combine(acc, in): acc[i] = min(acc[i], in[i]) (max), exact; a NaN operand gives the default
// quiet NaN and -0 orders below +0 (kernels/host_extrema.hpp), so the combine is commutative
// and associative on bits and every algorithm gives the same bits on every rank.
// finish does nothing.
#pragma once

#include <cstdint>

#include <gradsync/core/codes.hpp>
#include <gradsync/kernels/host_extrema.hpp>
#include <gradsync/policy/combine_with.hpp>

namespace gradsync {

struct minimum : detail::combine_with<kernels::min_of> {
    static constexpr std::uint32_t code = codes::minimum;
    static constexpr const char* name = "minimum";
};

struct maximum : detail::combine_with<kernels::max_of> {
    static constexpr std::uint32_t code = codes::maximum;
    static constexpr const char* name = "maximum";
};

} // namespace gradsync
