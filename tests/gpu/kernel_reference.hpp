// What the Thrust kernels are checked against, shared by the CPU test (test_thrust_kernels)
// and the GPU test (test_device_kernels.cu): inputs, bit comparisons, and the triple in the
// order kernels/thrust_adasum.hpp documents, written out plainly.
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

// The exact triple, to far below the bounds below: each product is split exactly into two
// doubles (p + e, by fma) and every sum is compensated (Neumaier). Also the sums of the
// terms' magnitudes, which bound the rounding error of any summation order.
struct exact_triple {
    dot_triple value;
    dot_triple magnitude;
};

template <class T>
exact_triple exact_triple_of(const std::vector<T>& a, const std::vector<T>& b)
{
    struct compensated {
        double sum = 0, carry = 0;
        void add(double x)
        {
            const double t = sum + x;
            carry += std::fabs(sum) >= std::fabs(x) ? (sum - t) + x : (x - t) + sum;
            sum = t;
        }
        void add_product(double x, double y)
        {
            const double p = x * y;
            add(p);
            add(std::fma(x, y, -p));
        }
    };
    compensated ab, aa, bb;
    exact_triple r;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const double x = double(a[i]), y = double(b[i]);
        ab.add_product(x, y);
        aa.add_product(x, x);
        bb.add_product(y, y);
        r.magnitude.ab += std::fabs(x * y);
        r.magnitude.aa += x * x;
        r.magnitude.bb += y * y;
    }
    r.value = {ab.sum + ab.carry, aa.sum + aa.carry, bb.sum + bb.carry};
    return r;
}

// Higham's bound: a sum in which no term goes through more than k roundings is within
// higham_gamma(k) * sum |t_i| of the exact sum, higham_gamma(k) = k u / (1 - k u), u = 2^-53.
inline double higham_gamma(double k)
{
    const double ku = k * 0x1.0p-53;
    return ku / (1 - ku);
}

// Roundings a term goes through in the documented order: at most 256 in its level-1 lane,
// then at most 64 per level above.
inline double documented_order_depth(std::size_t n)
{
    std::size_t lanes = n <= 256 ? 1 : (n + 255) / 256;
    double depth = 256;
    while (lanes > 1) {
        lanes = lanes <= 64 ? 1 : (lanes + 63) / 64;
        depth += 64;
    }
    return depth;
}

// "" when `got` is within higham_gamma(depth) * sum |t_i| of the exact triple, per
// component; else what is off, and by how much.
inline std::string within_bound(const char* what, const dot_triple& got, const exact_triple& exact, double depth)
{
    std::string bad;
    auto check = [&](const char* name, double g, double e, double mag) {
        if (!(std::fabs(g - e) <= higham_gamma(depth) * mag))
            bad += std::string(" ") + what + " " + name + " " + std::to_string(g) + " against " + std::to_string(e) +
                   " (bound " + std::to_string(higham_gamma(depth) * mag) + ")";
    };
    check("a.b", got.ab, exact.value.ab, exact.magnitude.ab);
    check("a.a", got.aa, exact.value.aa, exact.magnitude.aa);
    check("b.b", got.bb, exact.value.bb, exact.magnitude.bb);
    return bad;
}

// "" when the documented order's triple `want` and the host kernel's are each within their
// rounding bound of the exact triple: the documented order's depth, and n + 1 for the host
// kernel (any order of n terms; a product rounded before its sum adds one). The two orders
// differ, so they agree to rounding error, not bit for bit.
template <class T>
std::string close_to_host(const dot_triple& want, const std::vector<T>& a, const std::vector<T>& b)
{
    const exact_triple exact = exact_triple_of(a, b);
    const dot_triple host = gradsync::kernels::triple<T>(std::span<const T>(a), std::span<const T>(b));
    return within_bound("documented order", want, exact, documented_order_depth(a.size())) +
           within_bound("host kernel", host, exact, double(a.size()) + 1);
}

inline bool same_bits(const dot_triple& x, const dot_triple& y)
{
    auto same = [](double p, double q) { return std::bit_cast<std::uint64_t>(p) == std::bit_cast<std::uint64_t>(q); };
    return same(x.ab, y.ab) && same(x.aa, y.aa) && same(x.bb, y.bb);
}

} // namespace kernel_reference
