// gradsync-plan's command line: its flags, their values checked, and the usage text. Every
// error is a gradsync::usage_error, which the program reports in one line with exit status 2.
#pragma once

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <gradsync/core/error.hpp>

namespace plan_tool {

inline constexpr const char* usage_text =
    "usage: gradsync-plan --profile FILE --alpha SECONDS --beta SECONDS_PER_BYTE\n"
    "                     [--bytes-per-element 4] [--method optimal|mgwfbp|wfbp|single|bucket:BYTES]\n"
    "                     [--json] [--svg FILE] [--compare]\n"
    "\n"
    "Plans which consecutive layers' gradients to merge into one allreduce so that communication\n"
    "hides behind backward. An allreduce of M bytes is modelled as T(M) = alpha + beta*M.\n"
    "\n"
    "  --profile FILE            layer profile CSV, layers in forward order, columns name, params,\n"
    "                            backward_ms (forward_ms optional); - reads standard input\n"
    "  --alpha SECONDS           start-up time of one allreduce\n"
    "  --beta SECONDS_PER_BYTE   time per byte of one allreduce\n"
    "  --bytes-per-element N     gradient element size (default 4, fp32)\n"
    "  --method M                optimal (the exact minimum; the default up to 10000 layers, mgwfbp\n"
    "                            above), mgwfbp (the MG-WFBP greedy), wfbp (one allreduce per layer),\n"
    "                            single (one for all layers), bucket:BYTES (DDP-style buckets closed\n"
    "                            at BYTES)\n"
    "  --json                    print one JSON object instead of the summary\n"
    "  --svg FILE                draw the timeline of the chosen plan into FILE\n"
    "  --compare                 also compare every planner (bucket at 25 MiB)\n"
    "  --help                    print this text\n";

struct method_spec {
    std::string name; // as printed: optimal, mgwfbp, wfbp, single, bucket:BYTES
    std::uint64_t cap_bytes = 0;
};

struct options {
    std::string profile;
    std::optional<double> alpha;
    std::optional<double> beta;
    std::size_t bytes_per_element = 4;
    method_spec method{"optimal"};
    bool method_given = false;
    bool json = false;
    bool compare = false;
    bool help = false;
    std::string svg;
};

[[noreturn]] inline void fail(const std::string& what) { throw gradsync::usage_error(what); }

// A non-negative finite number, the whole text.
inline double parse_seconds(const std::string& flag, const std::string& text)
{
    double value = 0;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(value) || value < 0)
        fail(flag + ": '" + text + "' is not a non-negative finite number of seconds");
    return value;
}

// A positive integer of decimal digits only, the whole text; 0 when it is not one.
inline std::uint64_t parse_positive(std::string_view text)
{
    std::uint64_t value = 0;
    const char* end = text.data() + text.size();
    if (text.empty() || text.find_first_not_of("0123456789") != std::string_view::npos)
        return 0;
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    return ec == std::errc() && ptr == end ? value : 0;
}

inline method_spec parse_method(const std::string& text)
{
    if (text == "optimal" || text == "mgwfbp" || text == "wfbp" || text == "single")
        return {text};
    constexpr std::string_view prefix = "bucket:";
    if (text.starts_with(prefix)) {
        const std::uint64_t cap = parse_positive(std::string_view(text).substr(prefix.size()));
        if (cap == 0)
            fail("--method: '" + text + "': the bucket cap must be a positive whole number of bytes");
        return {"bucket:" + std::to_string(cap), cap};
    }
    fail("--method: unknown method '" + text + "' (expected optimal, mgwfbp, wfbp, single or bucket:BYTES)");
}

inline options parse_options(int argc, char** argv)
{
    options o;
    std::vector<std::string> seen;
    for (int i = 1; i < argc; ++i) {
        std::string flag = argv[i];
        std::optional<std::string> inline_value; // --flag=value
        if (const auto eq = flag.find('='); flag.starts_with("--") && eq != std::string::npos) {
            inline_value = flag.substr(eq + 1);
            flag.resize(eq);
        }
        const bool takes_value = flag == "--profile" || flag == "--alpha" || flag == "--beta" ||
                                 flag == "--bytes-per-element" || flag == "--method" || flag == "--svg";
        const bool is_switch = flag == "--json" || flag == "--compare" || flag == "--help" || flag == "-h";
        if (!takes_value && !is_switch)
            fail(flag.starts_with("-") ? "unknown option '" + flag + "' (see --help)"
                                       : "unexpected argument '" + flag + "' (see --help)");
        for (const auto& s : seen)
            if (s == flag)
                fail(flag + " given twice");
        seen.push_back(flag);
        if (is_switch) {
            if (inline_value)
                fail(flag + " takes no value");
            if (flag == "--json")
                o.json = true;
            else if (flag == "--compare")
                o.compare = true;
            else
                o.help = true;
            continue;
        }
        std::string value;
        if (inline_value)
            value = *inline_value;
        else if (i + 1 < argc && !std::string_view(argv[i + 1]).starts_with("--"))
            value = argv[++i];
        else
            fail(flag + ": missing value");
        if (flag == "--profile") {
            if (value.empty())
                fail("--profile: empty file name");
            o.profile = value;
        } else if (flag == "--alpha") {
            o.alpha = parse_seconds(flag, value);
        } else if (flag == "--beta") {
            o.beta = parse_seconds(flag, value);
        } else if (flag == "--bytes-per-element") {
            const std::uint64_t n = parse_positive(value);
            if (n == 0 || n > std::numeric_limits<std::size_t>::max())
                fail("--bytes-per-element: '" + value + "' is not a positive whole number");
            o.bytes_per_element = std::size_t(n);
        } else if (flag == "--method") {
            o.method = parse_method(value);
            o.method_given = true;
        } else {
            if (value.empty())
                fail("--svg: empty file name");
            o.svg = value;
        }
    }
    if (o.help)
        return o;
    if (o.profile.empty())
        fail("missing --profile FILE (see --help)");
    if (!o.alpha)
        fail("missing --alpha SECONDS (see --help)");
    if (!o.beta)
        fail("missing --beta SECONDS_PER_BYTE (see --help)");
    return o;
}

} // namespace plan_tool
