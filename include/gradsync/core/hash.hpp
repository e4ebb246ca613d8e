// The one hash of the fingerprints that ranks compare instead of sending what they describe
// (a layer layout, an algorithm's parameters, a message's size in a stamp): splitmix64's
// finalizer, whose every output bit depends on every input bit. Not for security: a peer
// that wants to collide can.
#pragma once

#include <cstdint>

namespace gradsync::detail {

constexpr std::uint64_t mix(std::uint64_t x) noexcept
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// A fingerprint of values in order: mix_in(mix_in(h, a), b) for a then b.
constexpr std::uint64_t mix_in(std::uint64_t fingerprint, std::uint64_t value) noexcept
{
    return mix(fingerprint ^ mix(value));
}

} // namespace gradsync::detail
