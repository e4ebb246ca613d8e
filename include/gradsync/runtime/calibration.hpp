// Calibration of the planner's cost model on the machine at hand: times the library's own
// reducer<T, C, Policy, Algorithm> at each element count and fits T(M) = a + b*M by least
// squares (fit_linear_cost). The only planner header that communicates.
//
// Per size: one reducer (planned once), one untimed warm-up run, then `repetitions` runs
// timed on the transport's clock (clock_of<C>: std::chrono::steady_clock, or a simulator's
// simulated seconds, comm/mpi/detail/simulation.hpp); this rank's sample is their median.
// The per-rank medians (one double per size) are then averaged over the ranks with the
// library's allreduce, so every rank fits identical samples and returns the identical fit.
// The buffer is refilled before every run (untimed), so Sum never overflows to infinity.
//
// Collective: every rank calls it with the same sizes and repetitions. Cost: the sizes'
// allreduces, (repetitions + 1) each, plus one small allreduce to check the arguments and
// one to average the medians. usage_error (on every rank) for repetitions < 1, a zero
// element count, or fewer than 2 distinct counts on any rank; mismatch_error when ranks
// disagree on repetitions or on the sizes.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <gradsync/collective/allreduce.hpp>
#include <gradsync/comm/communicator.hpp>
#include <gradsync/core/error.hpp>
#include <gradsync/core/types.hpp>
#include <gradsync/planner/cost_model.hpp>
#include <gradsync/policy/sum.hpp>
#include <gradsync/selector/automatic.hpp>

namespace gradsync::planner {

// Element counts to calibrate for a model of `total` elements: 1 024 and 16 384 (a small
// layer's), then 1/64, 1/16, 1/4 and all of the model. Plans of one allreduce per layer are
// priced by the intercept, which sizes from a fraction of the model up do not pin down.
inline std::vector<std::size_t> model_counts(std::size_t total)
{
    std::vector<std::size_t> counts{1024, 16384};
    for (std::size_t d : {64, 16, 4, 1})
        counts.push_back(std::max<std::size_t>(total / d, 1));
    return counts;
}

template <element T, communicator C, class Policy = sum, class Algorithm = automatic>
fit_result calibrate(C& comm, std::span<const std::size_t> element_counts, int repetitions, Policy = {},
                     Algorithm algorithm = {})
{
    const std::string who = "gradsync::planner::calibrate (" + where(comm) + "): ";
    std::string invalid;
    if (repetitions < 1)
        invalid = "repetitions must be at least 1, got " + std::to_string(repetitions);
    else if (std::find(element_counts.begin(), element_counts.end(), std::size_t(0)) != element_counts.end())
        invalid = "element counts must be positive (the model prices an empty allreduce at 0)";
    else if (std::set<std::size_t>(element_counts.begin(), element_counts.end()).size() < 2)
        invalid = "need at least 2 distinct element counts to fit a line";

    // Every rank learns every rank's validity, repetitions and number of sizes (slot per
    // rank, summed exactly), so bad arguments anywhere end in an exception everywhere.
    const int n = comm.size(), me = comm.rank();
    std::vector<double> args(3 * std::size_t(n), 0.0);
    args[std::size_t(me)] = invalid.empty() ? 0.0 : 1.0;
    args[std::size_t(n + me)] = repetitions;
    args[std::size_t(2 * n + me)] = double(element_counts.size());
    allreduce(comm, std::span<double>(args), sum{});
    if (!invalid.empty())
        throw usage_error(who + invalid);
    for (int r = 0; r < n; ++r) {
        if (args[std::size_t(r)] != 0)
            throw usage_error(who + "rank " + std::to_string(r) + " passed invalid arguments (see its error)");
        for (int k : {1, 2})
            if (args[std::size_t(k * n + r)] != args[std::size_t(k * n)])
                throw mismatch_error(who + "ranks disagree on " + (k == 1 ? "repetitions" : "the number of sizes") +
                                     ": rank 0 has " + std::to_string(args[std::size_t(k * n)]) + ", rank " +
                                     std::to_string(r) + " has " + std::to_string(args[std::size_t(k * n + r)]));
    }

    std::vector<double> medians;
    std::vector<T> data(*std::max_element(element_counts.begin(), element_counts.end()));
    std::vector<double> seconds(static_cast<std::size_t>(repetitions));
    for (std::size_t count : element_counts) {
        reducer<T, C, Policy, Algorithm> reduce(comm, count, algorithm); // checks that ranks agree on count
        const std::span<T> v(data.data(), count);
        const auto refill = [&] {
            for (std::size_t i = 0; i < count; ++i)
                v[i] = T(float(1 + (i + std::size_t(me)) % 8) * 0.125f);
        };
        refill();
        reduce(v);
        for (double& s : seconds) {
            refill();
            const auto start = clock_of<C>::now();
            reduce(v);
            s = std::chrono::duration<double>(clock_of<C>::now() - start).count();
        }
        std::sort(seconds.begin(), seconds.end());
        const std::size_t m = seconds.size();
        medians.push_back(m % 2 ? seconds[m / 2] : 0.5 * (seconds[m / 2 - 1] + seconds[m / 2]));
    }
    allreduce(comm, std::span<double>(medians), average{});

    std::vector<std::pair<double, double>> samples;
    for (std::size_t i = 0; i < element_counts.size(); ++i)
        samples.emplace_back(double(element_counts[i]) * double(sizeof(T)), medians[i]);
    return fit_linear_cost(samples);
}

} // namespace gradsync::planner
