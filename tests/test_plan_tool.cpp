// gradsync-plan, run as a separate process on profiles it has never seen: random profiles
// (zero-parameter layers, a few huge layers, shuffled columns, CRLF) for cost models from
// compute-bound to communication-bound. Its JSON is checked against tests/plan_reference.hpp:
// MG-WFBP's groups exactly, the optimum's predicted time, and every method's predicted time
// and group spans re-simulated from the groups it printed. Malformed profiles and bad flags
// must end in exit status 2 with one line on stderr naming the problem (file:line: for
// profiles); a crash, a sanitizer report or any other status fails. Hostile inputs (devices,
// FIFOs, endless or enormous lines, NUL and control bytes) must be refused promptly, each run
// under timeout(1) so that a hang fails on its own, with a short line; profiles beyond
// 10000 layers get a note and mgwfbp unless optimal is asked for.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "plan_reference.hpp"
#include "scratch_dir.hpp"

#ifndef GRADSYNC_PLAN_EXE
#error "GRADSYNC_PLAN_EXE must name the gradsync-plan binary"
#endif

namespace {

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

// ---- a JSON reader, just enough for the tool's output ----

struct json {
    enum class type { null, boolean, number, string, array, object } kind = type::null;
    bool flag = false;
    double number = 0;
    std::string text;
    std::vector<json> items;
    std::vector<std::pair<std::string, json>> fields;

    bool has(const std::string& key) const
    {
        return std::any_of(fields.begin(), fields.end(), [&](const auto& f) { return f.first == key; });
    }
    const json& operator[](const std::string& key) const
    {
        for (const auto& f : fields)
            if (f.first == key)
                return f.second;
        throw std::runtime_error("JSON object has no \"" + key + "\"");
    }
    const json& at(std::size_t i) const
    {
        if (kind != type::array || i >= items.size())
            throw std::runtime_error("JSON array index out of range");
        return items[i];
    }
    double num() const
    {
        if (kind != type::number)
            throw std::runtime_error("JSON value is not a number");
        return number;
    }
    const std::string& str() const
    {
        if (kind != type::string)
            throw std::runtime_error("JSON value is not a string");
        return text;
    }
};

class json_reader {
public:
    // The whole text must be exactly one JSON value (surrounding white space allowed).
    static json parse(const std::string& text)
    {
        json_reader r(text);
        json v = r.value();
        r.space();
        if (r.pos_ != text.size())
            r.fail("text after the JSON value");
        return v;
    }

private:
    explicit json_reader(const std::string& s) : s_(s) {}

    [[noreturn]] void fail(const std::string& what) const
    {
        throw std::runtime_error("JSON: " + what + " at offset " + std::to_string(pos_));
    }
    void space()
    {
        while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t'))
            ++pos_;
    }
    bool eat(char c)
    {
        space();
        if (pos_ < s_.size() && s_[pos_] == c) {
            ++pos_;
            return true;
        }
        return false;
    }
    void expect(char c)
    {
        if (!eat(c))
            fail(std::string("expected '") + c + "'");
    }
    bool word(const char* w)
    {
        const std::string ws(w);
        if (s_.compare(pos_, ws.size(), ws) != 0)
            return false;
        pos_ += ws.size();
        return true;
    }
    std::string string()
    {
        expect('"');
        std::string out;
        while (pos_ < s_.size() && s_[pos_] != '"') {
            char c = s_[pos_++];
            if (c == '\\') {
                if (pos_ >= s_.size())
                    fail("unterminated escape");
                const char e = s_[pos_++];
                switch (e) {
                case 'n': c = '\n'; break;
                case 't': c = '\t'; break;
                case 'r': c = '\r'; break;
                case 'b': c = '\b'; break;
                case 'f': c = '\f'; break;
                case 'u': {
                    if (pos_ + 4 > s_.size())
                        fail("short \\u escape");
                    const unsigned long code = std::stoul(s_.substr(pos_, 4), nullptr, 16);
                    pos_ += 4;
                    c = code < 0x80 ? char(code) : '?';
                    break;
                }
                default: c = e; break; // \" \\ \/
                }
            } else if (static_cast<unsigned char>(c) < 0x20) {
                fail("control character in a string");
            }
            out += c;
        }
        if (pos_ >= s_.size())
            fail("unterminated string");
        ++pos_;
        return out;
    }
    json value()
    {
        space();
        if (pos_ >= s_.size())
            fail("missing value");
        json v;
        const char c = s_[pos_];
        if (c == '{') {
            v.kind = json::type::object;
            ++pos_;
            if (eat('}'))
                return v;
            do {
                space();
                std::string key = string();
                expect(':');
                v.fields.emplace_back(std::move(key), value());
            } while (eat(','));
            expect('}');
        } else if (c == '[') {
            v.kind = json::type::array;
            ++pos_;
            if (eat(']'))
                return v;
            do
                v.items.push_back(value());
            while (eat(','));
            expect(']');
        } else if (c == '"') {
            v.kind = json::type::string;
            v.text = string();
        } else if (word("true") || word("false")) {
            v.kind = json::type::boolean;
            v.flag = c == 't';
        } else if (word("null")) {
            v.kind = json::type::null;
        } else {
            const std::size_t begin = pos_;
            while (pos_ < s_.size() && std::string("+-0123456789.eE").find(s_[pos_]) != std::string::npos)
                ++pos_;
            const std::string token = s_.substr(begin, pos_ - begin);
            char* end = nullptr;
            v.kind = json::type::number;
            v.number = token.empty() ? 0 : std::strtod(token.c_str(), &end);
            if (token.empty() || end != token.c_str() + token.size())
                fail("bad number '" + token + "'");
        }
        return v;
    }

