// The table: which plan runs an algorithm for a policy in a memory. The reducers, the
// synchronizer (through reducer), automatic and tuned (for their candidates) all choose plans
// here, by plan_of<T, Comm, Algorithm, Policy, Memory> (plan/plan.hpp); has_plan says whether
// there is one. Each algorithm has one row, a plan_row<Algorithm> specialisation whose
// select() names the plan per (policy, memory):
//
//   algorithm           elementwise (sum, average, ...)  adasum
//   ring                ring_plan                         adasum_ring_plan
//   recursive_halving   recursive_halving_plan            adasum_recursive_halving_plan
//   recursive_doubling  recursive_doubling_plan           adasum_recursive_doubling_plan
//   hierarchical        hierarchical_plan                 hierarchical_plan
//   automatic           automatic_plan wherever its three candidates have plans
//   tuned               tuned_plan (host memory only)     none (selector/tuned.hpp says why)
//   shared_memory       shared_memory_plan (host memory)  adasum_shared_memory_plan (host memory)
//   nccl_passthrough    (algorithm/nccl_passthrough.hpp: NCCL's memory only)
//
// Broadcasts have no policy: a broadcast_row<Algorithm> (plan/broadcast_plan.hpp) names one plan
// per memory, and every broadcast plan runs in every memory:
//
//   algorithm            every memory
//   binomial_tree        binomial_tree_plan
//   scatter_allgather    scatter_allgather_plan
//   automatic_broadcast  automatic_broadcast_plan
//
// Allgathers move raw bytes in host memory: an allgather_row<Algorithm> (plan/allgather_plan.hpp)
// names one plan per communicator:
//
//   algorithm            plan
//   ring_allgather       ring_allgather_plan
//   bruck_allgather      bruck_allgather_plan
//   automatic_allgather  automatic_allgather_plan
//
// Gather, scatter and all-to-all have one algorithm each (linear_gather, linear_scatter,
// pairwise_exchange), whose plan their collective names itself: no row.
//
// Every plan takes the memory as its last parameter (memory/host_memory.hpp): host memory or
// a memory space (memory/space_memory.hpp). An elementwise plan needs a memory whose kernels
// combine that policy for that element type (Memory::combines<Policy, T>: host memory for
// every elementwise policy, a memory space for sum and average of floating-point types);
// Adasum runs in every memory, for floating-point types (adasum_plan refuses integers). The row of
// an algorithm that needs an outside library lives in its own header, so that this table
// compiles without that library. docs/design.md shows how to add a row.
#pragma once

#include <concepts>
#include <cstdint>
#include <type_traits>

#include <gradsync/algorithm/adasum_recursive_doubling.hpp>
#include <gradsync/algorithm/adasum_recursive_halving.hpp>
#include <gradsync/algorithm/adasum_shared_memory.hpp>
#include <gradsync/algorithm/adasum_ring.hpp>
#include <gradsync/algorithm/binomial_tree.hpp>
#include <gradsync/algorithm/bruck_allgather.hpp>
#include <gradsync/algorithm/hierarchical.hpp>
#include <gradsync/algorithm/recursive_doubling.hpp>
#include <gradsync/algorithm/recursive_halving.hpp>
#include <gradsync/algorithm/ring.hpp>
#include <gradsync/algorithm/ring_allgather.hpp>
#include <gradsync/algorithm/scatter_allgather.hpp>
#include <gradsync/algorithm/shared_memory.hpp>
#include <gradsync/core/broadcast_element.hpp>
#include <gradsync/core/types.hpp>
#include <gradsync/memory/host_memory.hpp>
#include <gradsync/plan/allgather_plan.hpp>
#include <gradsync/plan/broadcast_plan.hpp>
#include <gradsync/plan/plan.hpp>
#include <gradsync/policy/adasum.hpp>
#include <gradsync/selector/automatic.hpp>
#include <gradsync/selector/automatic_allgather.hpp>
#include <gradsync/selector/automatic_broadcast.hpp>
#include <gradsync/selector/tuned.hpp>

