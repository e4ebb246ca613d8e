// What Adasum's kernels know of a step: its parts, and the coefficients of a layer.
//
//   adasum_part            a stretch of one layer: `size` elements of operand a at `a` in
//                          a_in, of b at `b` in b_in, the result written at `out` in out_in
//                          (in: 0 the reduced data, 1 the plan's scratch); out may be a or b
//   adasum_operands<T>     the two bases those offsets count from: data and scratch
//   adasum_coefficients(t) Adasum's [ca, cb] from a layer's triple t (policy/adasum.hpp has
//                          the formula), the same bits on the host and on a GPU
//
// A plan lists a step's parts once, when it is built (the part table), so a step's triples
// and scaled adds run over all its layers in a fixed number of kernels, whatever the layout.
#pragma once

#include <cstddef>
#include <cstdint>

#include <gradsync/kernels/host_adasum.hpp>
#include <gradsync/kernels/host_device.hpp>

namespace gradsync::kernels {

struct adasum_part {
    std::uint64_t layer = 0;
    std::uint64_t a = 0, b = 0, out = 0;
    std::uint64_t size = 0;
    std::uint32_t a_in = 0, b_in = 0, out_in = 0;
};

inline constexpr std::uint32_t in_data = 0;
inline constexpr std::uint32_t in_scratch = 1;

template <class T>
struct adasum_operands {
    T* data = nullptr;
    T* scratch = nullptr;

    GRADSYNC_HD T* base(std::uint32_t in) const { return in == in_scratch ? scratch : data; }
};

struct coefficient_pair {
    double a = 1;
    double b = 1;
};

// A norm below sqrt(DBL_MIN) = 2^-511 leaves its coefficient at 1: dividing by it would
// overflow. 2*aa is exact and no product meets a sum here, so no contraction can change
// the bits.
GRADSYNC_HD inline coefficient_pair adasum_coefficients(const dot_triple& t)
{
    constexpr double guard = 0x1p-511;
    return {t.aa >= guard ? 1 - t.ab / (2 * t.aa) : 1.0, t.bb >= guard ? 1 - t.ab / (2 * t.bb) : 1.0};
}

} // namespace gradsync::kernels
