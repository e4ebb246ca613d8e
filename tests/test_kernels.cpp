// Host kernels add and scale, checked elementwise against a plain loop in the accumulate type
// with one rounding per element. fp16 lengths 0..70 and 10007 cover the 8-lane F16C body, the
// scalar tail and their seam; an offset of one element makes every vector load unaligned, and
// guard elements after the span catch writes past its end.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <gradsync/kernels/host.hpp>

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
// magnitudes.
template <class T>
T value(std::uint64_t seed, std::size_t i)
{
    const std::uint64_t k = ref::key(seed, 0, i);
    if constexpr (std::is_same_v<T, half>) {
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

template <class T>
auto bits(T x)
{
    using U = std::conditional_t<sizeof(T) == 2, std::uint16_t, std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>;
    return std::bit_cast<U>(x);
}

// Same bits, or both NaN (NaN payloads are the implementation's choice).
template <class T>
bool same(T got, T want)
{
    if (std::isnan(double(want)))
        return std::isnan(double(got));
    return bits(got) == bits(want);
}

constexpr std::size_t guard = 9;

template <class T>
std::string check_add(std::size_t n, std::size_t offset, std::uint64_t seed)
{
    using A = ref::acc_t<T>;
    std::vector<T> acc(offset + n + guard), in(offset + n + guard);
    for (std::size_t i = 0; i < acc.size(); ++i) {
        acc[i] = value<T>(seed, i);
        in[i] = value<T>(seed + 1, i);
    }
    std::vector<T> want = acc;
    for (std::size_t i = offset; i < offset + n; ++i)
        want[i] = ref::narrow<T>(A(acc[i]) + A(in[i]));
    gradsync::kernels::add(std::span<T>(acc.data() + offset, n), std::span<const T>(in.data() + offset, n));
    for (std::size_t i = 0; i < acc.size(); ++i)
        if (!same(acc[i], want[i]))
            return "n " + std::to_string(n) + " offset " + std::to_string(offset) + " element " + std::to_string(i) +
                ": got " + ref::show(acc[i]) + ", want " + ref::show(want[i]);
    return "";
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
    std::string first;
    for (std::size_t n : lengths())
        for (std::size_t offset : {0, 1})
            for (std::uint64_t seed : {11u, 12u})
                if (first.empty())
                    first = check_add<TestType>(n, offset, seed * 1000 + n);
    CHECK(first == "");
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