namespace gradsync {

namespace detail {

// Every row names an Adasum plan through this, so that an integer element type stops here,
// with this message, before any plan is built for it.
template <class Plan, element T>
auto adasum_plan()
{
    static_assert(!std::integral<T>, "gradsync::adasum reduces floating-point elements only: its coefficients are "
                                     "real numbers, which an integer vector cannot be scaled by");
    return std::type_identity<Plan>{};
}

// The row of an algorithm with an elementwise plan and an Adasum plan for every memory.
template <template <class, class, class, class> class Elementwise, template <class, class, class> class Adasum>
struct elementwise_and_adasum_row {
    static constexpr bool exists = true;
    template <element T, class C, class Policy, class Memory>
    static auto select()
    {
        if constexpr (Memory::template combines<Policy, T>)
            return std::type_identity<Elementwise<T, C, Policy, Memory>>{};
        else if constexpr (is_adasum<Policy>)
            return adasum_plan<Adasum<T, C, Memory>, T>();
        else
            return std::type_identity<no_plan>{};
    }
};

template <class T, class C, class Memory>
using no_adasum_plan = no_plan;

// The row of an algorithm whose plans run in host memory only: Elementwise<T, C, Policy,
// host_memory> for an elementwise policy, Adasum<T, C, host_memory> for Adasum (none by
// default).
template <template <class, class, class, class> class Elementwise,
          template <class, class, class> class Adasum = no_adasum_plan>
struct host_memory_row {
    static constexpr bool exists = true;
    template <element T, class C, class Policy, class Memory>
    static auto select()
    {
        if constexpr (!std::is_same_v<Memory, host_memory>)
            return std::type_identity<no_plan>{};
        else if constexpr (Memory::template combines<Policy, T>)
            return std::type_identity<Elementwise<T, C, Policy, Memory>>{};
        else if constexpr (is_adasum<Policy>)
            return adasum_plan<Adasum<T, C, Memory>, T>();
        else
            return std::type_identity<no_plan>{};
    }
};

// The row of a broadcast algorithm whose one plan runs in every memory.
template <template <class, class, class> class Plan>
struct every_memory_row {
    static constexpr bool exists = true;
    template <broadcast_element T, class C, class Memory>
    static auto select()
    {
        return std::type_identity<Plan<T, C, Memory>>{};
    }
};

} // namespace detail

template <>
struct plan_row<ring> : detail::elementwise_and_adasum_row<ring_plan, adasum_ring_plan> {};

template <>
struct plan_row<recursive_halving>
    : detail::elementwise_and_adasum_row<recursive_halving_plan, adasum_recursive_halving_plan> {};

template <>
struct plan_row<recursive_doubling>
    : detail::elementwise_and_adasum_row<recursive_doubling_plan, adasum_recursive_doubling_plan> {};

template <>
struct plan_row<hierarchical> {
    static constexpr bool exists = true;
    template <element T, class C, class Policy, class Memory>
    static auto select()
    {
        if constexpr (Memory::template combines<Policy, T>)
            return std::type_identity<hierarchical_plan<T, C, Policy, Memory>>{};
        else if constexpr (is_adasum<Policy>)
            return detail::adasum_plan<hierarchical_plan<T, C, Policy, Memory>, T>();
        else
            return std::type_identity<no_plan>{};
    }
};

template <>
struct plan_row<shared_memory> : detail::host_memory_row<shared_memory_plan, adasum_shared_memory_plan> {};

template <>
struct plan_row<automatic> {
    static constexpr bool exists = true;
    template <element T, class C, class Policy, class Memory>
    static auto select()
    {
        if constexpr (has_plan<T, C, recursive_doubling, Policy, Memory> &&
                      has_plan<T, C, recursive_halving, Policy, Memory> && has_plan<T, C, ring, Policy, Memory>)
            return std::type_identity<automatic_plan<T, C, Policy, Memory>>{};
        else
            return std::type_identity<no_plan>{};
    }
};

template <>
struct plan_row<tuned> : detail::host_memory_row<tuned_plan> {};

template <>
struct broadcast_row<binomial_tree> : detail::every_memory_row<binomial_tree_plan> {};

template <>
struct broadcast_row<scatter_allgather> : detail::every_memory_row<scatter_allgather_plan> {};

template <>
struct broadcast_row<automatic_broadcast> : detail::every_memory_row<automatic_broadcast_plan> {};

namespace detail {

// The row of an allgather algorithm: its plan for every communicator.
template <template <class> class Plan>
struct allgather_plan_row {
    static constexpr bool exists = true;
    template <class C>
    static auto select()
    {
        return std::type_identity<Plan<C>>{};
    }
};

} // namespace detail

template <>
struct allgather_row<ring_allgather> : detail::allgather_plan_row<ring_allgather_plan> {};

template <>
struct allgather_row<bruck_allgather> : detail::allgather_plan_row<bruck_allgather_plan> {};

template <>
struct allgather_row<automatic_allgather> : detail::allgather_plan_row<automatic_allgather_plan> {};

// An algorithm: a type with a row in the table, a code and a name (what the agreement
// check compares and reports).
template <class A>
concept allreduce_algorithm = std::copyable<A> && plan_row<A>::exists && requires {
    { A::code } -> std::convertible_to<std::uint32_t>;
    { A::name } -> std::convertible_to<const char*>;
};

} // namespace gradsync
