// gradsync-plan: which layers' gradients to merge into one allreduce, from a layer profile and
// the cost model T(M) = alpha + beta·M (docs/planner.md). Prints a readable plan or one JSON
// object, optionally compares every planner and draws the timeline as SVG.
//
// Every error (bad flags, an unreadable or malformed profile) ends with exit status 2 and one
// line on stderr; nothing is printed on stdout then. A note on stderr, before planning, says
// when a profile is too large for the default planner (optimal_default_layers).
#include <gradsync/error.hpp>
#include <gradsync/planner.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace gp = gradsync::planner;

constexpr const char* usage_text =
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

constexpr std::uint64_t compare_bucket_bytes = 25ull << 20; // PyTorch DDP's default bucket

// optimal tries every split point of every prefix, L(L+1)/2 of them, so its time grows with
// the square of the layers: beyond this many it runs only when --method names it, and the
// default is the linear mgwfbp.
constexpr std::size_t optimal_default_layers = 10000;

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

[[noreturn]] void fail(const std::string& what) { throw gradsync::usage_error(what); }

// A non-negative finite number, the whole text.
double parse_seconds(const std::string& flag, const std::string& text)
{
    double value = 0;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(value) || value < 0)
        fail(flag + ": '" + text + "' is not a non-negative finite number of seconds");
    return value;
}

// A positive integer of decimal digits only, the whole text; 0 when it is not one.
std::uint64_t parse_positive(std::string_view text)
{
    std::uint64_t value = 0;
    const char* end = text.data() + text.size();
    if (text.empty() || text.find_first_not_of("0123456789") != std::string_view::npos)
        return 0;
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    return ec == std::errc() && ptr == end ? value : 0;
}

method_spec parse_method(const std::string& text)
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

options parse_options(int argc, char** argv)
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

gp::merge_plan make_plan(const method_spec& m, const gp::profile& p, const gp::linear_cost& cost, std::size_t bpe)
{
    if (m.name == "optimal")
        return gp::optimal(p, cost, bpe);
    if (m.name == "mgwfbp")
        return gp::mgwfbp(p, cost, bpe);
    if (m.name == "wfbp")
        return gp::wfbp(p);
    if (m.name == "single")
        return gp::single(p);
    return gp::bucket(p, m.cap_bytes, bpe);
}

struct planned {
    method_spec method;
    gp::merge_plan groups;
    gp::timeline time;
};

planned run_planner(const method_spec& m, const gp::profile& p, const gp::linear_cost& cost, std::size_t bpe)
{
    planned out{m, make_plan(m, p, cost, bpe), {}};
    out.time = gp::simulate(p, out.groups, cost, bpe);
    return out;
}

// Any plan's predicted time is at most r(0) + L·a + b·(all bytes). Refusing inputs where that
// bound comes near the largest double keeps every time the planners form finite, and the
// JSON free of infinities.
void check_times_finite(const gp::profile& p, const gp::linear_cost& cost, std::size_t bpe)
{
    double bytes = 0;
    for (std::uint64_t b : gp::layer_bytes(p, bpe))
        bytes += double(b);
    const double backward = p.empty() ? 0.0 : gp::ready_times(p)[0];
    const double bound = backward + double(p.size()) * cost.a + cost.b * bytes;
    if (!(bound <= std::numeric_limits<double>::max() / 4))
        fail("--alpha, --beta or the profile's numbers are too large: the predicted time overflows a double");
}

std::string num(double x)
{
    char text[40];
    std::snprintf(text, sizeof text, "%.17g", x);
    return text;
}

// Seconds in the summary: six decimals, or six significant digits from 1e6 s up, where fixed
// notation would grow with the exponent (1e300 as 1e+300, not 301 digits).
std::string seconds(double x)
{
    char text[40];
    std::snprintf(text, sizeof text, std::abs(x) < 1e6 ? "%.6f" : "%.6g", x);
    return text;
}

std::string json_string(const std::string& s)
{
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            char escaped[8];
            std::snprintf(escaped, sizeof escaped, "\\u%04x", unsigned(static_cast<unsigned char>(c)));
            out += escaped;
        } else {
            out += c;
        }
    }
    return out + "\"";
}

