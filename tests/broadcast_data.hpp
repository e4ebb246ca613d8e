// Data for the broadcast tests: the root's vector of a call, bits that depend on (root, call,
// index) only, so every rank knows what it must end with; a non-root rank's vector before
// the call, which differs from it. Bits, not values: NaNs and subnormals travel too, and the
// check is bitwise.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace broadcast_data {

inline std::uint64_t mix(std::uint64_t x) noexcept
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 29;
    return x;
}

// count elements whose bytes depend on seed and position, eight bytes at a time.
template <class T>
std::vector<T> bits(std::size_t count, std::uint64_t seed)
{
    std::vector<T> v(count);
    const std::size_t bytes = count * sizeof(T);
    for (std::size_t i = 0; i < bytes; i += 8) {
        const std::uint64_t word = mix(seed * 0x9e3779b97f4a7c15ull + i);
        std::memcpy(reinterpret_cast<unsigned char*>(v.data()) + i, &word, std::min<std::size_t>(8, bytes - i));
    }
    return v;
}

template <class T>
std::vector<T> root_data(std::size_t count, int root, int call)
{
    return bits<T>(count, std::uint64_t(root) * 1000 + std::uint64_t(call));
}

template <class T>
std::vector<T> before(std::size_t count, int rank)
{
    return bits<T>(count, 0xdead0000ull + std::uint64_t(rank));
}

// "" when got holds want's bits, else the first element that differs.
template <class T>
std::string differs(const std::vector<T>& got, const std::vector<T>& want)
{
    if (got.size() != want.size())
        return std::to_string(got.size()) + " elements, want " + std::to_string(want.size());
    if (got.empty() || std::memcmp(got.data(), want.data(), got.size() * sizeof(T)) == 0)
        return "";
    for (std::size_t i = 0; i < got.size(); ++i)
        if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0)
            return "element " + std::to_string(i) + " of " + std::to_string(got.size()) + " differs";
    return "";
}

// "" when data holds the root's bits of that call, else where it went wrong.
template <class T>
std::string check_call(const std::vector<T>& data, int root, int call)
{
    const std::string d = differs(data, root_data<T>(data.size(), root, call));
    return d.empty() ? d
                     : "root " + std::to_string(root) + ", count " + std::to_string(data.size()) + ", call " +
            std::to_string(call) + ": " + d;
}

} // namespace broadcast_data
