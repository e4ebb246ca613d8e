// What the Thrust kernels are checked against, shared by the CPU test (test_thrust_kernels)
// and the GPU test (test_device_kernels.cu): inputs, bit comparisons, and the triple in the
// order kernels/thrust.hpp documents, written out plainly.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <gradsync/kernels/host_adasum.hpp>

#include "../reference.hpp"

namespace kernel_reference {

using gradsync::kernels::dot_triple;

// Finite values of many magnitudes, and, when asked, Inf and NaN now and then.
template <class T>
T value(std::uint64_t seed, std::size_t i, bool specials)
{
    const std::uint64_t k = ref::key(seed, 0, i);
    if (specials && (k >> 40) % 97 == 0)
        return T((k >> 50) % 2 ? INFINITY : NAN);
    const double mant = double(k >> 11) * 0x1.0p-53 * 2 - 1;
    const int spread = sizeof(T) == 2 ? 12 : 40;
    return T(std::ldexp(mant, int((k >> 3) % std::uint64_t(spread)) - spread / 2));
}

template <class T>
std::vector<T> values(std::uint64_t seed, std::size_t n, bool specials)
{
    std::vector<T> v(n);
    for (std::size_t i = 0; i < n; ++i)
        v[i] = value<T>(seed, i, specials);
    return v;
}

// Index of the first element that differs (same bits, or both NaN), or -1.
template <class T>
long first_difference(const std::vector<T>& got, const std::vector<T>& want)
{
    for (std::size_t i = 0; i < want.size(); ++i) {
        const bool nan = std::isnan(double(want[i]));
        if (nan ? !std::isnan(double(got[i])) : ref::bits(got[i]) != ref::bits(want[i]))
            return long(i);
    }
    return -1;
}

constexpr std::size_t guard = 5;
const double guard_value = 12345;

// The triple in the documented order, written out plainly.
template <class T>
dot_triple triple_in_documented_order(const std::vector<T>& a, const std::vector<T>& b)
{
    const std::size_t n = a.size();
    std::size_t lanes = n <= 256 ? 1 : (n + 255) / 256;
    std::vector<dot_triple> level(lanes);
    for (std::size_t j = 0; j < lanes; ++j)
        for (std::size_t i = j; i < n; i += lanes) {
            const double x = double(a[i]), y = double(b[i]);
            level[j].ab = std::fma(x, y, level[j].ab);
            level[j].aa = std::fma(x, x, level[j].aa);
            level[j].bb = std::fma(y, y, level[j].bb);
        }
    while (level.size() > 1) {
        const std::size_t below = level.size();
        lanes = below <= 64 ? 1 : (below + 63) / 64;
        std::vector<dot_triple> next(lanes);
        for (std::size_t j = 0; j < lanes; ++j)
            for (std::size_t i = j; i < below; i += lanes) {
                next[j].ab = next[j].ab + level[i].ab;
                next[j].aa = next[j].aa + level[i].aa;
                next[j].bb = next[j].bb + level[i].bb;
            }
        level = next;
    }
    return level[0];
}

// "" when the host kernel's triple of a and b is within 1e-13 of `want` (relative to the
// sum of |a_i b_i| for a.b, to the host's value for a.a and b.b): the host kernel adds in
// another order, so only closeness is asked of it.
template <class T>
std::string close_to_host(const dot_triple& want, const std::vector<T>& a, const std::vector<T>& b)
{
    const dot_triple host = gradsync::kernels::triple<T>(std::span<const T>(a), std::span<const T>(b));
    double mag = 0;
    for (std::size_t i = 0; i < a.size(); ++i)
        mag += std::fabs(double(a[i]) * double(b[i]));
    std::string bad;
    if (!(std::fabs(want.ab - host.ab) <= 1e-13 * mag))
        bad += " a.b " + std::to_string(want.ab) + " against the host's " + std::to_string(host.ab);
    if (!(std::fabs(want.aa - host.aa) <= 1e-13 * host.aa))
        bad += " a.a " + std::to_string(want.aa) + " against the host's " + std::to_string(host.aa);
    if (!(std::fabs(want.bb - host.bb) <= 1e-13 * host.bb))
        bad += " b.b " + std::to_string(want.bb) + " against the host's " + std::to_string(host.bb);
    return bad;
}

inline bool same_bits(const dot_triple& x, const dot_triple& y)
{
    auto same = [](double p, double q) { return std::bit_cast<std::uint64_t>(p) == std::bit_cast<std::uint64_t>(q); };
    return same(x.ab, y.ab) && same(x.aa, y.aa) && same(x.bb, y.bb);
}

} // namespace kernel_reference
