// The cost formulas have one source: the `// cost:` line at the top of each algorithm's
// header. This test reads those lines, evaluates them, and checks that the planner's cost
// models (planner/cost_model.hpp) give the same a + b*M, so that neither can change alone.
//
// Variables of a formula: N ranks, P the largest power of two <= N, F = 1 when N is not a
// power of two (else 0), M bytes per rank, L layers, k ranks per node, alpha, beta, gamma
// (per message, per byte sent, per byte combined; inside a node for hierarchical) and
// alpha_x, beta_x, gamma_x (between nodes). For hierarchical, P and F are those of the N/k
// nodes, as its header says.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstddef>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <gradsync/planner/cost_model.hpp>

#ifndef GRADSYNC_INCLUDE_DIR
#error "GRADSYNC_INCLUDE_DIR must name the include directory"
#endif

namespace {

namespace gp = gradsync::planner;
using variables = std::map<std::string, double>;

// Recursive descent over
//   sum     = product {("+" | "-") product}
//   product = unary {("*" | "/") unary}
//   unary   = "-" unary | primary
//   primary = number | name | "log2" "(" sum ")" | "(" sum ")"
// Anything else (an unknown name or function, a stray character) throws, naming where.
class evaluator {
public:
    evaluator(std::string text, const variables& vars) : text_(std::move(text)), vars_(vars) {}

    double evaluate()
    {
        pos_ = 0;
        const double v = sum();
        skip_space();
        if (pos_ != text_.size())
            fail("unexpected character");
        return v;
    }

private:
    double sum()
    {
        double v = product();
        for (;;) {
            if (take('+'))
                v += product();
            else if (take('-'))
                v -= product();
            else
                return v;
        }
    }

    double product()
    {
        double v = unary();
        for (;;) {
            if (take('*'))
                v *= unary();
            else if (take('/'))
                v /= unary();
            else
                return v;
        }
    }

    double unary() { return take('-') ? -unary() : primary(); }

    double primary()
    {
        skip_space();
        if (take('(')) {
            const double v = sum();
            expect(')');
            return v;
        }
        if (pos_ < text_.size() && (std::isdigit(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '.')) {
            std::size_t used = 0;
            const double v = std::stod(text_.substr(pos_), &used);
            pos_ += used;
            return v;
        }
        const std::string name = identifier();
        if (name.empty())
            fail("expected a number, a name or '('");
        if (name == "log2") {
            expect('(');
            const double v = sum();
            expect(')');
            return std::log2(v);
        }
        const auto it = vars_.find(name);
        if (it == vars_.end())
            fail("unknown name '" + name + "'");
        return it->second;
    }

    std::string identifier()
    {
        const std::size_t begin = pos_;
        while (pos_ < text_.size() &&
               (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_'))
            ++pos_;
        return text_.substr(begin, pos_ - begin);
    }

    void skip_space()
    {
        while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_])))
            ++pos_;
    }

    bool take(char c)
    {
        skip_space();
        if (pos_ < text_.size() && text_[pos_] == c) {
            ++pos_;
            return true;
        }
        return false;
    }

    void expect(char c)
    {
        if (!take(c))
            fail(std::string("expected '") + c + "'");
    }

    [[noreturn]] void fail(const std::string& what) const
    {
        throw std::runtime_error(what + " at column " + std::to_string(pos_) + " of \"" + text_ + "\"");
    }

    std::string text_;
    const variables& vars_;
    std::size_t pos_ = 0;
};

double evaluate(const std::string& formula, const variables& vars) { return evaluator(formula, vars).evaluate(); }

// The expression of the header's one `// cost:` line; throws when there is none or several.
std::string cost_line(const std::string& header)
{
    const std::string path = std::string(GRADSYNC_INCLUDE_DIR) + "/gradsync/algorithm/" + header;
    std::ifstream in(path);
    if (!in)
        throw std::runtime_error("cannot read " + path);
    const std::string marker = "// cost:";
    std::vector<std::string> found;
    for (std::string line; std::getline(in, line);) {
        const std::size_t at = line.find_first_not_of(" \t");
        if (at != std::string::npos && line.compare(at, marker.size(), marker) == 0)
            found.push_back(line.substr(at + marker.size()));
    }
    if (found.size() != 1)
        throw std::runtime_error(path + " has " + std::to_string(found.size()) + " '// cost:' lines, not 1");
    return found.front();
}

bool close(double x, double y) { return std::abs(x - y) <= 1e-12 * std::max(std::abs(x), std::abs(y)); }

// Log-uniform link parameters over several decades, so every term weighs in somewhere.
gp::link_parameters random_link(std::mt19937_64& rng)
{
    std::uniform_real_distribution<double> e(0.0, 1.0);
    auto between = [&](double lo, double hi) { return lo * std::pow(hi / lo, e(rng)); };
    return {between(1e-7, 1e-3), between(1e-12, 1e-8), between(1e-13, 1e-9)};
}

