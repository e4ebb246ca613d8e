// The allgather plan contract, beside the allreduce and broadcast ones (plan/plan.hpp,
// plan/broadcast_plan.hpp): what every allgather plan provides, so that allgatherer and
// automatic_allgather treat them alike.
//
//   P p(comm, block_bytes, plan_options<Algorithm>{algorithm, pipeline});
//   p.run(comm, data, tag); // every rank's block into every rank's data; allocates nothing
//   p.count()               // bytes data holds: N * block_bytes
//   p.block_bytes()         // bytes of one rank's block
// data is P::data_type, std::span<std::byte>: rank j's block at j * block_bytes, this rank's
// own in place. As for the other plans, the schedule, scratch and request slots are computed
// when it is built, every message carries `tag`, and building is local: the collective
// checks agreement first.
//
// The rows: allgather_row<Algorithm>::select<C>() names the plan of an allgather algorithm
// (selector/plan_table.hpp holds them), and allgather_plan_of looks it up.
#pragma once

#include <concepts>
#include <cstddef>

#include <gradsync/plan/plan.hpp>

namespace gradsync {

template <class P>
concept allgather_plan = std::destructible<P> &&
    std::constructible_from<P, typename P::communicator_type&, std::size_t,
                            const plan_options<typename P::algorithm_type>&> &&
    requires(P& p, const P& cp, typename P::communicator_type& comm, typename P::data_type data, int tag) {
        { cp.count() } -> std::same_as<std::size_t>;
        { cp.block_bytes() } -> std::same_as<std::size_t>;
        p.run(comm, data, tag);
    };

template <class Algorithm>
struct allgather_row {
    static constexpr bool exists = false;
};

namespace detail {

// A class template, so that automatic_allgather names its candidates before their rows are
// declared (as broadcast_lookup does for automatic_broadcast).
template <class C, class Algorithm>
struct allgather_lookup {
    using type = typename decltype(allgather_row<Algorithm>::template select<C>())::type;
};

} // namespace detail

template <class C, class Algorithm>
using allgather_plan_of = typename detail::allgather_lookup<C, Algorithm>::type;

} // namespace gradsync
