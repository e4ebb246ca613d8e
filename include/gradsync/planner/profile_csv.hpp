// The CSV form of a layer profile (planner/profile.hpp); docs/planner.md, "Profile CSV".
//
// CSV: a header row naming the columns, then one row per layer in forward order. Columns
// `name`, `params` (non-negative integer, no sign or decimal point) and `backward_ms`
// (non-negative, finite) are required, `forward_ms` is optional (an empty field means not
// measured), other columns are ignored, in any order. Fields are separated by commas and
// trimmed of spaces and tabs; quoted fields are not supported. Blank lines, CRLF line ends
// and a UTF-8 byte order mark are tolerated; NUL bytes are not (a profile is text).
//
// Reading is bounded whatever the input: a line longer than max_profile_line_bytes or with
// more fields than max_profile_columns is refused as soon as the limit is reached, without
// reading the rest of it, and error messages quote input fields escaped and cut short
// (detail::quoted), so that every message is one short line.
//
// Times are milliseconds in the file and seconds in memory. Reading shifts the decimal
// exponent of the text by 3 before converting, so a time is rounded once; writing prints
// the shortest decimal that reads back as the same seconds, so write then read gives the
// identical profile.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <istream>
#include <limits>
#include <ostream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <gradsync/core/error.hpp>
#include <gradsync/planner/profile.hpp>

namespace gradsync::planner {

// Bad profile text. The message reads "FILE:LINE:COLUMN: what" (1-based; COLUMN counts
// bytes and points at the offending field or character), or "FILE: what" (line() == 0)
// when the file cannot be read at all.
class profile_error : public usage_error {
public:
    profile_error(const std::string& file, std::size_t line, std::size_t column, const std::string& what)
        : usage_error(line == 0 ? file + ": " + what
                                : file + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + what),
          file_(file), line_(line), column_(column)
    {
    }

    const std::string& file() const noexcept { return file_; }
    std::size_t line() const noexcept { return line_; }
    std::size_t column() const noexcept { return column_; }

private:
    std::string file_;
    std::size_t line_;
    std::size_t column_;
};

// The longest line a profile may have, in bytes before its line feed, and the most fields a
// line may have. A row needs four short fields; the room left is for long names and the
// extra columns a profiler's export brings, while a hostile input is refused after at most
// one line's worth of reading.
inline constexpr std::size_t max_profile_line_bytes = 64 * 1024;
inline constexpr std::size_t max_profile_columns = 256;

namespace detail {

struct csv_field {
    std::string_view text; // trimmed
    std::size_t column;    // 1-based byte column of the trimmed text (of the field when empty)
};

// The fields of `line` into `fields`, at most `most` + 1 of them: one more than `most` says
// the line has too many, and stopping there keeps the work bounded.
inline void split_csv_line(std::string_view line, std::size_t most, std::vector<csv_field>& fields)
{
    fields.clear();
    std::size_t start = 0;
    for (;;) {
        const std::size_t comma = std::min(line.find(',', start), line.size());
        std::size_t b = start, e = comma;
        while (b < e && (line[b] == ' ' || line[b] == '\t'))
            ++b;
        while (e > b && (line[e - 1] == ' ' || line[e - 1] == '\t'))
            --e;
        fields.push_back({line.substr(b, e - b), (b < e ? b : start) + 1});
        if (comma == line.size() || fields.size() > most)
            return;
        start = comma + 1;
    }
}

inline bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

// Non-negative integer: digits only. Returns an error text, empty on success.
inline std::string parse_count(std::string_view s, std::uint64_t& out)
{
    if (s.empty())
        return "is empty";
    for (char c : s)
        if (!is_digit(c))
            return quoted(s) + " is not a non-negative integer (digits only, no sign or decimal point)";
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (ec != std::errc() || end != s.data() + s.size())
        return quoted(s) + " does not fit in 64 bits";
    return {};
}

// Milliseconds text -> seconds, rounded once: the digits are kept and the decimal exponent
// lowered by 3 before the one conversion. Returns an error text, empty on success.
inline std::string parse_milliseconds(std::string_view s, double& seconds)
{
    if (s.empty())
        return "is empty";
    std::string_view body = s;
    const bool negative = body.front() == '-';
    if (negative || body.front() == '+')
        body.remove_prefix(1);
    std::string lower;
    for (char c : body)
        lower.push_back(c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c);
    if (lower == "nan" || lower == "inf" || lower == "infinity")
        return quoted(s) + " is not finite";
    const std::string bad = quoted(s) + " is not a number";
    std::string digits;
    std::int64_t exponent = 0;
    std::size_t i = 0;
    bool point = false;
    for (; i < body.size(); ++i) {
        if (is_digit(body[i])) {
            digits.push_back(body[i]);
            exponent -= point;
        } else if (body[i] == '.' && !point) {
            point = true;
        } else {
            break;
        }
    }
    if (digits.empty())
        return bad;
    if (i < body.size()) {
        if (body[i] != 'e' && body[i] != 'E')
            return bad;
        ++i;
        const bool minus = i < body.size() && body[i] == '-';
        if (i < body.size() && (body[i] == '-' || body[i] == '+'))
            ++i;
        if (i == body.size())
            return bad;
        std::int64_t e = 0;
        for (; i < body.size(); ++i) {
            if (!is_digit(body[i]))
                return bad;
            e = std::min<std::int64_t>(e * 10 + (body[i] - '0'), 1'000'000'000); // beyond any double
        }
        exponent += minus ? -e : e;
    }
    if (digits.find_first_not_of('0') == std::string::npos) {
        seconds = 0;
        return {};
    }
    if (negative)
        return quoted(s) + " is negative";
    const std::string text = digits + "e" + std::to_string(exponent - 3);
    double value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value))
        return quoted(s) + " is out of the range of a double";
    seconds = value;
    return {};
}

// Seconds -> the shortest milliseconds text that parse_milliseconds reads back as the same
// seconds: the shortest round-trip digits of the seconds, decimal exponent raised by 3.
inline std::string format_milliseconds(double seconds)
{
    if (seconds == 0)
        return "0";
    char buf[64];
    const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, seconds, std::chars_format::scientific);
    const std::string_view sci(buf, std::size_t(end - buf)); // d[.ddd]e±XX
    const std::size_t e_at = sci.find('e');
    std::string digits;
    for (char c : sci.substr(0, e_at))
        if (c != '.')
            digits.push_back(c);
    int exponent = 0;
    std::from_chars(sci.data() + e_at + 1 + (sci[e_at + 1] == '+'), sci.data() + sci.size(), exponent);
    const long point = long(exponent) + 3 + 1; // digits before the decimal point
    const long n = long(digits.size());
    if (point > 0 && point <= 21) {
        if (point >= n)
            return digits + std::string(std::size_t(point - n), '0');
        return digits.substr(0, std::size_t(point)) + "." + digits.substr(std::size_t(point));
    }
    if (point <= 0 && point > -6)
        return "0." + std::string(std::size_t(-point), '0') + digits;
    return digits.substr(0, 1) + (n > 1 ? "." + digits.substr(1) : "") + "e" + std::to_string(exponent + 3);
}

} // namespace detail

