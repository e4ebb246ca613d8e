// Element types: the exact binary16 conversions in gradsync::detail (used where the compiler
// has no _Float16) checked against g++'s _Float16, the bfloat16 conversions against a
// rounding by distance (tests/reference.hpp), and the element traits.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <string>
#include <type_traits>
#include <vector>

#include <gradsync/core/tags.hpp>
#include <gradsync/core/types.hpp>

#include "reference.hpp"

namespace {

using gradsync::detail::binary16_to_float;
using gradsync::detail::float_to_binary16;

std::uint16_t bits_of(_Float16 h) { return std::bit_cast<std::uint16_t>(h); }
std::uint32_t bits_of(float f) { return std::bit_cast<std::uint32_t>(f); }

// The compiler's conversion is the oracle. NaNs are compared by class and sign only: IEEE
// leaves the payload of a converted NaN to the implementation.
std::string check_to_half(float f)
{
    const std::uint16_t got = float_to_binary16(f);
    const std::uint16_t want = bits_of(static_cast<_Float16>(f));
    const bool got_nan = (got & 0x7c00u) == 0x7c00u && (got & 0x3ffu) != 0;
    const bool want_nan = (want & 0x7c00u) == 0x7c00u && (want & 0x3ffu) != 0;
    if (want_nan ? (got_nan && (got & 0x8000u) == (want & 0x8000u)) : got == want)
        return "";
    return "float bits " + std::to_string(bits_of(f)) + ": got half bits " + std::to_string(got) + ", want " +
        std::to_string(want);
}

} // namespace

TEST_CASE("half is the compiler's _Float16 on g++", "[types]")
{
    STATIC_REQUIRE(std::is_same_v<gradsync::half, _Float16>);
    STATIC_REQUIRE(sizeof(gradsync::half) == 2);
}

TEST_CASE("binary16_to_float matches _Float16 on all 65536 bit patterns", "[types]")
{
    std::string first;
    std::size_t bad = 0;
    for (std::uint32_t h = 0; h <= 0xffffu; ++h) {
        const float got = binary16_to_float(std::uint16_t(h));
        const float want = static_cast<float>(std::bit_cast<_Float16>(std::uint16_t(h)));
        bool ok;
        if (std::isnan(want)) // class, sign and the payload bits below the quiet bit
            ok = std::isnan(got) && std::signbit(got) == std::signbit(want) &&
                ((bits_of(got) ^ bits_of(want)) & 0x003fe000u) == 0;
        else
            ok = bits_of(got) == bits_of(want);
        if (!ok && bad++ == 0)
            first = "half bits " + std::to_string(h) + ": got float bits " + std::to_string(bits_of(got)) +
                ", want " + std::to_string(bits_of(want));
    }
    CHECK(first == "");
    CHECK(bad == 0);
}

TEST_CASE("float_to_binary16 inverts binary16_to_float on every non-NaN half", "[types]")
{
    std::string first;
    for (std::uint32_t h = 0; h <= 0xffffu && first.empty(); ++h) {
        const float f = static_cast<float>(std::bit_cast<_Float16>(std::uint16_t(h)));
        if (std::isnan(f))
            continue;
        if (float_to_binary16(f) != h)
            first = "half bits " + std::to_string(h) + " -> " + std::to_string(float_to_binary16(f));
    }
    CHECK(first == "");
}

TEST_CASE("float_to_binary16 matches _Float16 on random floats", "[types]")
{
    // Random bit patterns cover every exponent (NaN, Inf, normal, subnormal, zero) evenly.
    std::string first;
    std::size_t bad = 0;
    for (std::uint64_t i = 0; i < 4'000'000; ++i) {
        const float f = std::bit_cast<float>(std::uint32_t(ref::mix(i)));
        std::string e = check_to_half(f);
        if (!e.empty() && bad++ == 0)
            first = e;
    }
    CHECK(first == "");
    CHECK(bad == 0);
}