// P and F of n ranks.
void set_power_of_two(variables& v, int n)
{
    v["P"] = double(std::bit_floor(unsigned(n)));
    v["F"] = std::has_single_bit(unsigned(n)) ? 0.0 : 1.0;
}

struct formula_case {
    const char* header;
    bool hierarchical; // k and the inter-node link vary; P and F are the nodes'
    // The model's cost for N ranks, k per node, L layers and the two links.
    std::function<gp::linear_cost(int n, int k, std::size_t layers, const gp::link_parameters& intra,
                                  const gp::link_parameters& inter)>
        model;
};

const std::vector<formula_case> cases{
    {"ring.hpp", false, [](int n, int, std::size_t, const auto& l, const auto&) { return gp::ring_cost(l, n); }},
    {"recursive_halving.hpp", false,
     [](int n, int, std::size_t, const auto& l, const auto&) { return gp::recursive_halving_cost(l, n); }},
    {"recursive_doubling.hpp", false,
     [](int n, int, std::size_t, const auto& l, const auto&) { return gp::recursive_doubling_cost(l, n); }},
    {"hierarchical.hpp", true,
     [](int n, int k, std::size_t, const auto& l, const auto& x) { return gp::hierarchical_cost(l, x, n, k); }},
    {"adasum_recursive_halving.hpp", false,
     [](int n, int, std::size_t layers, const auto& l, const auto&) {
         return gp::recursive_halving_adasum_cost(l, n, layers);
     }},
    {"adasum_ring.hpp", false,
     [](int n, int, std::size_t layers, const auto& l, const auto&) { return gp::ring_adasum_cost(l, n, layers); }},
    {"adasum_recursive_doubling.hpp", false,
     [](int n, int, std::size_t, const auto& l, const auto&) { return gp::recursive_doubling_adasum_cost(l, n); }},
    {"shared_memory.hpp", false,
     [](int n, int, std::size_t, const auto& l, const auto&) { return gp::shared_memory_cost(l, n); }},
    {"adasum_shared_memory.hpp", false,
     [](int n, int, std::size_t layers, const auto& l, const auto&) {
         return gp::shared_memory_adasum_cost(l, n, layers);
     }},
    {"binomial_tree.hpp", false,
     [](int n, int, std::size_t, const auto& l, const auto&) { return gp::binomial_tree_cost(l, n); }},
    {"scatter_allgather.hpp", false,
     [](int n, int, std::size_t, const auto& l, const auto&) { return gp::scatter_allgather_cost(l, n); }},
    {"ring_allgather.hpp", false,
     [](int n, int, std::size_t, const auto& l, const auto&) { return gp::block_per_peer_cost(l, n); }},
    {"bruck_allgather.hpp", false,
     [](int n, int, std::size_t, const auto& l, const auto&) { return gp::bruck_allgather_cost(l, n); }},
    {"linear_gather.hpp", false,
     [](int n, int, std::size_t, const auto& l, const auto&) { return gp::block_per_peer_cost(l, n); }},
    {"linear_scatter.hpp", false,
     [](int n, int, std::size_t, const auto& l, const auto&) { return gp::block_per_peer_cost(l, n); }},
    {"pairwise_exchange.hpp", false,
     [](int n, int, std::size_t, const auto& l, const auto&) { return gp::block_per_peer_cost(l, n); }},
};

// The first (N, k, L, links, M) at which the formula and the model differ, described, or ""
// when they agree everywhere. N = 1..16 (k every divisor of N for hierarchical), L = 1 and 7,
// three random pairs of links each, M from one byte to 350 MB.
std::string first_mismatch(const formula_case& c, const std::string& formula, std::mt19937_64& rng)
{
    const std::vector<double> sizes{1, 4096, 1e6 + 3, 3.5e8};
    for (int n = 1; n <= 16; ++n)
        for (int k = 1; k <= (c.hierarchical ? n : 1); ++k) {
            if (n % k != 0)
                continue;
            for (std::size_t layers : {std::size_t(1), std::size_t(7)})
                for (int trial = 0; trial < 3; ++trial) {
                    const gp::link_parameters intra = random_link(rng), inter = random_link(rng);
                    const gp::linear_cost model = c.model(n, k, layers, intra, inter);
                    variables v{{"N", double(n)},         {"k", double(k)},        {"L", double(layers)},
                                {"alpha", intra.alpha},   {"beta", intra.beta},    {"gamma", intra.gamma},
                                {"alpha_x", inter.alpha}, {"beta_x", inter.beta}, {"gamma_x", inter.gamma}};
                    set_power_of_two(v, c.hierarchical ? n / k : n);
                    for (double m : sizes) {
                        v["M"] = m;
                        const double header = evaluate(formula, v), planner = model.a + model.b * m;
                        if (!close(header, planner)) {
                            std::ostringstream out;
                            out.precision(17);
                            out << "N = " << n << ", k = " << k << ", L = " << layers << ", M = " << m
                                << ", alpha = " << intra.alpha << ", beta = " << intra.beta
                                << ", gamma = " << intra.gamma << ", alpha_x = " << inter.alpha
                                << ", beta_x = " << inter.beta << ", gamma_x = " << inter.gamma << ": header "
                                << header << " s, cost model a + b*M = " << planner << " s";
                            return out.str();
                        }
                    }
                }
        }
    return "";
}

} // namespace