inline profile read_profile_csv(std::istream& in, const std::string& file_name)
{
    auto fail = [&](std::size_t line, std::size_t column, const std::string& what) {
        throw profile_error(file_name, line, column, what);
    };
    constexpr std::size_t absent = std::numeric_limits<std::size_t>::max();
    std::size_t name_at = absent, params_at = absent, forward_at = absent, backward_at = absent; // header fields
    std::size_t width = 0, line_no = 0;
    bool header_seen = false;
    // getline into a buffer one byte longer than the longest line allowed: a longer line fills
    // it and stops there, unread beyond.
    std::vector<char> buffer(max_profile_line_bytes + 1);
    std::vector<detail::csv_field> fields;
    profile result;
    for (;;) {
        in.getline(buffer.data(), std::streamsize(buffer.size()));
        const auto got = std::size_t(in.gcount()); // the line feed included, when there was one
        if (in.bad())
            fail(line_no + 1, 1, "read error");
        if (in.eof() && got == 0)
            break;
        ++line_no;
        const bool too_long = in.fail() && !in.eof(); // the buffer filled before a line feed
        std::string_view line(buffer.data(), in.good() ? got - 1 : got);
        if (const std::size_t nul = line.find('\0'); nul != std::string_view::npos)
            fail(line_no, nul + 1, "NUL byte (a profile is text)");
        if (too_long)
            fail(line_no, max_profile_line_bytes + 1,
                 "line is longer than the limit of " + std::to_string(max_profile_line_bytes) + " bytes");
        std::size_t shift = 0; // bytes cut from the start of the line (a byte order mark)
        if (line_no == 1 && line.starts_with("\xEF\xBB\xBF")) {
            line.remove_prefix(3);
            shift = 3;
        }
        if (line.ends_with('\r'))
            line.remove_suffix(1);
        if (const std::size_t cr = line.find('\r'); cr != std::string_view::npos)
            fail(line_no, cr + 1 + shift, "carriage return inside a line (only CRLF line ends are allowed)");
        if (line.find_first_not_of(" \t") == std::string_view::npos)
            continue;
        if (const std::size_t quote = line.find('"'); quote != std::string_view::npos)
            fail(line_no, quote + 1 + shift, "quoted fields are not supported; names must not contain commas or quotes");
        detail::split_csv_line(line, max_profile_columns, fields);
        if (!header_seen) {
            header_seen = true;
            if (fields.size() > max_profile_columns) // point at the comma before the first column too many
                fail(line_no, fields[max_profile_columns].column - 1 + shift,
                     "header has more than " + std::to_string(max_profile_columns) + " columns, the limit");
            width = fields.size();
            std::unordered_map<std::string_view, std::size_t> seen; // one look-up per column, not one per pair
            seen.reserve(width);
            for (std::size_t f = 0; f < width; ++f) {
                const std::string_view h = fields[f].text;
                if (const auto [first, fresh] = seen.emplace(h, f); !fresh)
                    fail(line_no, fields[f].column + shift,
                         "duplicate column " + detail::quoted(h) + " (also field " + std::to_string(first->second + 1) +
                             ")");
                if (h == "name")
                    name_at = f;
                else if (h == "params")
                    params_at = f;
                else if (h == "forward_ms")
                    forward_at = f;
                else if (h == "backward_ms")
                    backward_at = f;
            }
            for (auto [at, column] : {std::pair{name_at, "name"}, std::pair{params_at, "params"},
                                      std::pair{backward_at, "backward_ms"}})
                if (at == absent)
                    fail(line_no, 1,
                         std::string("missing required column '") + column +
                             "' (the header must name name, params and backward_ms)");
            continue;
        }
        if (fields.size() != width) // point at the first extra comma, or at the end of a short row
            fail(line_no, (fields.size() > width ? fields[width].column - 1 : line.size() + 1) + shift,
                 (fields.size() > max_profile_columns
                      ? "row has more than " + std::to_string(max_profile_columns) + " fields"
                      : "row has " + std::to_string(fields.size()) + " fields") +
                     ", the header has " + std::to_string(width));
        layer_profile layer;
        layer.name = std::string(fields[name_at].text);
        if (std::string e = detail::parse_count(fields[params_at].text, layer.params); !e.empty())
            fail(line_no, fields[params_at].column + shift, "params " + e);
        if (std::string e = detail::parse_milliseconds(fields[backward_at].text, layer.backward_s); !e.empty())
            fail(line_no, fields[backward_at].column + shift, "backward_ms " + e);
        if (forward_at != absent && !fields[forward_at].text.empty()) {
            double forward = 0;
            if (std::string e = detail::parse_milliseconds(fields[forward_at].text, forward); !e.empty())
                fail(line_no, fields[forward_at].column + shift, "forward_ms " + e);
            layer.forward_s = forward;
        }
        result.push_back(std::move(layer));
    }
    if (!header_seen)
        fail(1, 1, "empty file; expected a header row naming name, params and backward_ms");
    return result;
}