TEST_CASE("float_to_binary16 rounds ties to even at every halfway point", "[types]")
{
    // For each pair of adjacent finite halves, the midpoint (exact in float) and its float
    // neighbours: the round-to-nearest-even decisions, subnormals and the Inf threshold.
    std::string first;
    std::size_t bad = 0;
    for (std::uint32_t h = 0; h < 0x7c00u; ++h) {
        const float lo = static_cast<float>(std::bit_cast<_Float16>(std::uint16_t(h)));
        const float hi = h + 1 == 0x7c00u ? 65536.0f : static_cast<float>(std::bit_cast<_Float16>(std::uint16_t(h + 1)));
        const float mid = lo + (hi - lo) / 2;
        for (float f : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY), lo, hi})
            for (float s : {f, -f}) {
                std::string e = check_to_half(s);
                if (!e.empty() && bad++ == 0)
                    first = e;
            }
    }
    CHECK(first == "");
    CHECK(bad == 0);
}

TEST_CASE("float_to_binary16 matches _Float16 across the subnormal band", "[types]")
{
    // Float bit patterns from below half the smallest subnormal (2^-26) up past the smallest
    // normal (2^-14): every pattern near the edges, a stride through the middle.
    std::string first;
    std::size_t bad = 0;
    auto probe = [&](std::uint32_t b) {
        for (std::uint32_t s : {0u, 0x80000000u}) {
            std::string e = check_to_half(std::bit_cast<float>(b | s));
            if (!e.empty() && bad++ == 0)
                first = e;
        }
    };
    for (std::uint32_t b = 0x32800000u; b <= 0x38900000u; b += 61)
        probe(b);
    for (std::uint32_t edge : {0x33000000u, 0x33800000u, 0x38800000u, 0x477fe000u, 0x477ff000u, 0x7f800000u})
        for (std::uint32_t b = edge - 0x4000u; b <= edge + 0x4000u; ++b)
            probe(b);
    CHECK(first == "");
    CHECK(bad == 0);
}

TEST_CASE("double_to_binary16 rounds once, like _Float16's conversion from double", "[types]")
{
    // Rounding through float first would be wrong just beside every halfway point: a double
    // a hair above a midpoint rounds to the midpoint in float, which then ties to even.
    // Probe each midpoint and its double neighbours, plus random doubles of every magnitude.
    using gradsync::detail::double_to_binary16;
    std::string first;
    std::size_t bad = 0;
    auto probe = [&](double d) {
        for (double s : {d, -d}) {
            const std::uint16_t got = double_to_binary16(s);
            const std::uint16_t want = bits_of(static_cast<_Float16>(s));
            const bool want_nan = (want & 0x7c00u) == 0x7c00u && (want & 0x3ffu) != 0;
            const bool got_nan = (got & 0x7c00u) == 0x7c00u && (got & 0x3ffu) != 0;
            if ((want_nan ? got_nan : got == want) || bad++ != 0)
                continue;
            first = "double bits " + std::to_string(std::bit_cast<std::uint64_t>(s)) + ": got half bits " +
                std::to_string(got) + ", want " + std::to_string(want);
        }
    };
    for (std::uint32_t h = 0; h < 0x7c00u; ++h) {
        const double lo = static_cast<double>(std::bit_cast<_Float16>(std::uint16_t(h)));
        const double hi = h + 1 == 0x7c00u ? 65536.0 : static_cast<double>(std::bit_cast<_Float16>(std::uint16_t(h + 1)));
        const double mid = lo + (hi - lo) / 2;
        for (double d : {mid, std::nextafter(mid, 0.0), std::nextafter(mid, INFINITY), std::nextafter(lo, INFINITY)})
            probe(d);
    }
    for (std::uint64_t i = 0; i < 1'000'000; ++i) {
        const std::uint64_t k = ref::mix(i + 0x5eed);
        // exponents from 2^-40 to 2^20 (beyond both ends of binary16), random mantissa
        const std::uint64_t exp = 1023 - 40 + (k >> 52) % 61;
        probe(std::bit_cast<double>((exp << 52) | (k & 0xfffffffffffffull)));
    }
    for (double d : {0.0, 1e-300, 1e300, double(INFINITY), double(NAN), 65519.999999, 65520.0, 0x1.0p-25,
                     0x1.0000000000001p-25})
        probe(d);
    CHECK(first == "");
    CHECK(bad == 0);
}

