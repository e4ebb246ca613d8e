// Host kernel of Product: acc[i] = acc[i] * in[i], in the loop of
// kernels/host_elementwise.hpp, computed in the accumulate type and rounded once to the
// element type per combine, as Sum adds (fp16 in float, where the product of two fp16 values
// is exact, so that one rounding is a correct one); integers multiply modulo 2^bits. fp16
// takes F16C lanes.
#pragma once

#include <functional>

#include <gradsync/kernels/host_elementwise.hpp>

namespace gradsync::kernels {

struct product_of {
    template <class T>
    static T one(T a, T b) noexcept
    {
        return detail::arithmetic(a, b, std::multiplies<>());
    }
#if GRADSYNC_HAVE_F16C_DISPATCH
    GRADSYNC_F16C static __m256 lanes(__m256 x, __m256 y) noexcept { return _mm256_mul_ps(x, y); }
#endif
};

} // namespace gradsync::kernels
