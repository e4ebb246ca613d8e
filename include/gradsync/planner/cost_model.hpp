// The planner's cost of one allreduce of M bytes: T(M) = a + b*M for M > 0, T(0) = 0, with
// a (seconds) and b (seconds per byte) derived from link parameters per algorithm, or fitted
// by least squares to measured (bytes, seconds) samples.
//
// Link parameters (the classic alpha-beta-gamma model): alpha seconds per message, beta
// seconds per byte sent, gamma seconds per byte combined. With N ranks and P the largest
// power of two <= N:
//   ring                 a = 2(N-1) alpha
//                        b = 2(N-1)/N beta + (N-1)/N gamma
//   recursive halving    a = 2 log2(P) alpha
//                        b = 2(P-1)/P beta + (P-1)/P gamma
//     N not a power of two adds the folding (rank 2i hands its vector to 2i+1 and gets the
//     result back): 2 alpha to a, 2 beta + gamma to b.
//   hierarchical (k ranks per node, N/k nodes): ring reduce-scatter and allgather inside the
//     node over all M bytes, then recursive halving between nodes over the M/k shard:
//                        a = 2(k-1) alpha + a_rh(inter, N/k)
//                        b = 2(k-1)/k beta + (k-1)/k gamma + b_rh(inter, N/k)/k
//   Adasum by recursive halving over `layers` layers: every halving step s = 1..log2(P) is
//     followed by the exchange of one [a.b, a.a, b.b] triple (24 bytes) per layer within
//     the 2^s ranks sharing the vector, by recursive doubling (s messages), and combining
//     passes over the data twice (triples, then the scaled add), so gamma counts twice:
//                        a = a_rh + log2(P)(log2(P)+1)/2 (alpha + 24 layers beta)
//                        b = 2(P-1)/P beta + 2(P-1)/P gamma   (+ 2 beta + 2 gamma folding)
//     The triple term depends on the layer count of the group reduced, so a plan using this
//     cost prices every group as if it held `layers` layers.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <set>
#include <span>
#include <string>
#include <utility>

#include <gradsync/error.hpp>

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
    const double steps = std::countr_zero(p), f = (double(p) - 1) / double(p);
    linear_cost c{2 * steps * link.alpha, 2 * f * link.beta + f * link.gamma};
    if (unsigned(ranks) != p) {
        c.a += 2 * link.alpha;
        c.b += 2 * link.beta + link.gamma;
    }
    return c;
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
    link_parameters twice = link;
    twice.gamma *= 2;
    linear_cost c = recursive_halving_cost(twice, ranks);
    const double steps = std::countr_zero(std::bit_floor(unsigned(ranks)));
    c.a += steps * (steps + 1) / 2 * (link.alpha + 24.0 * double(layers) * link.beta);
    return c;
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
