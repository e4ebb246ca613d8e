// Element types and their traits: which type accumulates them and how they are identified
// across ranks. fp16 is IEEE binary16: the compiler's _Float16 where it has one (not under
// nvcc), otherwise a storage type with exact round-to-nearest-even conversions. bf16 is
// gradsync::bfloat16, a storage type with the same rules. The integers int8, uint8, int32
// and int64 accumulate in themselves; the kernels compute with them modulo 2^bits.
#pragma once

#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace gradsync {

namespace detail {

// Exact IEEE binary16 <-> binary32 conversions (round to nearest even), for compilers
// without _Float16 and as an independent check of the ones that have it.
inline float binary16_to_float(std::uint16_t h) noexcept
{
    const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
    const std::uint32_t exp = (h >> 10) & 0x1fu;
    std::uint32_t man = h & 0x3ffu;
    std::uint32_t out;
    if (exp == 0x1f) {
        out = sign | 0x7f800000u | (man << 13);
    } else if (exp != 0) {
        out = sign | ((exp + 112) << 23) | (man << 13);
    } else if (man == 0) {
        out = sign;
    } else { // subnormal: normalize
        std::uint32_t e = 113;
        while ((man & 0x400u) == 0) {
            man <<= 1;
            --e;
        }
        out = sign | (e << 23) | ((man & 0x3ffu) << 13);
    }
    return std::bit_cast<float>(out);
}

inline std::uint16_t float_to_binary16(float f) noexcept
{
    const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    const std::uint32_t sign = (x >> 16) & 0x8000u;
    const std::uint32_t abs = x & 0x7fffffffu;
    if (abs > 0x7f800000u) // NaN: keep it quiet and keep the top payload bits
        return std::uint16_t(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
    if (abs >= 0x477ff000u) // Inf, or rounds to Inf
        return std::uint16_t(sign | 0x7c00u);
    if (abs < 0x38800000u) { // subnormal or zero in binary16
        if (abs <= 0x33000000u) // at most half the smallest subnormal: ties go to even (zero)
            return std::uint16_t(sign);
        const std::uint32_t man = (abs & 0x7fffffu) | 0x800000u;
        const std::uint32_t shift = 126u - (abs >> 23);
        const std::uint32_t halfway = 1u << (shift - 1);
        const std::uint32_t rest = man & ((1u << shift) - 1);
        std::uint32_t r = man >> shift;
        if (rest > halfway || (rest == halfway && (r & 1u)))
            ++r;
        return std::uint16_t(sign | r);
    }
    std::uint32_t r = abs - 0x38000000u; // rebias the exponent from 127 to 15
    const std::uint32_t rest = r & 0x1fffu;
    r >>= 13;
    if (rest > 0x1000u || (rest == 0x1000u && (r & 1u)))
        ++r;
    return std::uint16_t(sign | r);
}

// binary32 -> bfloat16 (the top half of a binary32), round to nearest even; NaN stays a
// quiet NaN with its sign and top payload bits.
inline std::uint16_t float_to_bfloat16(float f) noexcept
{
    const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return std::uint16_t((x >> 16) | 0x40u);
    return std::uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// double -> float rounded to odd: the nearest float, or, if that is inexact, the neighbour
// toward zero with its last bit set. A second rounding of the result to any format with at
// most 22 significant bits (binary16: 11, bfloat16: 8) then equals one direct rounding.
inline float double_to_float_odd(double d) noexcept
{
    float f = float(d);
    if (double(f) != d && d == d) {
        std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
        if ((double(f) < 0 ? -double(f) : double(f)) > (d < 0 ? -d : d))
            --bits; // nearest rounded away from zero: step back to the truncation
        f = std::bit_cast<float>(bits | 1u);
    }
    return f;
}

inline std::uint16_t double_to_binary16(double d) noexcept { return float_to_binary16(double_to_float_odd(d)); }
inline std::uint16_t double_to_bfloat16(double d) noexcept { return float_to_bfloat16(double_to_float_odd(d)); }

} // namespace detail

#if defined(__FLT16_MANT_DIG__) && !defined(__CUDACC__)
using half = _Float16;
#else
// Storage-only binary16 for compilers without _Float16, and under nvcc, whose device
// compiler fails on _Float16 in host code (docs/results.md, "Kernel notes"): arithmetic
// converts to float, exactly as the accumulation rules ask. Both spellings hold the same
// bits, so buffers pass freely between .cpp and .cu code.
struct half {
    std::uint16_t bits = 0;

    half() = default;
    half(float f) noexcept : bits(detail::float_to_binary16(f)) {}
    explicit half(double d) noexcept : bits(detail::double_to_binary16(d)) {}
    explicit half(std::integral auto i) noexcept : half(double(i)) {}
    operator float() const noexcept { return detail::binary16_to_float(bits); }
};
#endif

// bfloat16: binary32's sign, exponent and top 7 fraction bits. Storage only: arithmetic is
// done in float (Sum/Average) or double (Adasum) and rounded to nearest even, once per
// combine, as for fp16.
struct bfloat16 {
    std::uint16_t bits = 0;

    bfloat16() = default;
    bfloat16(float f) noexcept : bits(detail::float_to_bfloat16(f)) {}
    explicit bfloat16(double d) noexcept : bits(detail::double_to_bfloat16(d)) {}
    explicit bfloat16(std::integral auto i) noexcept : bfloat16(double(i)) {}
    operator float() const noexcept { return std::bit_cast<float>(std::uint32_t(bits) << 16); }
};

// Traits of an element type: the type its arithmetic is done in, a code that identifies it
// across ranks, and its name for messages.
template <class T>
struct element_traits;

namespace detail {

// An element type's code, which the agreement check compares between ranks: the format
// family in the high 16 bits, the size in bytes in the low 16 (fp16 and bf16 share a size,
// not a family; so do int8 and uint8).
enum class element_family : std::uint32_t {
    binary16 = 1,    // IEEE binary16
    binary32_64 = 2, // IEEE binary32 and binary64: float, double
    bfloat16 = 3,
    raw = 4, // std::byte: moved, never computed with
    signed_integer = 5,
    unsigned_integer = 6,
};

constexpr std::uint32_t element_code(element_family family, std::uint32_t bytes) noexcept
{
    return (std::uint32_t(family) << 16) | bytes;
}

// An integer accumulates in itself: its sums and products wrap modulo 2^bits
// (kernels/host_elementwise.hpp), as torch.distributed's Gloo leaves them.
template <class T>
struct integer_traits {
    using accumulate = T;
    static constexpr std::uint32_t code = element_code(
        std::is_signed_v<T> ? element_family::signed_integer : element_family::unsigned_integer, sizeof(T));
};

} // namespace detail

template <>
struct element_traits<half> {
    using accumulate = float;
    static constexpr std::uint32_t code = detail::element_code(detail::element_family::binary16, 2);
    static constexpr const char* name = "fp16";
};

template <>
struct element_traits<bfloat16> {
    using accumulate = float;
    static constexpr std::uint32_t code = detail::element_code(detail::element_family::bfloat16, 2);
    static constexpr const char* name = "bf16";
};

template <>
struct element_traits<float> {
    using accumulate = float;
    static constexpr std::uint32_t code = detail::element_code(detail::element_family::binary32_64, 4);
    static constexpr const char* name = "fp32";
};

template <>
struct element_traits<double> {
    using accumulate = double;
    static constexpr std::uint32_t code = detail::element_code(detail::element_family::binary32_64, 8);
    static constexpr const char* name = "fp64";
};

template <>
struct element_traits<std::int8_t> : detail::integer_traits<std::int8_t> {
    static constexpr const char* name = "int8";
};

template <>
struct element_traits<std::uint8_t> : detail::integer_traits<std::uint8_t> {
    static constexpr const char* name = "uint8";
};

template <>
struct element_traits<std::int32_t> : detail::integer_traits<std::int32_t> {
    static constexpr const char* name = "int32";
};

template <>
struct element_traits<std::int64_t> : detail::integer_traits<std::int64_t> {
    static constexpr const char* name = "int64";
};

// Raw bytes, which a broadcast moves (packed tensors of mixed types): a code and a name for
// the agreement check, and no accumulate type, so std::byte is no element.
template <>
struct element_traits<std::byte> {
    static constexpr std::uint32_t code = detail::element_code(detail::element_family::raw, 1);
    static constexpr const char* name = "byte";
};

template <class T>
concept element = requires {
    typename element_traits<T>::accumulate;
    { element_traits<T>::code } -> std::convertible_to<std::uint32_t>;
};

template <element T>
using accumulate_t = typename element_traits<T>::accumulate;

} // namespace gradsync
