// Host kernels of Minimum and Maximum: acc[i] = min(acc[i], in[i]) or max(acc[i], in[i]), in
// the loop of kernels/host_elementwise.hpp. The result is one of the operands, exact, except
// that
//   - a NaN operand, whatever its sign and payload, gives the default quiet NaN (the bits
//     canonicalize_nan writes, kernels/host.hpp), and
//   - -0 orders below +0: min(-0, +0) = -0, max(-0, +0) = +0.
// So the bits of the result do not depend on the order of the operands, and the combine is
// associative: every algorithm gives the same bits on every rank, however it groups the
// ranks. fp16 and bf16 compare in float, which holds them exactly; fp16 takes F16C lanes.
#pragma once

#include <bit>
#include <concepts>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <gradsync/core/types.hpp>
#include <gradsync/kernels/host_elementwise.hpp>

namespace gradsync::kernels {

namespace detail {

// Operands that compare equal have the same bits but for -0 and +0: a minimum's tie ORs them
// (-0 wins), a maximum's ANDs them (+0 wins).
template <bool Larger>
struct extremum_of {
    template <class T>
    static T one(T a, T b) noexcept
    {
        if constexpr (std::integral<T>) {
            return (Larger ? b > a : b < a) ? b : a;
        } else if constexpr (!std::is_same_v<T, accumulate_t<T>>) { // fp16, bf16
            return T(one(accumulate_t<T>(a), accumulate_t<T>(b)));
        } else {
            using B = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
            const B x = std::bit_cast<B>(a), y = std::bit_cast<B>(b);
            const T tie = std::bit_cast<T>(B(Larger ? x & y : x | y));
            const T r = (Larger ? a > b : a < b) ? a : (Larger ? b > a : b < a) ? b : tie;
            return a != a || b != b ? std::numeric_limits<T>::quiet_NaN() : r;
        }
    }
#if GRADSYNC_HAVE_F16C_DISPATCH
    // min_ps and max_ps return their second operand for a NaN and for two zeros: both are
    // replaced.
    GRADSYNC_F16C static __m256 lanes(__m256 x, __m256 y) noexcept
    {
        const __m256 tie = Larger ? _mm256_and_ps(x, y) : _mm256_or_ps(x, y);
        const __m256 r = _mm256_blendv_ps(Larger ? _mm256_max_ps(x, y) : _mm256_min_ps(x, y), tie,
                                          _mm256_cmp_ps(x, y, _CMP_EQ_OQ));
        return _mm256_blendv_ps(r, _mm256_set1_ps(std::numeric_limits<float>::quiet_NaN()),
                                _mm256_cmp_ps(x, y, _CMP_UNORD_Q));
    }
#endif
};

} // namespace detail

using min_of = detail::extremum_of<false>;
using max_of = detail::extremum_of<true>;

} // namespace gradsync::kernels
