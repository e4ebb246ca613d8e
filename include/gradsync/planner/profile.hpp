// Layer profile of a network: parameters and measured times per layer, in forward order,
// its checks, and its gradient bytes. Its CSV form is planner/profile_csv.hpp.
#pragma once

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <gradsync/core/error.hpp>

namespace gradsync::planner {

struct layer_profile {
    std::string name;
    std::uint64_t params = 0;
    double backward_s = 0;
    std::optional<double> forward_s;
};

using profile = std::vector<layer_profile>; // forward order

namespace detail {

// How much of an input text an error message quotes.
inline constexpr std::size_t quoted_bytes = 40;

// Input text as error messages show it: in single quotes; every byte outside printable ASCII
// (NUL and other control bytes, and the bytes of UTF-8 sequences too) as \xHH, a quote or
// backslash as \' or \\; a text longer than quoted_bytes cut there, marked "..." and followed by
// its length. what() is a C string and a terminal interprets control bytes, so raw input
// would cut or garble the message, and a long field would make it as long.
inline std::string quoted(std::string_view s)
{
    constexpr char hex[] = "0123456789abcdef";
    std::string q(1, '\'');
    for (const char c : s.substr(0, quoted_bytes)) {
        const auto byte = static_cast<unsigned char>(c);
        if (c == '\'' || c == '\\') {
            q += '\\';
            q += c;
        } else if (byte < 0x20 || byte >= 0x7f) {
            q += "\\x";
            q += hex[byte >> 4];
            q += hex[byte & 0xf];
        } else {
            q += c;
        }
    }
    if (s.size() > quoted_bytes)
        return q + "...' (" + std::to_string(s.size()) + " bytes)";
    return q + '\'';
}

// The shortest text that reads back as x: 1e+300 rather than std::to_string's 301 digits.
inline std::string number_text(double x)
{
    char buf[32];
    const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, x);
    return std::string(buf, ec == std::errc() ? end : buf);
}

} // namespace detail

// usage_error naming the layer unless every time is finite and non-negative.
inline void validate_profile(const profile& p)
{
    auto check = [](std::size_t l, const layer_profile& layer, const char* what, double t) {
        if (std::isfinite(t) && t >= 0)
            return;
        throw usage_error("gradsync::planner: layer " + std::to_string(l) + " (" + detail::quoted(layer.name) +
                          ") has " + what + " time " + detail::number_text(t) +
                          " s; times must be finite and non-negative");
    };
    for (std::size_t l = 0; l < p.size(); ++l) {
        check(l, p[l], "backward", p[l].backward_s);
        if (p[l].forward_s)
            check(l, p[l], "forward", *p[l].forward_s);
    }
}

// Gradient bytes of every layer (params x bytes_per_element). usage_error if
// bytes_per_element is 0 or a layer's bytes, or their total, overflow 64 bits, so that
// every sum of layer bytes a planner forms is exact.
inline std::vector<std::uint64_t> layer_bytes(const profile& p, std::size_t bytes_per_element)
{
    if (bytes_per_element == 0)
        throw usage_error("gradsync::planner: bytes_per_element must be at least 1");
    constexpr std::uint64_t most = std::numeric_limits<std::uint64_t>::max();
    std::vector<std::uint64_t> bytes(p.size());
    std::uint64_t total = 0;
    for (std::size_t l = 0; l < p.size(); ++l) {
        if (p[l].params > most / bytes_per_element || p[l].params * bytes_per_element > most - total)
            throw usage_error("gradsync::planner: layer " + std::to_string(l) + " (" + detail::quoted(p[l].name) +
                              "): the gradient bytes of the layers up to it overflow 64 bits");
        bytes[l] = p[l].params * bytes_per_element;
        total += bytes[l];
    }
    return bytes;
}

} // namespace gradsync::planner
