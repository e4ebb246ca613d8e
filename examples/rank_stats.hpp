// What the examples' studies do with per-rank timings: the median of a rank's samples, and
// a value averaged over every rank (so that all ranks report the same figure).
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include <gradsync/collective/allreduce.hpp>
#include <gradsync/comm/communicator.hpp>
#include <gradsync/policy/sum.hpp>

namespace gradsync_examples {

// The middle sample, or the mean of the two middle ones; 0 for none.
inline double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Collective: every rank calls it.
template <gradsync::communicator C>
double average_over_ranks(C& comm, double v)
{
    gradsync::allreduce(comm, std::span<double>(&v, 1), gradsync::average{});
    return v;
}

} // namespace gradsync_examples