namespace detail {

// Why a path that exists is not read as a profile.
inline const char* not_regular(std::filesystem::file_type type)
{
    switch (type) {
    case std::filesystem::file_type::directory:
        return "is a directory, not a regular file";
    case std::filesystem::file_type::fifo:
        return "is a FIFO (named pipe), not a regular file";
    case std::filesystem::file_type::character:
        return "is a character device, not a regular file";
    case std::filesystem::file_type::block:
        return "is a block device, not a regular file";
    case std::filesystem::file_type::socket:
        return "is a socket, not a regular file";
    default:
        return "is not a regular file";
    }
}

} // namespace detail

// A regular file only, checked before opening: a directory cannot be read, a device can read
// without end, and opening a FIFO waits for a writer. Read from a stream to take a pipe.
inline profile read_profile_csv(const std::filesystem::path& file)
{
    std::error_code ec;
    const std::filesystem::file_type type = std::filesystem::status(file, ec).type();
    if (!ec && type != std::filesystem::file_type::regular)
        throw profile_error(file.string(), 0, 0, detail::not_regular(type));
    std::ifstream in(file, std::ios::binary);
    if (!in)
        throw profile_error(file.string(), 0, 0, "cannot open for reading");
    return read_profile_csv(in, file.string());
}

// Header name,params[,forward_ms],backward_ms; forward_ms when any layer has one, left empty
// for the layers that have none.
// usage_error for a profile that could not be read back: invalid times, or a name with a
// comma, quote, line break or surrounding spaces.
inline void write_profile_csv(std::ostream& out, const profile& p)
{
    validate_profile(p);
    bool forward = false;
    for (std::size_t l = 0; l < p.size(); ++l) {
        const std::string& name = p[l].name;
        if (name.find_first_of(",\"\r\n") != std::string::npos ||
            (!name.empty() && (name.front() == ' ' || name.front() == '\t' || name.back() == ' ' || name.back() == '\t')))
            throw usage_error("gradsync::planner::write_profile_csv: layer " + std::to_string(l) + "'s name " +
                              detail::quoted(name) +
                              " has a comma, quote, line break or surrounding blanks, which CSV without quoting "
                              "cannot hold");
        forward = forward || p[l].forward_s.has_value();
    }
    out << (forward ? "name,params,forward_ms,backward_ms\n" : "name,params,backward_ms\n");
    for (const layer_profile& layer : p) {
        out << layer.name << ',' << layer.params << ',';
        if (forward)
            out << (layer.forward_s ? detail::format_milliseconds(*layer.forward_s) : std::string()) << ',';
        out << detail::format_milliseconds(layer.backward_s) << '\n';
    }
    if (!out)
        throw usage_error("gradsync::planner::write_profile_csv: the output stream failed");
}

} // namespace gradsync::planner