    const std::string& s_;
    std::size_t pos_ = 0;
};

// ---- running the tool ----

struct run_result {
    int status = -1; // the exit status; -signal when a signal ended it
    std::string out;
    std::string err;
};

std::string quoted(const std::string& arg)
{
    std::string q = "'";
    for (char c : arg)
        q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

std::string slurp(const fs::path& file)
{
    std::ifstream in(file, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

// A scratch directory for profiles, the tool's stderr and SVG files, removed afterwards.
class scratch : public gradsync_test::scratch_dir {
public:
    scratch() : scratch_dir("gradsync_plan_tool_") {}

    fs::path write(const std::string& name, const std::string& text) const
    {
        const fs::path path = file(name);
        std::ofstream(path, std::ios::binary) << text;
        return path;
    }

    // Standard input from `input` when given; killed by timeout(1) after `limit_s` seconds
    // when given, which makes the status 124.
    run_result run(const std::vector<std::string>& args, const std::string& input = {}, int limit_s = 0) const
    {
        std::string command = limit_s > 0 ? "timeout " + std::to_string(limit_s) + " " : std::string();
        command.append(quoted(GRADSYNC_PLAN_EXE));
        for (const auto& a : args)
            command.append(" ").append(quoted(a));
        const fs::path err = file("stderr.txt");
        command.append(" 2>").append(quoted(err.string()));
        if (!input.empty())
            command.append(" <").append(quoted(input));
        run_result r;
        FILE* pipe = ::popen(command.c_str(), "r");
        if (pipe == nullptr)
            throw std::runtime_error("popen failed for " + command);
        char buffer[4096];
        for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;)
            r.out.append(buffer, n);
        const int wait_status = ::pclose(pipe);
        if (wait_status == -1)
            throw std::runtime_error("pclose failed for " + command);
        if (WIFSIGNALED(wait_status))
            r.status = -WTERMSIG(wait_status);
        else if (WEXITSTATUS(wait_status) > 128) // the shell reports a signal that ended the tool
            r.status = -(WEXITSTATUS(wait_status) - 128);
        else
            r.status = WEXITSTATUS(wait_status);
        r.err = slurp(err);
        return r;
    }

};

// ---- random profiles ----

struct rng {
    std::uint64_t state;
    std::uint64_t next()
    {
        std::uint64_t x = (state += 0x9e3779b97f4a7c15ull);
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        return x ^ (x >> 31);
    }
    std::uint64_t below(std::uint64_t n) { return next() % n; }
};

struct sample_profile {
    std::vector<plan_ref::layer> layers;
    std::string csv;
};

// Times are whole microseconds written as milliseconds with three decimals, as profilers
// print them. The reference takes the decimal value of that text in seconds, rounded once.
sample_profile random_profile(std::uint64_t seed, std::size_t L)
{
    rng g{seed};
    sample_profile out;
    const bool reordered = g.below(2) == 0; // columns in another order, plus an ignored one
    const bool with_forward = g.below(2) == 0;
    const std::string eol = g.below(3) == 0 ? "\r\n" : "\n";
    out.csv = reordered ? std::string("backward_ms,comment,name,params") : std::string("name,params");
    if (!reordered)
        out.csv += with_forward ? ",forward_ms,backward_ms" : ",backward_ms";
    for (std::size_t l = 0; l < L; ++l) {
        const std::uint64_t kind = g.below(100);
        std::uint64_t params = 0;
        if (kind < 12)
            params = 0;
        else if (kind < 18)
            params = 5'000'000 + g.below(120'000'000); // a huge layer (a VGG-like classifier)
        else if (kind < 60)
            params = 1000 + g.below(1'000'000);
        else
            params = 1 + g.below(2000);
        const std::uint64_t micros = g.below(20) == 0 ? 0 : g.below(30'000);
        char ms[32];
        std::snprintf(ms, sizeof ms, "%llu.%03llu", static_cast<unsigned long long>(micros / 1000),
                      static_cast<unsigned long long>(micros % 1000));
        const std::string name = "layer" + std::to_string(l) + ".weight";
        out.csv += eol;
        if (reordered)
            out.csv += std::string(ms) + ",x y," + name + "," + std::to_string(params);
        else
            out.csv += name + "," + std::to_string(params) + (with_forward ? ",1.250," : ",") + ms;
        out.layers.push_back({params, std::strtod((std::string(ms) + "e-3").c_str(), nullptr)});
    }
    if (g.below(2) == 0)
        out.csv += eol;
    return out;
}

std::string number(double x)
{
    char text[40];
    std::snprintf(text, sizeof text, "%.17g", x);
    return text;
}

bool close_to(double x, double y, double rel = 1e-9)
{
    return std::abs(x - y) <= rel * std::max(std::abs(x), std::abs(y)) + 1e-300;
}

plan_ref::groups groups_of(const json& array)
{
    plan_ref::groups out;
    for (const json& g : array.items) {
        std::vector<std::size_t> layers;
        for (const json& l : g.items)
            layers.push_back(std::size_t(l.num()));
        out.push_back(layers);
    }
    return out;
}

// Every layer exactly once; each group a run of consecutive ascending indices; groups in
// backward order.
bool valid_partition(const plan_ref::groups& plan, std::size_t layers)
{
    std::size_t next_top = layers; // the next group must end just below this
    for (const auto& g : plan) {
        if (g.empty() || g.back() + 1 != next_top)
            return false;
        for (std::size_t i = 1; i < g.size(); ++i)
            if (g[i] != g[i - 1] + 1)
                return false;
        next_top = g.front();
    }
    return next_top == 0;
}

std::string describe(const plan_ref::groups& plan)
{
    std::string s;
    for (const auto& g : plan)
        s.append("[").append(std::to_string(g.front())).append("..").append(std::to_string(g.back())).append("]");
    return s;
}

struct cost_case {
    const char* regime;
    double alpha;
    double beta;
};

const std::vector<cost_case> cost_cases{
    {"compute-bound", 1e-6, 1e-12},
    {"10 GbE ring, N = 4", 6 * 45.26e-6, 1.5 * 0.8e-9},
    {"communication-bound", 5e-3, 2e-8},
    {"start-up only", 1e-3, 0},
    {"bandwidth only", 0, 5e-9},
};

constexpr std::uint64_t bucket_cap = 26214400; // --compare's 25 MB bucket

} // namespace

TEST_CASE("reference optimum: the envelope recursion equals exhaustive enumeration", "[plan_tool]")
{
    for (std::uint64_t seed = 1; seed <= 60; ++seed) {
        const std::size_t L = 1 + std::size_t(seed % 12);
        const sample_profile prof = random_profile(seed, L);
        for (const cost_case& c : cost_cases) {
            const plan_ref::cost t{c.alpha, c.beta};
            const double exhaustive = plan_ref::optimum_exhaustive(prof.layers, t, 4);
            const double envelope = plan_ref::optimum_envelope(prof.layers, t, 4);
            const double greedy = plan_ref::simulate(prof.layers, plan_ref::mgwfbp(prof.layers, t, 4), t, 4).predicted;
            INFO("seed " << seed << ", L = " << L << ", " << c.regime);
            CHECK(close_to(envelope, exhaustive, 1e-12));
            CHECK(exhaustive <= greedy * (1 + 1e-12));
            CHECK(exhaustive >= plan_ref::backward_total(prof.layers));
        }
    }
}

TEST_CASE("every planner's JSON agrees with the reference on random profiles", "[plan_tool]")
{
    const scratch dir;
    const std::vector<std::size_t> sizes{1, 2, 3, 4, 6, 9, 13, 14, 20, 31, 45, 60};
    int runs = 0;
    for (std::size_t s = 0; s < sizes.size() * 2; ++s) {
        const std::size_t L = sizes[s % sizes.size()];
        const std::uint64_t seed = 1000 + s;
        const sample_profile prof = random_profile(seed, L);
        const fs::path csv = dir.write("random_" + std::to_string(seed) + ".csv", prof.csv);
        const std::size_t bpe = s % 3 == 2 ? 2 : 4;
        for (const cost_case& c : cost_cases) {
            INFO("seed " << seed << ", L = " << L << ", " << c.regime << ", bytes per element " << bpe << "\n"
                         << prof.csv);
            const plan_ref::cost t{c.alpha, c.beta};
            const run_result r = dir.run({"--profile", csv.string(), "--alpha", number(c.alpha), "--beta",
                                          number(c.beta), "--bytes-per-element", std::to_string(bpe),
                                          "--compare", "--json"});
            ++runs;
            INFO("stderr: " << r.err);
            REQUIRE(r.status == 0);
            const json out = json_reader::parse(r.out);

            const double optimum = plan_ref::optimum_envelope(prof.layers, t, bpe);
            if (L <= 14)
                REQUIRE(close_to(optimum, plan_ref::optimum_exhaustive(prof.layers, t, bpe), 1e-12));
            const plan_ref::groups greedy = plan_ref::mgwfbp(prof.layers, t, bpe);

            // The chosen plan (optimal by default) with its details.
            CHECK(out["method"].str() == "optimal");
            CHECK(out["layers"].num() == double(L));
            CHECK(out["bytes_per_element"].num() == double(bpe));
            CHECK(out["alpha"].num() == c.alpha);
            CHECK(out["beta"].num() == c.beta);
            CHECK(close_to(out["backward_s"].num(), plan_ref::backward_total(prof.layers)));
            const plan_ref::groups chosen = groups_of(out["groups"]);
            REQUIRE(valid_partition(chosen, L));
            const plan_ref::result sim = plan_ref::simulate(prof.layers, chosen, t, bpe);
            CHECK(close_to(out["predicted_s"].num(), sim.predicted));
            CHECK(close_to(out["predicted_s"].num(), optimum));
            REQUIRE(out["group_bytes"].items.size() == chosen.size());
            REQUIRE(out["group_start_s"].items.size() == chosen.size());
            REQUIRE(out["group_end_s"].items.size() == chosen.size());
            for (std::size_t g = 0; g < chosen.size(); ++g) {
                CHECK(out["group_bytes"].at(g).num() == double(plan_ref::bytes_of(prof.layers, chosen[g], bpe)));
                // An empty group costs nothing; where it sits on the time line does not matter.
                if (plan_ref::bytes_of(prof.layers, chosen[g], bpe) == 0)
                    continue;
                CHECK(close_to(out["group_start_s"].at(g).num(), sim.spans[g].start));
                CHECK(close_to(out["group_end_s"].at(g).num(), sim.spans[g].end));
            }

            // Every planner of the comparison.
            const json& compare = out["compare"];
            std::vector<std::string> methods;
            double wfbp_time = 0;
            for (const json& m : compare.items) {
                const std::string method = m["method"].str();
                methods.push_back(method);
                const plan_ref::groups plan = groups_of(m["groups"]);
                INFO(method << ": " << describe(plan));
                REQUIRE(valid_partition(plan, L));
                CHECK(m["group_count"].num() == double(plan.size()));
                const double predicted = m["predicted_s"].num();
                CHECK(close_to(predicted, plan_ref::simulate(prof.layers, plan, t, bpe).predicted));
                CHECK(predicted >= optimum * (1 - 1e-12));
                if (method == "wfbp") {
                    CHECK(plan == plan_ref::wfbp(L));
                    wfbp_time = predicted;
                } else if (method == "single") {
                    CHECK(plan == plan_ref::single(L));
                } else if (method == "bucket:" + std::to_string(bucket_cap)) {
                    CHECK(plan == plan_ref::bucket(prof.layers, bucket_cap, bpe));
                } else if (method == "mgwfbp") {
                    INFO("reference: " << describe(greedy));
                    CHECK(plan == greedy);
                } else if (method == "optimal") {
                    CHECK(close_to(predicted, optimum));
                }
                CHECK(close_to(m["speedup_vs_wfbp"].num(), predicted > 0 ? wfbp_time / predicted : 1.0));
            }
            CHECK(methods == std::vector<std::string>{"wfbp", "single", "bucket:26214400", "mgwfbp", "optimal"});
        }
    }
    CHECK(runs == int(sizes.size() * 2 * cost_cases.size()));
}

TEST_CASE("one planner by --method, the text summary, --compare and --svg", "[plan_tool]")
{
    const scratch dir;
    const sample_profile prof = random_profile(7, 40);
    const fs::path csv = dir.write("profile.csv", prof.csv);
    const cost_case c = cost_cases[1];
    const plan_ref::cost t{c.alpha, c.beta};
    const std::vector<std::string> base{"--profile", csv.string(), "--alpha", number(c.alpha), "--beta", number(c.beta)};
    auto with = [&](std::vector<std::string> extra) {
        std::vector<std::string> args = base;
        args.insert(args.end(), extra.begin(), extra.end());
        return dir.run(args);
    };

    SECTION("--method NAME --json prints that planner's groups")
    {
        // A cap met exactly by the last two layers: a bucket closes when it reaches the cap.
        const std::uint64_t exact = (prof.layers[39].params + prof.layers[38].params) * 4;
        REQUIRE(exact > 0);
        const std::vector<std::pair<std::string, plan_ref::groups>> expected{
            {"wfbp", plan_ref::wfbp(40)},
            {"single", plan_ref::single(40)},
            {"mgwfbp", plan_ref::mgwfbp(prof.layers, t, 4)},
            {"bucket:1000000", plan_ref::bucket(prof.layers, 1000000, 4)},
            {"bucket:1", plan_ref::bucket(prof.layers, 1, 4)},
            {"bucket:" + std::to_string(exact), plan_ref::bucket(prof.layers, exact, 4)},
        };
        for (const auto& [method, groups] : expected) {
            INFO(method);
            const run_result r = with({"--method", method, "--json"});
            INFO("stderr: " << r.err);
            REQUIRE(r.status == 0);
            const json out = json_reader::parse(r.out);
            CHECK(out["method"].str() == method);
            CHECK(groups_of(out["groups"]) == groups);
            CHECK(close_to(out["predicted_s"].num(), plan_ref::simulate(prof.layers, groups, t, 4).predicted));
            CHECK_FALSE(out.has("compare"));
        }
    }
    SECTION("the text summary lists each group and the predicted time")
    {
        const run_result json_run = with({"--method", "mgwfbp", "--json"});
        REQUIRE(json_run.status == 0);
        const json out = json_reader::parse(json_run.out);
        const run_result r = with({"--method", "mgwfbp"});
        INFO(r.out << r.err);
        REQUIRE(r.status == 0);
        CHECK(r.err.empty());
        CHECK_THAT(r.out, Contains("mgwfbp"));
        CHECK_THAT(r.out, Contains("groups: " + std::to_string(out["groups"].items.size())));
        char predicted[64];
        std::snprintf(predicted, sizeof predicted, "predicted: %.6f s", out["predicted_s"].num());
        CHECK_THAT(r.out, Contains(predicted));
        const plan_ref::groups groups = groups_of(out["groups"]);
        for (const auto& g : groups)
            CHECK_THAT(r.out, Contains(std::to_string(g.back()) + ".." + std::to_string(g.front())));
    }
    SECTION("--compare prints a row per planner")
    {
        const run_result r = with({"--compare"});
        INFO(r.out << r.err);
        REQUIRE(r.status == 0);
        for (const char* method : {"wfbp", "single", "bucket:26214400", "mgwfbp", "optimal"})
            CHECK_THAT(r.out, Contains(method));
    }
    SECTION("--svg writes an SVG document")
    {
        const fs::path svg = dir.file("timeline.svg");
        const run_result r = with({"--svg", svg.string(), "--json"});
        INFO(r.err);
        REQUIRE(r.status == 0);
        CHECK(json_reader::parse(r.out)["method"].str() == "optimal");
        const std::string text = slurp(svg);
        CHECK_THAT(text, Contains("<svg"));
        CHECK_THAT(text, Contains("</svg>"));
    }
    SECTION("a profile without layers gives an empty plan")
    {
        const fs::path empty = dir.write("no_layers.csv", "name,params,backward_ms\n");
        const run_result r = dir.run({"--profile", empty.string(), "--alpha", "1e-5", "--beta", "1e-9", "--compare",
                                      "--json"});
        INFO(r.err);
        REQUIRE(r.status == 0);
        const json out = json_reader::parse(r.out);
        CHECK(out["layers"].num() == 0);
        CHECK(out["groups"].items.empty());
        CHECK(out["predicted_s"].num() == 0);
        CHECK(out["compare"].items.size() == 5);
    }
    SECTION("--help prints the usage and succeeds")
    {
        const run_result r = dir.run({"--help"});
        REQUIRE(r.status == 0);
        CHECK_THAT(r.out, Contains("--profile"));
        CHECK_THAT(r.out, Contains("--method"));
    }
}

TEST_CASE("malformed profiles exit with status 2 naming file:line:", "[plan_tool]")
{
    const scratch dir;
    struct bad_profile {
        const char* what;
        std::string text;
        int line;
    };
    const std::vector<bad_profile> cases{
        {"empty file", "", 1},
        {"header only, blank", "\n", 1},
        {"missing backward_ms column", "name,params,forward_ms\nconv,10,1.0\n", 1},
        {"missing params column", "name,backward_ms\nconv,1.0\n", 1},
        {"duplicate column", "name,params,backward_ms,params\nconv,1,1.0,1\n", 1},
        {"wrong field count", "name,params,backward_ms\nconv,1,1.0\nfc,2\nout,3,1.0\n", 3},
        {"too many fields", "name,params,backward_ms\nconv,1,1.0,7\n", 2},
        {"params not a number", "name,params,backward_ms\nconv,1,1.0\nfc,12x,2.0\n", 3},
        {"params with a decimal point", "name,params,backward_ms\nconv,1.5,1.0\n", 2},
        {"params with a sign", "name,params,backward_ms\nconv,1,1.0\nbn,+4,1.0\nfc,2,1\n", 3},
        {"negative params", "name,params,backward_ms\nconv,-3,1.0\n", 2},
        {"params out of range", "name,params,backward_ms\nconv,99999999999999999999999,1.0\n", 2},
        {"negative time", "name,params,backward_ms\nconv,1,1.0\nbn,2,0.5\nfc,3,-1.5\n", 4},
        {"NaN time", "name,params,backward_ms\nconv,1,nan\n", 2},
        {"infinite time", "name,params,forward_ms,backward_ms\nconv,1,1,1\nfc,1,inf,1\n", 3},
        {"time beyond a double", "name,params,backward_ms\nconv,1,1e400\n", 2},
        {"empty time", "name,params,backward_ms\nconv,1,\n", 2},
        {"quoted field", "name,params,backward_ms\n\"conv\",1,1.0\n", 2},
        {"bad number after CRLF lines", "name,params,backward_ms\r\nconv,1,1.0\r\nfc,2,x\r\n", 3},
    };
    for (const bad_profile& c : cases) {
        INFO(c.what);
        const fs::path csv = dir.write("bad.csv", c.text);
        const run_result r = dir.run({"--profile", csv.string(), "--alpha", "1e-5", "--beta", "1e-9"});
        INFO("stderr: " << r.err);
        CHECK(r.status == 2);
        CHECK(r.out.empty());
        CHECK_THAT(r.err, Contains(csv.string() + ":" + std::to_string(c.line) + ":"));
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    }
    SECTION("a file that cannot be opened is named")
    {
        const std::string missing = dir.file("no_such_profile.csv").string();
        const run_result r = dir.run({"--profile", missing, "--alpha", "1e-5", "--beta", "1e-9"});
        CHECK(r.status == 2);
        CHECK_THAT(r.err, Contains(missing));
    }
}

TEST_CASE("bad flags exit with status 2 and one line naming the problem", "[plan_tool]")
{
    const scratch dir;
    const std::string csv = dir.write("ok.csv", "name,params,backward_ms\nconv,10,1.0\nfc,20,2.0\n").string();
    const std::string unwritable = dir.file("no_such_dir/timeline.svg").string();
    struct bad_flags {
        std::vector<std::string> args;
        std::string named;
    };
    const std::vector<bad_flags> cases{
        {{}, "--profile"},
        {{"--alpha", "1e-5", "--beta", "1e-9"}, "--profile"},
        {{"--profile", csv, "--beta", "1e-9"}, "--alpha"},
        {{"--profile", csv, "--alpha", "1e-5"}, "--beta"},
        {{"--profile", csv, "--alpha", "1e-5", "--beta", "1e-9", "--bogus"}, "--bogus"},
        {{"--profile", csv, "--alpha", "1e-5", "--beta", "1e-9", "extra"}, "extra"},
        {{"--profile", csv, "--beta", "1e-9", "--alpha"}, "--alpha"},
        {{"--profile"}, "--profile"},
        {{"--profile", csv, "--alpha", "1e-5x", "--beta", "1e-9"}, "1e-5x"},
        {{"--profile", csv, "--alpha", "", "--beta", "1e-9"}, "--alpha"},
        {{"--profile", csv, "--alpha", "-1e-5", "--beta", "1e-9"}, "--alpha"},
        {{"--profile", csv, "--alpha", "1e-5", "--beta", "inf"}, "--beta"},
        {{"--profile", csv, "--alpha", "nan", "--beta", "1e-9"}, "--alpha"},
        {{"--profile", csv, "--alpha", "1e999", "--beta", "1e-9"}, "--alpha"},
        {{"--profile", csv, "--alpha", "1e-5", "--beta", "1e-9", "--bytes-per-element", "0"}, "--bytes-per-element"},
        {{"--profile", csv, "--alpha", "1e-5", "--beta", "1e-9", "--bytes-per-element", "four"}, "--bytes-per-element"},
        {{"--profile", csv, "--alpha", "1e-5", "--beta", "1e-9", "--method", "fastest"}, "fastest"},
        {{"--profile", csv, "--alpha", "1e-5", "--beta", "1e-9", "--method", "bucket:"}, "bucket:"},
        {{"--profile", csv, "--alpha", "1e-5", "--beta", "1e-9", "--method", "bucket:0"}, "bucket:0"},
        {{"--profile", csv, "--alpha", "1e-5", "--beta", "1e-9", "--method", "bucket:-5"}, "bucket:-5"},
        {{"--profile", csv, "--alpha", "1e-5", "--beta", "1e-9", "--method", "bucket:2.5"}, "bucket:2.5"},
        {{"--profile", csv, "--alpha", "1e-5", "--beta", "1e-9", "--svg", unwritable}, unwritable},
        {{"--profile", csv, "--alpha", "1e308", "--beta", "1e308"}, "overflows"},
    };
    for (const bad_flags& c : cases) {
        std::string line;
        for (const auto& a : c.args)
            line += " " + a;
        INFO("gradsync-plan" << line);
        const run_result r = dir.run(c.args);
        INFO("stderr: " << r.err);
        CHECK(r.status == 2);
        CHECK(r.out.empty());
        CHECK_THAT(r.err, Contains(c.named));
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    }
}

TEST_CASE("hostile profiles are refused promptly, with one short line naming file and place", "[plan_tool]")
{
    const scratch dir;
    constexpr int limit_s = 60; // a hang or an endless read fails here instead of filling memory
    auto refuse = [&](const std::string& profile, const std::string& named, const std::string& input = {}) {
        INFO("--profile " << profile << (input.empty() ? "" : " <" + input));
        const run_result r = dir.run({"--profile", profile, "--alpha", "1e-5", "--beta", "1e-9"}, input, limit_s);
        INFO("stderr: " << r.err.substr(0, 400));
        CHECK(r.status == 2);
        CHECK(r.out.empty());
        CHECK_THAT(r.err, Contains(named));
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
        CHECK(r.err.size() < 300);
        return r.err;
    };

    SECTION("files that are not regular files are refused before reading")
    {
        refuse("/dev/zero", "/dev/zero: is a character device, not a regular file");
        const fs::path sub = dir.file("a_directory");
        fs::create_directories(sub);
        refuse(sub.string(), sub.string() + ": is a directory, not a regular file");
        const fs::path fifo = dir.file("a_fifo"); // opening it would wait for a writer
        REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
        refuse(fifo.string(), fifo.string() + ": is a FIFO (named pipe), not a regular file");
    }
    SECTION("standard input without end: NUL bytes refused on the first")
    {
        refuse("-", "<stdin>:1:1: NUL byte (a profile is text)", "/dev/zero");
    }
    SECTION("a line beyond 64 KiB: a 10 MB field, a 100 000-column header")
    {
        const fs::path field =
            dir.write("field.csv", "name,params,backward_ms\nconv," + std::string(10 << 20, '7') + ",1\n");
        refuse(field.string(), field.string() + ":2:65537: line is longer than the limit of 65536 bytes");
        std::string header = "name,params,backward_ms";
        for (int c = 3; c < 100000; ++c)
            header += ",column" + std::to_string(c);
        const fs::path wide = dir.write("wide.csv", header + "\nconv,1,1\n");
        refuse(wide.string(), wide.string() + ":1:65537: line is longer than the limit of 65536 bytes");
        std::string columns = "name,params,backward_ms";
        for (int c = 3; c < 300; ++c)
            columns += ",c" + std::to_string(c);
        const fs::path many = dir.write("many.csv", columns + "\n");
        CHECK_THAT(refuse(many.string(), many.string() + ":1:"),
                   Contains("header has more than 256 columns, the limit"));
    }
    SECTION("NUL and control bytes: named by place, escaped, the message whole")
    {
        const fs::path nul = dir.write("nul.csv", std::string("name,params,backward_ms\nco\0nv,1,1\n", 34));
        refuse(nul.string(), nul.string() + ":2:3: NUL byte (a profile is text)");
        const fs::path control = dir.write("control.csv", "name,params,backward_ms\nconv,\x1b[2J\x7f\xc3\xa9,1\n");
        const std::string err =
            refuse(control.string(), control.string() + ":2:6: params '\\x1b[2J\\x7f\\xc3\\xa9' is not");
        CHECK(std::all_of(err.begin(), err.end(), [](char c) { return c == '\n' || (c >= 0x20 && c < 0x7f); }));
    }
    SECTION("a long field within the line limit is quoted cut short")
    {
        const fs::path big = dir.write("big.csv", "name,params,backward_ms\nconv,1," + std::string(60000, '5') + "x\n");
        refuse(big.string(),
               big.string() + ":2:8: backward_ms '" + std::string(40, '5') + "...' (60001 bytes) is not a number");
    }
}

TEST_CASE("standard input through --profile -", "[plan_tool]")
{
    const scratch dir;
    const sample_profile prof = random_profile(11, 30);
    const fs::path csv = dir.write("profile.csv", prof.csv);
    const std::vector<std::string> cost{"--alpha", number(cost_cases[2].alpha), "--beta", number(cost_cases[2].beta),
                                        "--json", "--compare"};
    std::vector<std::string> from_file{"--profile", csv.string()}, from_stdin{"--profile", "-"};
    from_file.insert(from_file.end(), cost.begin(), cost.end());
    from_stdin.insert(from_stdin.end(), cost.begin(), cost.end());
    const run_result file_run = dir.run(from_file);
    const run_result stdin_run = dir.run(from_stdin, csv.string());
    INFO("stderr: " << stdin_run.err);
    REQUIRE(file_run.status == 0);
    REQUIRE(stdin_run.status == 0);
    CHECK(stdin_run.err.empty());
    const json by_file = json_reader::parse(file_run.out), by_stdin = json_reader::parse(stdin_run.out);
    CHECK(by_stdin["profile"].str() == "-");
    CHECK(by_stdin["predicted_s"].num() == by_file["predicted_s"].num());
    CHECK(groups_of(by_stdin["groups"]) == groups_of(by_file["groups"]));
    CHECK(by_stdin["compare"].items.size() == 5);

    const fs::path bad = dir.write("bad.csv", "name,params,backward_ms\nconv,1,x\n");
    const run_result r = dir.run({"--profile", "-", "--alpha", "1e-5", "--beta", "1e-9"}, bad.string());
    CHECK(r.status == 2);
    CHECK_THAT(r.err, Contains("<stdin>:2:8: backward_ms 'x' is not a number"));
}

TEST_CASE("huge times print with six significant digits, ordinary ones with six decimals", "[plan_tool]")
{
    const scratch dir;
    const fs::path huge = dir.write("huge.csv", "name,params,backward_ms\nconv,1000,1e303\nfc,10,2.5e302\n");
    const run_result r = dir.run({"--profile", huge.string(), "--alpha", "1e-5", "--beta", "1e-9", "--compare"});
    INFO(r.out << r.err);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, Contains("backward: 1.25e+300 s"));
    CHECK_THAT(r.out, Contains("predicted: 1.25e+300 s"));
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);)
        CHECK(line.size() < 80);

