// Message tags: which reducer, and which of its calls, a message belongs to.
//
// A message's tag is base + stamp * 2^15. The base, below 2^15 (32767 is the smallest
// MPI_TAG_UB the MPI standard allows), is the reducer's tag option; reducers that may run at
// the same time on one communicator need different bases. The stamp fills the bits that the
// transport's largest tag (tag_limit(), comm/communicator.hpp) leaves above the base, at most 16:
// its low call_bits hold the reducer's call number, the rest the reducer's identity, which
// every rank's reducer takes from rank 0's when it is built (collective/verify.hpp). A receive thus
// matches only a message of the same reducer and call: ranks that call their reducers in
// different orders, or are at different calls of one reducer, wait instead of mixing data,
// and a transport that finds the peer's next message stamped otherwise (foreign below)
// reports it. A transport whose tags stop below 2^16 leaves no stamp bits: the base alone is
// sent and calls out of order go undetected (docs/semantics.md, "Call order").
#pragma once

#include <cstdint>

namespace gradsync::tags {

inline constexpr int reducer = 24301;
inline constexpr int synchronizer = 24302;
inline constexpr int agreement = 32766; // never stamped: ranks that disagree on a base still meet

inline constexpr int base_bits = 15;
inline constexpr int base_mask = (1 << base_bits) - 1;
inline constexpr int call_bits = 2; // a rank can be at most one call ahead: four calls tell ahead from behind
inline constexpr int most_stamp_bits = 16;

// Stamp bits that tags up to `limit` (a transport's largest tag) leave above the base.
constexpr int stamp_bits(long long limit) noexcept
{
    int bits = 0;
    while (bits < most_stamp_bits && (1LL << (base_bits + bits + 1)) - 1 <= limit)
        ++bits;
    return bits;
}

// Whether base is a tag a reducer may be given.
constexpr bool valid_base(int base) noexcept { return base >= 0 && base < agreement; }

constexpr int identity_bits(int bits) noexcept { return bits > call_bits ? bits - call_bits : 0; }

constexpr std::uint64_t low_bits(std::uint64_t x, int bits) noexcept
{
    return bits ? x & ((std::uint64_t(1) << bits) - 1) : 0;
}

// The tag of call `call` of the reducer with `identity`, over a transport with `bits` stamp bits.
constexpr int stamped(int base, std::uint64_t identity, std::uint64_t call, int bits) noexcept
{
    const int calls = bits < call_bits ? bits : call_bits;
    const std::uint64_t stamp = (low_bits(identity, identity_bits(bits)) << calls) | low_bits(call, calls);
    return int(std::uint64_t(base) | (stamp << base_bits));
}

// The identity and call number (their low bits) that tag carries.
struct stamp {
    std::uint64_t identity;
    std::uint64_t call;
};

constexpr stamp stamp_of(int tag, int bits) noexcept
{
    const int calls = bits < call_bits ? bits : call_bits;
    const std::uint64_t s = std::uint64_t(tag) >> base_bits;
    return {low_bits(s >> calls, identity_bits(bits)), low_bits(s, calls)};
}

// Whether a message tagged `found` belongs to another reducer or call of the same base than a
// receive posted with `expected`.
constexpr bool foreign(int found, int expected) noexcept
{
    return found != expected && (found & base_mask) == (expected & base_mask) && expected != agreement;
}

} // namespace gradsync::tags
