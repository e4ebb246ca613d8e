// Independent reference for the planner tests: the model of docs/planner.md written out
// plainly, with no gradsync planner header included. Keep it that way: a reference that calls the code
// under test cannot catch that code's mistakes.
//
// The optimum is found by two methods unlike the library's forward DP: exhaustive enumeration
// of all 2^(L−1) contiguous partitions (small L), and a memoized recursion over the layers still
// to be sent that keeps, for each suffix, the exact lower envelope of its completion functions
// E ↦ max(E + C, D) as a Pareto set of (C, D) pairs (any L). The tests check that the two agree.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <utility>
#include <vector>

namespace plan_ref {

struct layer {
    std::uint64_t params = 0;
    double backward_s = 0;
};

// T(M) = a + b·M for M > 0 bytes, T(0) = 0.
struct cost {
    double a = 0;
    double b = 0;
    double operator()(double bytes) const { return bytes > 0 ? a + b * bytes : 0.0; }
};

// Groups in communication order, each listing forward-order layer indices in ascending order.
using groups = std::vector<std::vector<std::size_t>>;

// r(l) = Σ_{k ≥ l} tb(k): the time layer l's gradient is ready (0 = start of backward).
inline std::vector<double> ready_times(const std::vector<layer>& p)
{
    std::vector<double> r(p.size());
    double sum = 0;
    for (std::size_t l = p.size(); l-- > 0;) {
        sum += p[l].backward_s;
        r[l] = sum;
    }
    return r;
}

inline double backward_total(const std::vector<layer>& p) { return p.empty() ? 0.0 : ready_times(p)[0]; }

inline std::uint64_t bytes_of(const std::vector<layer>& p, const std::vector<std::size_t>& g, std::size_t bpe)
{
    std::uint64_t params = 0;
    for (std::size_t l : g)
        params += p[l].params;
    return params * bpe;
}

struct span {
    double start = 0;
    double end = 0;
};

struct result {
    std::vector<span> spans;
    double predicted = 0;
};

// Serialized communications: a group starts at max(end of the previous group, r(lowest layer
// of the group)) and lasts T(bytes). Predicted time = max(end of the last group, r(0)).
inline result simulate(const std::vector<layer>& p, const groups& plan, const cost& t, std::size_t bpe)
{
    const std::vector<double> r = ready_times(p);
    result out;
    double end = 0;
    for (const auto& g : plan) {
        const std::size_t lowest = *std::min_element(g.begin(), g.end());
        const double start = std::max(end, r[lowest]);
        end = start + t(double(bytes_of(p, g, bpe)));
        out.spans.push_back({start, end});
    }
    out.predicted = std::max(end, p.empty() ? 0.0 : r[0]);
    return out;
}

inline groups wfbp(std::size_t layers)
{
    groups out;
    for (std::size_t l = layers; l-- > 0;)
        out.push_back({l});
    return out;
}

inline groups single(std::size_t layers)
{
    std::vector<std::size_t> all(layers);
    for (std::size_t l = 0; l < layers; ++l)
        all[l] = l;
    return layers == 0 ? groups{} : groups{all};
}

// Fill in backward order; a group closes as soon as its bytes reach the cap.
inline groups bucket(const std::vector<layer>& p, std::uint64_t cap, std::size_t bpe)
{
    groups out;
    std::vector<std::size_t> current;
    std::uint64_t bytes = 0;
    for (std::size_t l = p.size(); l-- > 0;) {
        current.insert(current.begin(), l);
        bytes += p[l].params * bpe;
        if (bytes >= cap) {
            out.push_back(current);
            current.clear();
            bytes = 0;
        }
    }
    if (!current.empty())
        out.push_back(current);
    return out;
}

// MG-WFBP, Algorithm 1, exactly as docs/planner.md ("MG-WFBP, step by step") spells it (strict
// comparisons included).
inline groups mgwfbp(const std::vector<layer>& prof, const cost& t, std::size_t bpe)
{
    const std::size_t L = prof.size();
    if (L == 0)
        return {};
    std::vector<std::uint64_t> p(L);
    std::vector<double> tb(L), tc(L), taub(L), tauc(L);
    for (std::size_t l = 0; l < L; ++l) {
        p[l] = prof[l].params;
        tb[l] = prof[l].backward_s;
        tc[l] = t(double(p[l] * bpe));
    }
    taub[L - 1] = 0;
    for (std::size_t l = L - 1; l-- > 0;)
        taub[l] = taub[l + 1] + tb[l + 1];
    auto comm_starts = [&] {
        tauc[L - 1] = taub[L - 1] + tb[L - 1];
        for (std::size_t l = L - 1; l-- > 0;)
            tauc[l] = std::max(tauc[l + 1] + tc[l + 1], taub[l] + tb[l]);
    };
    comm_starts();

    groups out;
    std::vector<std::size_t> current;
    auto close = [&] {
        std::sort(current.begin(), current.end());
        out.push_back(current);
        current.clear();
    };
    for (std::size_t l = L - 1; l >= 1; --l) {
        current.push_back(l);
        const double ready = taub[l - 1] + tb[l - 1];
        if (ready < tauc[l] + tc[l] && (tauc[l] > ready || ready - tauc[l] < t.a)) {
            tc[l] = 0;
            p[l - 1] += p[l];
            p[l] = 0;
            tc[l - 1] = t(double(p[l - 1] * bpe));
            comm_starts();
        } else {
            close();
        }
    }
    current.push_back(0);
    close();
    return out;
}

// Every partition of L layers into contiguous groups: bit i of `cuts` set means layers i and
// i+1 are in different groups. Returns the smallest predicted time.
inline double optimum_exhaustive(const std::vector<layer>& p, const cost& t, std::size_t bpe)
{
    const std::size_t L = p.size();
    if (L == 0)
        return 0;
    if (L > 20)
        throw std::invalid_argument("optimum_exhaustive: too many layers to enumerate");
    double best = std::numeric_limits<double>::infinity();
    for (std::uint64_t cuts = 0; cuts < (std::uint64_t(1) << (L - 1)); ++cuts) {
        groups plan;
        std::vector<std::size_t> current{L - 1};
        for (std::size_t l = L - 1; l-- > 0;) {
            if ((cuts >> l) & 1u) {
                std::sort(current.begin(), current.end());
                plan.push_back(current);
                current.clear();
            }
            current.push_back(l);
        }
        std::sort(current.begin(), current.end());
        plan.push_back(current);
        best = std::min(best, simulate(p, plan, t, bpe).predicted);
    }
    return best;
}

// finish[j]: the ways to send layers 0..j−1 (the rest already sent, the last of it ending at
// E), each as the function E ↦ max(E + C, D) of the predicted time; only the Pareto-minimal
// (C, D) pairs are kept, which represent the minimum over all ways exactly.
// Sending layers i..j−1 as one group first turns a way (C, D) of finish[i] into
// (t + C, max(r(i) + t + C, D)), because that group ends at max(E, r(i)) + t.
inline double optimum_envelope(const std::vector<layer>& p, const cost& t, std::size_t bpe)
{
    using way = std::pair<double, double>; // (C, D)
    struct solver {
        const std::vector<layer>& p;
        const cost& t;
        std::size_t bpe;
        std::vector<double> r;
        std::vector<std::vector<way>> memo;
        std::vector<bool> known;

        const std::vector<way>& finish(std::size_t j)
        {
            if (known[j])
                return memo[j];
            std::vector<way> ways;
            if (j == 0) {
                ways.push_back({0.0, r[0]});
            } else {
                std::uint64_t params = 0;
                for (std::size_t i = j; i-- > 0;) {
                    params += p[i].params;
                    const double ti = t(double(params * bpe));
                    for (const way& w : finish(i))
                        ways.push_back({ti + w.first, std::max(r[i] + ti + w.first, w.second)});
                }
            }
            std::sort(ways.begin(), ways.end());
            for (const way& w : ways)
                if (memo[j].empty() || w.second < memo[j].back().second)
                    memo[j].push_back(w);
            known[j] = true;
            return memo[j];
        }
    };
    const std::size_t L = p.size();
    if (L == 0)
        return 0;
    solver s{p, t, bpe, ready_times(p), std::vector<std::vector<way>>(L + 1), std::vector<bool>(L + 1, false)};
    double best = std::numeric_limits<double>::infinity();
    for (const way& w : s.finish(L))
        best = std::min(best, std::max(w.first, w.second));
    return best;
}

} // namespace plan_ref
