// The broadcast plan contract, beside the allreduce one (plan/plan.hpp): what every broadcast plan
// provides, so that broadcaster and automatic_broadcast treat them alike.
//
//   P p(comm, count, root, plan_options<Algorithm>{algorithm, pipeline});
//   p.run(comm, data, tag); // root's data copied into every rank's data; allocates nothing
//   p.count()               // the elements it was planned for
//   p.root()                // the rank whose data it copies
// As for an allreduce plan, the schedule and request slots are computed when it is built,
// data is P::data_type (Memory::span<T>), every message carries `tag`, and building is
// local: the collective checks agreement first. A broadcast has no policy and no scratch:
// every rank receives into its own data.
//
// The rows: broadcast_row<Algorithm>::select<T, C, Memory>() names the plan of a broadcast
// algorithm in a memory (selector/plan_table.hpp holds them), and broadcast_plan_of looks it up.
#pragma once

#include <concepts>
#include <cstddef>

#include <gradsync/core/broadcast_element.hpp>
#include <gradsync/memory/host_memory.hpp>
#include <gradsync/plan/plan.hpp>

namespace gradsync {

template <class P>
concept broadcast_plan = std::destructible<P> &&
    std::constructible_from<P, typename P::communicator_type&, std::size_t, int,
                            const plan_options<typename P::algorithm_type>&> &&
    requires(P& p, const P& cp, typename P::communicator_type& comm, typename P::data_type data, int tag) {
        { cp.count() } -> std::same_as<std::size_t>;
        { cp.root() } -> std::same_as<int>;
        p.run(comm, data, tag);
    };

template <class Algorithm>
struct broadcast_row {
    static constexpr bool exists = false;
};

namespace detail {

// A class template, so that automatic_broadcast names its candidates before their rows are
// declared (as plan_lookup does for automatic).
template <broadcast_element T, class C, class Algorithm, class Memory>
struct broadcast_lookup {
    using type = typename decltype(broadcast_row<Algorithm>::template select<T, C, Memory>())::type;
};

} // namespace detail

template <broadcast_element T, class C, class Algorithm, class Memory = host_memory>
using broadcast_plan_of = typename detail::broadcast_lookup<T, C, Algorithm, Memory>::type;

} // namespace gradsync