    const fs::path plain = dir.write("plain.csv", "name,params,backward_ms\nconv,1000,12.5\nfc,10,1234.5678\n");
    const run_result p = dir.run({"--profile", plain.string(), "--alpha", "1e-3", "--beta", "1e-9"});
    REQUIRE(p.status == 0);
    CHECK_THAT(p.out, Contains("backward: 1.247068 s"));
    CHECK_THAT(p.out, Contains("predicted: 1.248072 s (0.001004 s of communication not hidden by backward)"));
}

TEST_CASE("beyond 10000 layers optimal runs only when named, with a note before planning", "[plan_tool]")
{
    const scratch dir;
    const cost_case c = cost_cases[1];
    const std::vector<std::string> cost{"--alpha", number(c.alpha), "--beta", number(c.beta), "--json"};
    auto plan = [&](const fs::path& csv, std::vector<std::string> extra) {
        std::vector<std::string> args{"--profile", csv.string()};
        args.insert(args.end(), cost.begin(), cost.end());
        args.insert(args.end(), extra.begin(), extra.end());
        return dir.run(args);
    };
    const fs::path beyond = dir.write("beyond.csv", random_profile(22, 10001).csv);
    const run_result greedy = plan(beyond, {"--method", "mgwfbp"});
    REQUIRE(greedy.status == 0);
    CHECK(greedy.err.empty());

    SECTION("up to 10000 layers optimal is the default, without a note")
    {
        const run_result r = plan(dir.write("at_limit.csv", random_profile(21, 10000).csv), {});
        REQUIRE(r.status == 0);
        CHECK(r.err.empty());
        CHECK(json_reader::parse(r.out)["method"].str() == "optimal");
    }
    SECTION("the default falls back to mgwfbp, and says so")
    {
        const run_result r = plan(beyond, {});
        INFO(r.err);
        REQUIRE(r.status == 0);
        CHECK(r.err == "gradsync-plan: note: 10001 layers: optimal tries about 5e+07 split points, a number that "
                       "grows with the square of the layers; beyond 10000 layers it runs only when --method names "
                       "it, so mgwfbp plans instead\n");
        CHECK(r.out == greedy.out);
    }
    SECTION("--compare leaves optimal out, and says so")
    {
        const run_result r = plan(beyond, {"--compare"});
        INFO(r.err);
        REQUIRE(r.status == 0);
        CHECK_THAT(r.err, Contains("mgwfbp plans instead and --compare leaves optimal out"));
        const json out = json_reader::parse(r.out);
        CHECK(out["method"].str() == "mgwfbp");
        std::vector<std::string> methods;
        for (const json& m : out["compare"].items)
            methods.push_back(m["method"].str());
        CHECK(methods == std::vector<std::string>{"wfbp", "single", "bucket:26214400", "mgwfbp"});
    }
    SECTION("--method optimal runs it, after a note of its cost")
    {
        const run_result r = plan(beyond, {"--method", "optimal", "--compare"});
        INFO(r.err);
        REQUIRE(r.status == 0);
        CHECK(r.err == "gradsync-plan: note: 10001 layers: optimal tries about 5e+07 split points, a number that "
                       "grows with the square of the layers; it can take minutes (mgwfbp plans in linear time)\n");
        const json out = json_reader::parse(r.out);
        CHECK(out["method"].str() == "optimal");
        REQUIRE(out["compare"].items.size() == 5);
        CHECK(out["compare"].at(4)["predicted_s"].num() == out["predicted_s"].num());
        CHECK(out["predicted_s"].num() <= json_reader::parse(greedy.out)["predicted_s"].num());
    }
}
