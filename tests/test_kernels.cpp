// Host kernels add and scale, and the combines of Minimum, Maximum, Product and the bitwise
// policies, checked elementwise against a plain loop in the accumulate type with one rounding
// per element (Minimum and Maximum: against reference.hpp's, bit for bit, NaNs and signed
// zeros included; integers: in 64-bit unsigned arithmetic, wrapping). fp16 lengths 0..70 and
// 10007 cover the 8-lane F16C body, the scalar tail and their seam; an offset of one element
// makes every vector load unaligned, and guard elements after the span catch writes past its
// end.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include <gradsync/kernels/host.hpp>
#include <gradsync/kernels/host_bitwise.hpp>
#include <gradsync/kernels/host_extrema.hpp>
#include <gradsync/kernels/host_product.hpp>

#include "reference.hpp"

namespace {

using gradsync::half;

std::vector<std::size_t> lengths()
{
    std::vector<std::size_t> n;
    for (std::size_t i = 0; i <= 70; ++i)
        n.push_back(i);
    n.push_back(10007);
    return n;
}

// Values worth adding: for fp16 and bf16 every finite bit pattern is fair game (subnormals,
// values whose sum overflows to Inf), plus some Inf and NaN; for fp32/fp64 a spread of
// magnitudes; for integers every bit pattern.
template <class T>
T value(std::uint64_t seed, std::size_t i)
{
    const std::uint64_t k = ref::key(seed, 0, i);
    if constexpr (std::is_integral_v<T>) {
        return T(k);
    } else if constexpr (std::is_same_v<T, half>) {
        std::uint16_t b = std::uint16_t(k);
        if ((k >> 16) % 64 == 0)
            b = (k >> 22) % 2 ? 0x7c00u : 0x7e00u; // Inf or NaN, now and then
        else if ((b & 0x7c00u) == 0x7c00u)
            b &= 0xbfffu; // keep the rest finite
        return std::bit_cast<half>(b);
    } else if constexpr (std::is_same_v<T, gradsync::bfloat16>) {
        std::uint16_t b = std::uint16_t(k);
        if ((k >> 16) % 64 == 0)
            b = (k >> 22) % 2 ? 0x7f80u : 0x7fc0u;
        else if ((b & 0x7f80u) == 0x7f80u)
            b &= 0xbfffu;
        return std::bit_cast<gradsync::bfloat16>(b);
    } else {
        const double mant = double(k >> 11) * 0x1.0p-53 * 2 - 1;
        const int exp = int((k >> 3) % 41) - 20;
        return T(std::ldexp(mant, exp));
    }
}

// The values of value(), and now and then a signed zero, a NaN of either sign with any
// payload, or an infinity: the operands where Minimum and Maximum must choose by rule.
template <class T>
T special(std::uint64_t seed, std::size_t i)
{
    using I = ref::ieee<T>;
    const std::uint64_t k = ref::key(seed, 1, i), sign = (k & 1) ? I::sign : 0;
    switch ((k >> 1) % 6) {
    case 0: return ref::from_bits<T>(sign); // +0 or -0
    case 1: return ref::from_bits<T>(sign | I::exponent | std::max<std::uint64_t>(1, (k >> 8) & I::fraction));
    case 2: return ref::from_bits<T>(sign | I::exponent);
    default: return value<T>(seed, i);
    }
}

// Same bits, or both NaN (NaN payloads are the implementation's choice).
template <class T>
bool same(T got, T want)
{
    if constexpr (!std::is_integral_v<T>)
        if (std::isnan(double(want)))
            return std::isnan(double(got));
    return ref::same_bits(&got, &want, sizeof(T));
}

constexpr std::size_t guard = 9;

// kernels::combine<Op> on operands from make(seed, i) against want_of(a, b), element by
// element; NaNs compared by their bits where exact_nan, else as NaNs.
template <class T, class Op, class Make, class Want>
std::string check_combine(std::size_t n, std::size_t offset, std::uint64_t seed, Make make, Want want_of,
                          bool exact_nan)
{
    std::vector<T> acc(offset + n + guard), in(offset + n + guard);
    for (std::size_t i = 0; i < acc.size(); ++i) {
        acc[i] = make(seed, i);
        in[i] = make(seed + 1, i);
    }
    std::vector<T> want = acc;
    for (std::size_t i = offset; i < offset + n; ++i)
        want[i] = want_of(acc[i], in[i]);
    gradsync::kernels::combine<Op>(std::span<T>(acc.data() + offset, n), std::span<const T>(in.data() + offset, n));
    for (std::size_t i = 0; i < acc.size(); ++i)
        if (exact_nan ? !ref::same_bits(&acc[i], &want[i], sizeof(T)) : !same(acc[i], want[i]))
            return "n " + std::to_string(n) + " offset " + std::to_string(offset) + " element " + std::to_string(i) +
                ": got " + ref::show(acc[i]) + ", want " + ref::show(want[i]);
    return "";
}

template <class T>
T smaller_of(T a, T b)
{
    return ref::extremum(a, b, true);
}

template <class T>
T larger_of(T a, T b)
{
    return ref::extremum(a, b, false);
}

// check_combine over every length and offset, two seeds each; the first failure or "".
template <class T, class Op, class Make, class Want>
std::string check_lengths(std::uint64_t seed, Make make, Want want_of, bool exact_nan)
{
    std::string first;
    for (std::size_t n : lengths())
        for (std::size_t offset : {0, 1})
            for (std::uint64_t s : {seed, seed + 1})
                if (first.empty())
                    first = check_combine<T, Op>(n, offset, s * 1000 + n, make, want_of, exact_nan);
    return first;
}

template <class T>
std::string check_scale(std::size_t n, std::size_t offset, ref::acc_t<T> factor, std::uint64_t seed)
{
    using A = ref::acc_t<T>;
    std::vector<T> x(offset + n + guard);
    for (std::size_t i = 0; i < x.size(); ++i)
        x[i] = value<T>(seed, i);
    std::vector<T> want = x;
    for (std::size_t i = offset; i < offset + n; ++i)
        want[i] = ref::narrow<T>(A(x[i]) * factor);
    gradsync::kernels::scale(std::span<T>(x.data() + offset, n), factor);
    for (std::size_t i = 0; i < x.size(); ++i)
        if (!same(x[i], want[i]))
            return "n " + std::to_string(n) + " offset " + std::to_string(offset) + " factor " +
                std::to_string(double(factor)) + " element " + std::to_string(i) + ": got " + ref::show(x[i]) +
                ", want " + ref::show(want[i]);
    return "";
}

} // namespace