std::string json_groups(const gp::merge_plan& groups)
{
    std::string out = "[";
    for (std::size_t g = 0; g < groups.size(); ++g) {
        out += g ? ",[" : "[";
        for (std::size_t i = 0; i < groups[g].size(); ++i) {
            if (i)
                out += ',';
            out += std::to_string(groups[g][i]);
        }
        out += "]";
    }
    return out + "]";
}

template <class F>
std::string json_array(std::size_t n, F&& item)
{
    std::string out = "[";
    for (std::size_t i = 0; i < n; ++i) {
        if (i)
            out += ',';
        out += item(i);
    }
    return out + "]";
}

// Relative to wfbp: its predicted time over this one's (1 when both are zero).
double speedup(double wfbp_s, double predicted_s) { return predicted_s > 0 ? wfbp_s / predicted_s : 1.0; }

void print_json(const options& o, const gp::profile& p, const planned& chosen, const std::vector<planned>& compared)
{
    const auto& spans = chosen.time.groups;
    std::string out = "{\"method\":" + json_string(chosen.method.name);
    out += ",\"profile\":" + json_string(o.profile);
    out += ",\"layers\":" + std::to_string(p.size());
    out += ",\"alpha\":" + num(*o.alpha) + ",\"beta\":" + num(*o.beta);
    out += ",\"bytes_per_element\":" + std::to_string(o.bytes_per_element);
    out += ",\"backward_s\":" + num(chosen.time.ready_s.empty() ? 0.0 : chosen.time.ready_s[0]);
    out += ",\"predicted_s\":" + num(chosen.time.predicted_s);
    out += ",\"groups\":" + json_groups(chosen.groups);
    out += ",\"group_bytes\":" + json_array(spans.size(), [&](std::size_t g) { return std::to_string(spans[g].bytes); });
    out += ",\"group_start_s\":" + json_array(spans.size(), [&](std::size_t g) { return num(spans[g].start_s); });
    out += ",\"group_end_s\":" + json_array(spans.size(), [&](std::size_t g) { return num(spans[g].end_s); });
    if (o.compare) {
        const double wfbp_s = compared.front().time.predicted_s;
        out += ",\"compare\":" + json_array(compared.size(), [&](std::size_t i) {
            const planned& m = compared[i];
            return "{\"method\":" + json_string(m.method.name) + ",\"group_count\":" + std::to_string(m.groups.size()) +
                   ",\"predicted_s\":" + num(m.time.predicted_s) +
                   ",\"speedup_vs_wfbp\":" + num(speedup(wfbp_s, m.time.predicted_s)) +
                   ",\"groups\":" + json_groups(m.groups) + "}";
        });
    }
    out += "}\n";
    std::fputs(out.c_str(), stdout);
}

void print_summary(const options& o, const gp::profile& p, const planned& chosen, const std::vector<planned>& compared)
{
    const gp::timeline& t = chosen.time;
    const double backward = t.ready_s.empty() ? 0.0 : t.ready_s[0];
    std::printf("method: %s\n", chosen.method.name.c_str());
    std::printf("profile: %s (%zu layers)\n", o.profile.c_str(), p.size());
    std::printf("cost model: T(M) = %.6g s + %.6g s/B * M, %zu bytes per element\n", *o.alpha, *o.beta,
                o.bytes_per_element);
    std::printf("backward: %s s\n", seconds(backward).c_str());
    std::printf("predicted: %s s (%s s of communication not hidden by backward)\n", seconds(t.predicted_s).c_str(),
                seconds(t.predicted_s - backward).c_str());
    std::printf("groups: %zu\n", chosen.groups.size());
    std::printf("%6s  %-12s %14s %12s %12s\n", "group", "layers", "bytes", "start_s", "end_s");
    for (std::size_t g = 0; g < chosen.groups.size(); ++g) {
        const auto& layers = chosen.groups[g];
        const std::string range = std::to_string(layers.back()) + ".." + std::to_string(layers.front());
        std::printf("%6zu  %-12s %14llu %12s %12s\n", g, range.c_str(),
                    static_cast<unsigned long long>(t.groups[g].bytes), seconds(t.groups[g].start_s).c_str(),
                    seconds(t.groups[g].end_s).c_str());
    }
    if (!o.compare)
        return;
    const double wfbp_s = compared.front().time.predicted_s;
    std::printf("\n%-16s %7s %13s %8s\n", "method", "groups", "predicted_s", "vs wfbp");
    for (const planned& m : compared)
        std::printf("%-16s %7zu %13s %7.3fx\n", m.method.name.c_str(), m.groups.size(),
                    seconds(m.time.predicted_s).c_str(), speedup(wfbp_s, m.time.predicted_s));
}

