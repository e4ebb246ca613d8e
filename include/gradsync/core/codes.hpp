// Every algorithm's and reduction policy's code, in one place: the numbers ranks compare to
// agree on what runs (collective/verify.hpp) and the plan table's keys (selector/plan_table.hpp). Allreduce
// algorithms below 16, those that exist only on a GPU from 16, broadcasts from 32, the other
// data-movement collectives (allgather, gather, scatter, all-to-all) from 35. A code
// is never reused: the checks below fail to compile if two algorithms, or two policies,
// share one.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gradsync::codes {

// Algorithms: allreduce, GPU-only, broadcasts, data movement.
inline constexpr std::uint32_t automatic = 0, ring = 1, recursive_halving = 2, recursive_doubling = 3,
                               hierarchical = 4, tuned = 5, shared_memory = 6;
inline constexpr std::uint32_t nccl_passthrough = 16;
inline constexpr std::uint32_t automatic_broadcast = 32, binomial_tree = 33, scatter_allgather = 34;
inline constexpr std::uint32_t automatic_allgather = 35, ring_allgather = 36, bruck_allgather = 37, linear_gather = 38,
                               linear_scatter = 39, pairwise_exchange = 40;

// Reduction policies.
inline constexpr std::uint32_t sum = 1, average = 2, adasum = 3, minimum = 4, maximum = 5, product = 6,
                               bitwise_and = 7, bitwise_or = 8, bitwise_xor = 9;

namespace detail {

template <std::size_t N>
constexpr bool distinct(const std::uint32_t (&c)[N]) noexcept
{
    for (std::size_t i = 0; i < N; ++i)
        for (std::size_t j = i + 1; j < N; ++j)
            if (c[i] == c[j])
                return false;
    return true;
}

inline constexpr std::uint32_t algorithms[] = {automatic,         ring,          recursive_halving,
                                               recursive_doubling, hierarchical, tuned, shared_memory,
                                               nccl_passthrough,  automatic_broadcast, binomial_tree,
                                               scatter_allgather, automatic_allgather, ring_allgather,
                                               bruck_allgather,   linear_gather, linear_scatter, pairwise_exchange};
inline constexpr std::uint32_t policies[] = {sum,     average,     adasum,     minimum,    maximum,
                                             product, bitwise_and, bitwise_or, bitwise_xor};

} // namespace detail

static_assert(detail::distinct(detail::algorithms), "two algorithms share a code");
static_assert(detail::distinct(detail::policies), "two reduction policies share a code");

} // namespace gradsync::codes
