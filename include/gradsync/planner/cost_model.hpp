// The planner's cost of one allreduce (or broadcast, allgather, gather, scatter or all-to-all)
// of M bytes: T(M) = a + b*M for M > 0, T(0) = 0, with
// a (seconds) and b (seconds per byte) derived from link parameters per algorithm, or fitted
// by least squares to measured (bytes, seconds) samples.
//
// Link parameters (the classic alpha-beta-gamma model): alpha seconds per message, beta
// seconds per byte sent, gamma seconds per byte combined. The formulas are those at the top
// of each algorithm's header (the `// cost:` line of include/gradsync/algorithm/*.hpp); a is
// their part without M, b their coefficient of M. tests/test_cost_formulas.cpp checks that
// these functions agree.
//
// The Adasum costs hold a term per layer (the triple exchanges), so a plan using one prices
// every group as if it held `layers` layers.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <set>
#include <span>
#include <string>
#include <utility>

#include <gradsync/core/error.hpp>

namespace gradsync::planner {

struct linear_cost {
    double a = 0; // seconds per allreduce
    double b = 0; // seconds per byte

    double operator()(double bytes) const { return bytes > 0 ? a + b * bytes : 0.0; }
};

struct link_parameters {
    double alpha = 0; // seconds per message
    double beta = 0;  // seconds per byte sent
    double gamma = 0; // seconds per byte combined
};

// usage_error unless a and b are finite and non-negative (a negative cost would let a
// communication end before it starts).
inline void validate_cost(const linear_cost& c)
{
    if (!(std::isfinite(c.a) && std::isfinite(c.b) && c.a >= 0 && c.b >= 0))
        throw usage_error("gradsync::planner: cost model a = " + std::to_string(c.a) + " s, b = " +
                          std::to_string(c.b) + " s/byte; both must be finite and non-negative");
}

namespace detail {

inline void check_link(const link_parameters& l, const char* who)
{
    if (!(std::isfinite(l.alpha) && std::isfinite(l.beta) && std::isfinite(l.gamma) && l.alpha >= 0 && l.beta >= 0 &&
          l.gamma >= 0))
        throw usage_error(std::string(who) + ": link parameters alpha = " + std::to_string(l.alpha) + ", beta = " +
                          std::to_string(l.beta) + ", gamma = " + std::to_string(l.gamma) +
                          " must be finite and non-negative");
}

inline void check_ranks(int ranks, const char* who)
{
    if (ranks < 1)
        throw usage_error(std::string(who) + ": ranks must be at least 1, got " + std::to_string(ranks));
}

// log2(P) for P the largest power of two <= ranks, and whether ranks folds (is not P).
inline double steps(int ranks) { return std::countr_zero(std::bit_floor(unsigned(ranks))); }
inline bool folds(int ranks) { return !std::has_single_bit(unsigned(ranks)); }

// Folding (recursive halving and doubling, N not a power of two): rank 2i hands its vector
// to rank 2i+1, which combines it and sends the result back.
inline void add_folding(linear_cost& c, const link_parameters& link, int ranks)
{
    if (folds(ranks)) {
        c.a += 2 * link.alpha;
        c.b += 2 * link.beta + link.gamma;
    }
}

// Adasum combines each byte twice (the triples, then the scaled add).
inline link_parameters adasum_link(const link_parameters& link)
{
    link_parameters twice = link;
    twice.gamma *= 2;
    return twice;
}

} // namespace detail

inline linear_cost ring_cost(const link_parameters& link, int ranks)
{
    detail::check_link(link, "gradsync::planner::ring_cost");
    detail::check_ranks(ranks, "gradsync::planner::ring_cost");
    const double n = ranks, f = (n - 1) / n;
    return {2 * (n - 1) * link.alpha, 2 * f * link.beta + f * link.gamma};
}

inline linear_cost recursive_halving_cost(const link_parameters& link, int ranks)
{
    detail::check_link(link, "gradsync::planner::recursive_halving_cost");
    detail::check_ranks(ranks, "gradsync::planner::recursive_halving_cost");
    const unsigned p = std::bit_floor(unsigned(ranks));
    const double f = (double(p) - 1) / double(p);
    linear_cost c{2 * detail::steps(ranks) * link.alpha, 2 * f * link.beta + f * link.gamma};
    detail::add_folding(c, link, ranks);
    return c;
}

inline linear_cost recursive_doubling_cost(const link_parameters& link, int ranks)
{
    detail::check_link(link, "gradsync::planner::recursive_doubling_cost");
    detail::check_ranks(ranks, "gradsync::planner::recursive_doubling_cost");
    const double steps = detail::steps(ranks);
    linear_cost c{steps * link.alpha, steps * (link.beta + link.gamma)};
    detail::add_folding(c, link, ranks);
    return c;
}

// shared_memory over the host's memory as the link: alpha a flag, beta a byte copied, gamma a
// byte combined; the gradients in the plan's buffer.
inline linear_cost shared_memory_cost(const link_parameters& link, int ranks)
{
    detail::check_link(link, "gradsync::planner::shared_memory_cost");
    detail::check_ranks(ranks, "gradsync::planner::shared_memory_cost");
    const double n = ranks, f = (n - 1) / n;
    return {2 * (n - 1) * link.alpha, f * link.beta + f * link.gamma};
}

// Adasum over shared memory (adasum_shared_memory.hpp): the ring's chains, a flag per link
// from each peer and its 24 bytes of triples per layer, each byte combined twice.
inline linear_cost shared_memory_adasum_cost(const link_parameters& link, int ranks, std::size_t layers)
{
    detail::check_link(link, "gradsync::planner::shared_memory_adasum_cost");
    detail::check_ranks(ranks, "gradsync::planner::shared_memory_adasum_cost");
    const double n = ranks, f = (n - 1) / n;
    return {(n + 1) * (n - 1) * link.alpha + (n - 1) * (n - 1) * 24.0 * double(layers) * link.beta,
            f * link.beta + 2 * f * link.gamma};
}

inline linear_cost hierarchical_cost(const link_parameters& intra, const link_parameters& inter, int ranks,
                                     int ranks_per_node)
{
    detail::check_link(intra, "gradsync::planner::hierarchical_cost (intra-node)");
    detail::check_link(inter, "gradsync::planner::hierarchical_cost (inter-node)");
    detail::check_ranks(ranks, "gradsync::planner::hierarchical_cost");
    if (ranks_per_node < 1 || ranks % ranks_per_node != 0)
        throw usage_error("gradsync::planner::hierarchical_cost: ranks_per_node " + std::to_string(ranks_per_node) +
                          " must be positive and divide the " + std::to_string(ranks) + " ranks");
    const double k = ranks_per_node, f = (k - 1) / k;
    const linear_cost between = recursive_halving_cost(inter, ranks / ranks_per_node);
    return {2 * (k - 1) * intra.alpha + between.a, 2 * f * intra.beta + f * intra.gamma + between.b / k};
}

inline linear_cost recursive_halving_adasum_cost(const link_parameters& link, int ranks, std::size_t layers)
{
    detail::check_link(link, "gradsync::planner::recursive_halving_adasum_cost");
    detail::check_ranks(ranks, "gradsync::planner::recursive_halving_adasum_cost");
    linear_cost c = recursive_halving_cost(detail::adasum_link(link), ranks);
    const double steps = detail::steps(ranks);
    c.a += steps * (steps + 1) / 2 * (link.alpha + 24.0 * double(layers) * link.beta);
    return c;
}

inline linear_cost ring_adasum_cost(const link_parameters& link, int ranks, std::size_t layers)
{
    detail::check_link(link, "gradsync::planner::ring_adasum_cost");
    detail::check_ranks(ranks, "gradsync::planner::ring_adasum_cost");
    linear_cost c = ring_cost(detail::adasum_link(link), ranks);
    // Each of the N-1 links sums the triples by recursive doubling: log2(P) + 2F messages.
    const double messages = detail::steps(ranks) + (detail::folds(ranks) ? 2 : 0);
    c.a += double(ranks - 1) * messages * (link.alpha + 24.0 * double(layers) * link.beta);
    return c;
}

inline linear_cost recursive_doubling_adasum_cost(const link_parameters& link, int ranks)
{
    detail::check_link(link, "gradsync::planner::recursive_doubling_adasum_cost");
    detail::check_ranks(ranks, "gradsync::planner::recursive_doubling_adasum_cost");
    return recursive_doubling_cost(detail::adasum_link(link), ranks);
}

// Broadcasts (binomial_tree.hpp, scatter_allgather.hpp): nothing is combined, so gamma does
// not appear; ceil(log2 N) is log2(P) plus one where N folds.
inline linear_cost binomial_tree_cost(const link_parameters& link, int ranks)
{
    detail::check_link(link, "gradsync::planner::binomial_tree_cost");
    detail::check_ranks(ranks, "gradsync::planner::binomial_tree_cost");
    const double depth = detail::steps(ranks) + (detail::folds(ranks) ? 1 : 0);
    return {depth * link.alpha, depth * link.beta};
}

inline linear_cost scatter_allgather_cost(const link_parameters& link, int ranks)
{
    detail::check_link(link, "gradsync::planner::scatter_allgather_cost");
    detail::check_ranks(ranks, "gradsync::planner::scatter_allgather_cost");
    const double n = ranks, depth = detail::steps(ranks) + (detail::folds(ranks) ? 1 : 0);
    return {(depth + n - 1) * link.alpha, 2 * (n - 1) / n * link.beta};
}

// One block (M/N bytes, M the bytes of N blocks) to or from each of the N-1 other ranks, one
// message after another at the busiest rank: the ring allgather, the linear gather and
// scatter at their root, the pairwise all-to-all.
inline linear_cost block_per_peer_cost(const link_parameters& link, int ranks)
{
    detail::check_link(link, "gradsync::planner::block_per_peer_cost");
    detail::check_ranks(ranks, "gradsync::planner::block_per_peer_cost");
    const double n = ranks;
    return {(n - 1) * link.alpha, (n - 1) / n * link.beta};
}

inline linear_cost bruck_allgather_cost(const link_parameters& link, int ranks)
{
    detail::check_link(link, "gradsync::planner::bruck_allgather_cost");
    detail::check_ranks(ranks, "gradsync::planner::bruck_allgather_cost");
    const double n = ranks, depth = detail::steps(ranks) + (detail::folds(ranks) ? 1 : 0);
    return {depth * link.alpha, (n - 1) / n * link.beta};
}

struct fit_result {
    linear_cost cost;
    double residual_rms_s = 0; // root mean square of (measured - fitted) seconds
};

// Ordinary least squares of seconds = a + b*bytes over (bytes, seconds) samples. a is not
// clamped: a negative intercept says the samples do not look linear near zero.
// usage_error for non-finite or negative samples or fewer than 2 distinct sizes.
inline fit_result fit_linear_cost(std::span<const std::pair<double, double>> samples)
{
    std::set<double> sizes;
    for (std::size_t i = 0; i < samples.size(); ++i) {
        const auto [x, y] = samples[i];
        if (!(std::isfinite(x) && std::isfinite(y) && x >= 0 && y >= 0))
            throw usage_error("gradsync::planner::fit_linear_cost: sample " + std::to_string(i) + " (" +
                              std::to_string(x) + " bytes, " + std::to_string(y) +
                              " s) must be finite and non-negative");
        sizes.insert(x);
    }
    if (sizes.size() < 2)
        throw usage_error("gradsync::planner::fit_linear_cost: need samples of at least 2 distinct sizes, got " +
                          std::to_string(sizes.size()));
    // Centred sums: exact for noiseless samples up to rounding, stable for large sizes.
    const double n = double(samples.size());
    double mx = 0, my = 0;
    for (const auto& [x, y] : samples) {
        mx += x;
        my += y;
    }
    mx /= n;
    my /= n;
    double sxx = 0, sxy = 0;
    for (const auto& [x, y] : samples) {
        sxx += (x - mx) * (x - mx);
        sxy += (x - mx) * (y - my);
    }
    fit_result r;
    r.cost.b = sxy / sxx;
    r.cost.a = my - r.cost.b * mx;
    double sse = 0;
    for (const auto& [x, y] : samples) {
        const double e = y - (r.cost.a + r.cost.b * x);
        sse += e * e;
    }
    r.residual_rms_s = std::sqrt(sse / n);
    return r;
}

} // namespace gradsync::planner