TEST_CASE("bfloat16 widens exactly: sign, exponent and 7 fraction bits of a float", "[types]")
{
    std::string first;
    for (std::uint32_t b = 0; b < 0x10000u; ++b) {
        gradsync::bfloat16 x;
        x.bits = std::uint16_t(b);
        const float got = x;
        const std::uint32_t e = (b >> 7) & 0xffu, m = b & 0x7fu;
        double want = e == 0 ? std::ldexp(double(m), -133) : std::ldexp(double(128 + m), int(e) - 134);
        if (e == 0xff)
            want = m == 0 ? INFINITY : NAN;
        want = (b & 0x8000u) ? -want : want;
        const bool ok = std::isnan(want) ? std::isnan(got) : double(got) == want;
        if (!ok && first.empty())
            first = "bits " + std::to_string(b) + ": got " + std::to_string(got) + ", want " + std::to_string(want);
    }
    CHECK(first == "");
}

TEST_CASE("bfloat16 from float and from double rounds once to nearest even", "[types]")
{
    // Every midpoint between neighbouring bfloat16 values and the doubles beside it (where
    // rounding through float first would go wrong), random floats and doubles of every
    // magnitude, and the specials.
    using gradsync::detail::double_to_bfloat16;
    using gradsync::detail::float_to_bfloat16;
    std::string first;
    std::size_t bad = 0;
    auto probe = [&](double d) {
        for (double s : {d, -d}) {
            const std::uint16_t want = ref::round_to_bfloat16(s);
            const std::uint16_t got = double_to_bfloat16(s);
            const float f = float(s);
            const std::uint16_t got_f = float_to_bfloat16(f);
            const std::uint16_t want_f = ref::round_to_bfloat16(double(f));
            if ((got == want && got_f == want_f) || bad++ != 0)
                continue;
            first = "double bits " + std::to_string(std::bit_cast<std::uint64_t>(s)) + ": got " + std::to_string(got) +
                " (from float " + std::to_string(got_f) + "), want " + std::to_string(want) + " (" +
                std::to_string(want_f) + ")";
        }
    };
    auto value = [](std::uint32_t b) { return double(std::bit_cast<float>(b << 16)); };
    for (std::uint32_t b = 0; b < 0x7f80u; ++b) {
        const double lo = value(b), hi = b + 1 == 0x7f80u ? std::ldexp(1.0, 128) : value(b + 1);
        const double mid = lo + (hi - lo) / 2;
        for (double d : {mid, std::nextafter(mid, 0.0), std::nextafter(mid, INFINITY), std::nextafter(lo, INFINITY)})
            probe(d);
    }
    for (std::uint64_t i = 0; i < 1'000'000; ++i) {
        const std::uint64_t k = ref::mix(i + 0xbf16);
        const std::uint64_t exp = 1023 - 140 + (k >> 52) % 270; // 2^-140 .. 2^129: past both ends
        probe(std::bit_cast<double>((exp << 52) | (k & 0xfffffffffffffull)));
    }
    for (double d : {0.0, 1e-300, 1e300, double(INFINITY), double(NAN)})
        probe(d);
    CHECK(first == "");
    CHECK(bad == 0);
}