int run(int argc, char** argv)
{
    const options o = parse_options(argc, argv);
    if (o.help) {
        std::fputs(usage_text, stdout);
        return 0;
    }
    // "-" reads standard input: read_profile_csv(path) takes regular files only.
    const gp::profile p =
        o.profile == "-" ? gp::read_profile_csv(std::cin, "<stdin>") : gp::read_profile_csv(o.profile);
    const gp::linear_cost cost{*o.alpha, *o.beta};
    check_times_finite(p, cost, o.bytes_per_element);

    // Said before planning starts, so that a long run, or a planner other than the default, is
    // explained up front.
    method_spec method = o.method;
    const bool optimal_named = o.method_given && o.method.name == "optimal";
    const bool large = p.size() > optimal_default_layers;
    if (large && (optimal_named || !o.method_given || o.compare)) {
        char splits[32];
        std::snprintf(splits, sizeof splits, "%.2g", double(p.size()) * double(p.size() + 1) / 2);
        std::string then = "it can take minutes (mgwfbp plans in linear time)";
        if (!optimal_named) {
            then = "beyond " + std::to_string(optimal_default_layers) + " layers it runs only when --method names it, so ";
            then += o.method_given ? "--compare leaves it out" : "mgwfbp plans instead";
            if (!o.method_given && o.compare)
                then += " and --compare leaves optimal out";
        }
        const std::string note = std::to_string(p.size()) + " layers: optimal tries about " + splits +
                                 " split points, a number that grows with the square of the layers; " + then;
        std::fprintf(stderr, "gradsync-plan: note: %s\n", note.c_str());
    }
    if (large && !o.method_given)
        method = method_spec{"mgwfbp"};
    const bool optimal_runs = !large || optimal_named;

    const planned chosen = run_planner(method, p, cost, o.bytes_per_element);
    std::vector<planned> compared;
    if (o.compare)
        for (const method_spec& m : {method_spec{"wfbp"}, method_spec{"single"},
                                     method_spec{"bucket:" + std::to_string(compare_bucket_bytes), compare_bucket_bytes},
                                     method_spec{"mgwfbp"}, method_spec{"optimal"}}) {
            if (m.name == "optimal" && !optimal_runs)
                continue;
            compared.push_back(m.name == chosen.method.name ? chosen : run_planner(m, p, cost, o.bytes_per_element));
        }

    // Written before anything is printed, so that a failure leaves stdout empty.
    if (!o.svg.empty()) {
        std::ostringstream drawing;
        const std::string title = o.profile + ": " + chosen.method.name + ", alpha " + num(*o.alpha) + " s, beta " +
                                  num(*o.beta) + " s/B";
        gp::write_timeline_svg(drawing, p, chosen.groups, chosen.time, title);
        std::ofstream svg(o.svg, std::ios::binary);
        svg << drawing.str();
        svg.close();
        if (!svg)
            fail("--svg: cannot write '" + o.svg + "'");
    }
    if (o.json)
        print_json(o, p, chosen, compared);
    else
        print_summary(o, p, chosen, compared);
    if (std::fflush(stdout) != 0)
        fail("writing to standard output failed");
    return 0;
}

// One line on stderr, whatever the message holds.
int report(const std::string& what)
{
    std::string line = "gradsync-plan: " + what;
    for (char& c : line)
        if (c == '\n' || c == '\r')
            c = ' ';
    std::fprintf(stderr, "%s\n", line.c_str());
    return 2;
}

} // namespace

int main(int argc, char** argv)
{
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        return report(e.what());
    } catch (...) {
        return report("unknown error");
    }
}