TEMPLATE_TEST_CASE("kernels::add rounds once per element in the accumulate type", "[kernels]", half, gradsync::bfloat16,
                   float, double)
{
    using A = ref::acc_t<TestType>;
    const auto sum = [](TestType a, TestType b) { return ref::narrow<TestType>(A(a) + A(b)); };
    CHECK(check_lengths<TestType, gradsync::kernels::sum_of>(11, value<TestType>, sum, false) == "");
}

TEMPLATE_TEST_CASE("kernels::scale rounds once per element in the accumulate type", "[kernels]", half, gradsync::bfloat16,
                   float, double)
{
    using A = ref::acc_t<TestType>;
    std::string first;
    // 1/3 and 1/7 are the Average factors that round; 65536 overflows fp16 to Inf.
    for (A factor : {A(0.5), A(1) / A(3), A(1) / A(7), A(-2.5), A(0), A(65536)})
        for (std::size_t n : lengths())
            for (std::size_t offset : {0, 1})
                if (first.empty())
                    first = check_scale<TestType>(n, offset, factor, 77 + n);
    CHECK(first == "");
}

TEMPLATE_TEST_CASE("kernels::combine of min_of and max_of: an operand, the default NaN, -0 below +0",
                   "[kernels]", half, gradsync::bfloat16, float, double)
{
    using T = TestType;
    namespace k = gradsync::kernels;
    CHECK(check_lengths<T, k::min_of>(21, special<T>, smaller_of<T>, true) == "");
    CHECK(check_lengths<T, k::max_of>(23, special<T>, larger_of<T>, true) == "");
}

TEMPLATE_TEST_CASE("kernels::combine of product_of rounds once per element in the accumulate type", "[kernels]", half,
                   gradsync::bfloat16, float, double)
{
    using A = ref::acc_t<TestType>;
    const auto product = [](TestType a, TestType b) { return ref::narrow<TestType>(A(a) * A(b)); };
    CHECK(check_lengths<TestType, gradsync::kernels::product_of>(31, value<TestType>, product, false) == "");
}

// In 64-bit unsigned arithmetic, which wraps as the element type does modulo its 2^bits.
TEMPLATE_TEST_CASE("integer kernels wrap modulo 2^bits: sums, products, extrema and bitwise combines", "[kernels]",
                   std::int8_t, std::uint8_t, std::int32_t, std::int64_t)
{
    using T = TestType;
    using U = std::uint64_t;
    namespace k = gradsync::kernels;
    CHECK(check_lengths<T, k::sum_of>(41, value<T>, [](T a, T b) { return T(U(a) + U(b)); }, true) == "");
    CHECK(check_lengths<T, k::product_of>(42, value<T>, [](T a, T b) { return T(U(a) * U(b)); }, true) == "");
    CHECK(check_lengths<T, k::min_of>(43, value<T>, smaller_of<T>, true) == "");
    CHECK(check_lengths<T, k::max_of>(44, value<T>, larger_of<T>, true) == "");
    CHECK(check_lengths<T, k::and_of>(45, value<T>, [](T a, T b) { return T(U(a) & U(b)); }, true) == "");
    CHECK(check_lengths<T, k::or_of>(46, value<T>, [](T a, T b) { return T(U(a) | U(b)); }, true) == "");
    CHECK(check_lengths<T, k::xor_of>(47, value<T>, [](T a, T b) { return T(U(a) ^ U(b)); }, true) == "");
    std::vector<T> x{std::numeric_limits<T>::min(), T(0), std::numeric_limits<T>::max()};
    const std::vector<T> before = x;
    gradsync::kernels::canonicalize_nan(std::span<T>(x));
    CHECK(x == before); // integers have no NaN
}