TEST_CASE("element traits: distinct codes and names, the contract's accumulate types", "[types]")
{
    using gradsync::element_traits;
    using gradsync::half;
    STATIC_REQUIRE(gradsync::element<half>);
    STATIC_REQUIRE(gradsync::element<float>);
    STATIC_REQUIRE(gradsync::element<double>);
    STATIC_REQUIRE(gradsync::element<gradsync::bfloat16>);
    STATIC_REQUIRE(gradsync::element<std::int8_t>);
    STATIC_REQUIRE(gradsync::element<std::uint8_t>);
    STATIC_REQUIRE(gradsync::element<std::int32_t>);
    STATIC_REQUIRE(gradsync::element<std::int64_t>);
    STATIC_REQUIRE(std::is_same_v<gradsync::accumulate_t<half>, float>);
    STATIC_REQUIRE(std::is_same_v<gradsync::accumulate_t<gradsync::bfloat16>, float>);
    STATIC_REQUIRE(std::is_same_v<gradsync::accumulate_t<float>, float>);
    STATIC_REQUIRE(std::is_same_v<gradsync::accumulate_t<double>, double>);
    STATIC_REQUIRE(std::is_same_v<gradsync::accumulate_t<std::int8_t>, std::int8_t>);
    STATIC_REQUIRE(std::is_same_v<gradsync::accumulate_t<std::uint8_t>, std::uint8_t>);
    STATIC_REQUIRE(std::is_same_v<gradsync::accumulate_t<std::int32_t>, std::int32_t>);
    STATIC_REQUIRE(std::is_same_v<gradsync::accumulate_t<std::int64_t>, std::int64_t>);
    const std::uint32_t codes[] = {element_traits<half>::code,         element_traits<gradsync::bfloat16>::code,
                                   element_traits<float>::code,        element_traits<double>::code,
                                   element_traits<std::int8_t>::code,  element_traits<std::uint8_t>::code,
                                   element_traits<std::int32_t>::code, element_traits<std::int64_t>::code};
    const std::string names[] = {element_traits<half>::name,         element_traits<gradsync::bfloat16>::name,
                                 element_traits<float>::name,        element_traits<double>::name,
                                 element_traits<std::int8_t>::name,  element_traits<std::uint8_t>::name,
                                 element_traits<std::int32_t>::name, element_traits<std::int64_t>::name};
    for (std::size_t i = 0; i < std::size(codes); ++i)
        for (std::size_t j = i + 1; j < std::size(codes); ++j) {
            CHECK(codes[i] != codes[j]);
            CHECK(names[i] != names[j]);
        }
}

// Message tags (core/tags.hpp): the stamp fits the transport's largest tag, keeps the base in the
// low 15 bits, and gives back the identity and call modulo the bits it has.
TEST_CASE("stamped tags stay within the tag limit and carry identity and call modulo their bits", "[types][tags]")
{
    namespace tags = gradsync::tags;
    struct limit {
        long long largest;
        int bits;
    };
    // MPI's minimum, one bit more, MPICH's MPI_TAG_UB, Boost.MPI's max_tag, Open MPI's.
    for (const limit l : {limit{32767, 0}, limit{65535, 1}, limit{268435455, 13}, limit{2147483646, 15},
                          limit{2147483647, 16}}) {
        INFO("tag limit " << l.largest);
        CHECK(tags::stamp_bits(l.largest) == l.bits);
        const int calls = std::min(l.bits, tags::call_bits), ids = l.bits - calls;
        for (const int base : {0, 7, tags::reducer, tags::synchronizer, tags::agreement - 1})
            for (std::uint64_t identity : {1ull, 2ull, 3ull, 1000ull, 16383ull, 16384ull, 16385ull, 123456789ull})
                for (std::uint64_t call = 0; call < 9; ++call) {
                    const int tag = tags::stamped(base, identity, call, l.bits);
                    CHECK(tag >= 0);
                    CHECK((long long)tag <= l.largest);
                    CHECK((tag & tags::base_mask) == base);
                    const tags::stamp s = tags::stamp_of(tag, l.bits);
                    CHECK(s.call == (calls ? call % (1ull << calls) : 0));
                    CHECK(s.identity == (ids ? identity % (1ull << ids) : 0));
                    const int next = tags::stamped(base, identity, call + 1, l.bits);
                    CHECK(tags::foreign(next, tag) == (calls > 0));
                    CHECK(!tags::foreign(tag, tag));
                    CHECK(!tags::foreign(tags::stamped((base + 1) % tags::agreement, identity + 1, call, l.bits), tag));
                }
    }
    CHECK(!tags::foreign(tags::stamped(tags::agreement, 5, 1, 16), tags::agreement));
    CHECK(tags::valid_base(0));
    CHECK(tags::valid_base(tags::agreement - 1));
    CHECK(!tags::valid_base(tags::agreement));
    CHECK(!tags::valid_base(-1));
}
