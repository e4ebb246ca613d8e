// The plan contract: what every allreduce plan provides, so that the reducers, the
// synchronizer and automatic treat all plans alike (docs/design.md, "Plans").
//
// A plan is an algorithm's schedule, scratch buffers and request slots for one element type
// T, communicator C, policy and memory, computed once when it is built:
//   P p(comm, layout, plan_options<Algorithm>{algorithm, pipeline});
//   p.run(comm, data, tag); // reduces data in place; allocates nothing
//   p.count()               // the elements it was planned for
//   p.scratch_bytes()       // the scratch it holds
// The policy is a template parameter of the plan type, fixed when the table
// (selector/plan_table.hpp) chooses it; data is P::data_type (std::span<T> for host memory, a
// device_span for a memory space). Every message of a run carries `tag`, the call's tag
// (core/tags.hpp), which the reducer stamps with its identity and call number. Building a plan is
// local (shared_memory's alone sends messages, to make its shared region): the reducer checks
// that every rank builds the same one (collective/verify.hpp) before it builds it.
//
// Every plan's header includes this one, which brings what they all use: the communicator
// concept, layouts, element types, schedules, exchanges and host memory.
#pragma once

#include <concepts>
#include <cstddef>
#include <type_traits>

#include <gradsync/comm/communicator.hpp>
#include <gradsync/core/layout.hpp>
#include <gradsync/core/types.hpp>
#include <gradsync/memory/host_memory.hpp>
#include <gradsync/plan/exchange.hpp>
#include <gradsync/plan/schedule.hpp>

namespace gradsync {

class shared_buffer;

template <class Algorithm>
struct plan_options {
    Algorithm algorithm{};
    pipeline_options pipeline{};
    // Memory the data lies in, which shared-memory plans read in place on every rank
    // (comm/shared/buffer.hpp); other plans ignore it.
    const shared_buffer* shared = nullptr;
};

// Whether plans of `algorithm` may read data kept in a shared_buffer in place (the options'
// `shared`): the algorithm's answer, reads_shared_buffer(), where it has one; else no.
template <class Algorithm>
constexpr bool reads_shared_buffer(const Algorithm& algorithm) noexcept
{
    if constexpr (requires { { algorithm.reads_shared_buffer() } -> std::convertible_to<bool>; })
        return algorithm.reads_shared_buffer();
    else
        return false;
}

// The names a plan gives the contract; plans derive from it.
template <class Algorithm, class C, class Data>
struct plan_types {
    using algorithm_type = Algorithm;
    using communicator_type = C;
    using data_type = Data;
};

// The options of a plan that another plan runs inside it (automatic, hierarchical, Adasum's
// triple sums): the same pipeline and shared buffer, for Algorithm.
template <class Algorithm, class Other>
plan_options<Algorithm> options_for(const plan_options<Other>& o, Algorithm algorithm = {})
{
    return {algorithm, o.pipeline, o.shared};
}

template <class P>
concept reduction_plan = std::destructible<P> &&
    std::constructible_from<P, typename P::communicator_type&, const layer_layout&,
                            const plan_options<typename P::algorithm_type>&> &&
    requires(P& p, const P& cp, typename P::communicator_type& comm, typename P::data_type data, int tag) {
        { cp.count() } -> std::same_as<std::size_t>;
        { cp.scratch_bytes() } -> std::same_as<std::size_t>;
        p.run(comm, data, tag);
    };

// The table's rows (selector/plan_table.hpp): plan_row<Algorithm> says, in select<T, C, Policy,
// Memory>(), which plan runs that algorithm for the policy in that memory
// (std::type_identity<Plan>), or std::type_identity<no_plan> where none does.
template <class Algorithm>
struct plan_row {
    static constexpr bool exists = false;
};

struct no_plan {};

namespace detail {

// A class template, so that naming a plan inside another template (automatic_plan) looks up
// the row only when that template is instantiated, after every row is declared.
template <element T, class C, class Algorithm, class Policy, class Memory>
struct plan_lookup {
    using type = typename decltype(plan_row<Algorithm>::template select<T, C, Policy, Memory>())::type;
};

} // namespace detail

template <element T, class C, class Algorithm, class Policy, class Memory = host_memory>
using plan_of = typename detail::plan_lookup<T, C, Algorithm, Policy, Memory>::type;

template <element T, class C, class Algorithm, class Policy, class Memory = host_memory>
inline constexpr bool has_plan = [] {
    if constexpr (plan_row<Algorithm>::exists)
        return !std::is_same_v<plan_of<T, C, Algorithm, Policy, Memory>, no_plan>;
    else
        return false;
}();

} // namespace gradsync