TEST_CASE("the evaluator reads the formula grammar and refuses anything else", "[cost_formulas]")
{
    const variables v{{"N", 6}, {"P", 4}, {"alpha_x", 0.5}};
    CHECK(evaluate("2*(N-1)/N", v) == Approx(10.0 / 6).epsilon(1e-15));
    CHECK(evaluate(" log2(P) * (log2(P)+1)/2 ", v) == 3.0);
    CHECK(evaluate("-N + 2.5e1 - -1", v) == 20.0);
    CHECK(evaluate("alpha_x*N/P/2", v) == 0.375);
    CHECK_THROWS_WITH(evaluate("2*Q", v), Catch::Matchers::Contains("unknown name 'Q'"));
    CHECK_THROWS_WITH(evaluate("log(P)", v), Catch::Matchers::Contains("unknown name 'log'"));
    CHECK_THROWS_WITH(evaluate("(N", v), Catch::Matchers::Contains("expected ')'"));
    CHECK_THROWS_WITH(evaluate("N N", v), Catch::Matchers::Contains("unexpected character"));
    CHECK_THROWS_WITH(evaluate("N^2", v), Catch::Matchers::Contains("unexpected character"));
}

TEST_CASE("every algorithm header's cost line equals its planner cost model", "[cost_formulas]")
{
    std::mt19937_64 rng(20240611);
    for (const formula_case& c : cases) {
        INFO(c.header);
        std::string formula, mismatch;
        bool checked = false;
        // An unreadable header or formula fails here, naming it, and the others are still checked.
        CHECK_NOTHROW((formula = cost_line(c.header), mismatch = first_mismatch(c, formula, rng), checked = true));
        if (!checked)
            continue;
        INFO("cost:" << formula);
        INFO(mismatch);
        CHECK(mismatch.empty());
    }
}

TEST_CASE("the new cost models validate their arguments as the others do", "[cost_formulas]")
{
    const gp::link_parameters ok{1e-5, 1e-9, 1e-10}, negative{1e-5, -1e-9, 0};
    CHECK_THROWS_AS(gp::recursive_doubling_cost(ok, 0), gradsync::usage_error);
    CHECK_THROWS_AS(gp::recursive_doubling_cost(negative, 2), gradsync::usage_error);
    CHECK_THROWS_AS(gp::ring_adasum_cost(ok, 0, 1), gradsync::usage_error);
    CHECK_THROWS_AS(gp::ring_adasum_cost(negative, 2, 1), gradsync::usage_error);
    CHECK_THROWS_AS(gp::recursive_doubling_adasum_cost(ok, -1), gradsync::usage_error);
    CHECK_THROWS_AS(gp::recursive_doubling_adasum_cost(negative, 2), gradsync::usage_error);
    CHECK_THROWS_AS(gp::binomial_tree_cost(ok, 0), gradsync::usage_error);
    CHECK_THROWS_AS(gp::scatter_allgather_cost(negative, 2), gradsync::usage_error);
    CHECK_THROWS_AS(gp::shared_memory_cost(ok, 0), gradsync::usage_error);
    CHECK_THROWS_AS(gp::shared_memory_cost(negative, 2), gradsync::usage_error);
    CHECK(gp::shared_memory_cost(ok, 1).a == 0.0);
    CHECK_THROWS_AS(gp::shared_memory_adasum_cost(ok, 0, 1), gradsync::usage_error);
    CHECK_THROWS_AS(gp::shared_memory_adasum_cost(negative, 2, 1), gradsync::usage_error);
    CHECK(gp::shared_memory_adasum_cost(ok, 1, 5).a == 0.0);
    CHECK_THROWS_AS(gp::block_per_peer_cost(ok, 0), gradsync::usage_error);
    CHECK_THROWS_AS(gp::bruck_allgather_cost(negative, 2), gradsync::usage_error);
    CHECK(gp::block_per_peer_cost(ok, 1).a == 0.0);
    CHECK(gp::bruck_allgather_cost(ok, 1).b == 0.0);
    CHECK(gp::binomial_tree_cost(ok, 1).a == 0.0);
    CHECK(gp::scatter_allgather_cost(ok, 1).b == 0.0);
    CHECK(gp::recursive_doubling_cost(ok, 1).a == 0.0);
    CHECK(gp::recursive_doubling_cost(ok, 1).b == 0.0);
}
