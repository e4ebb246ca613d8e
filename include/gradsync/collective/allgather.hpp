// Allgather: allgatherer<> (plan once, run many) and allgather() (one call). Every rank's
// block of b bytes is copied into every rank's data, in place, bit for bit.
//
//   gradsync::allgatherer<Comm> g(comm, b);
//   g(std::span<std::byte>(all)); // all: N*b bytes, this rank's block filled at rank*b
//
//   gradsync::allgather(comm, std::as_writable_bytes(std::span(values)), b); // one call
//
// Typed data goes through std::as_writable_bytes. Constructing an allgatherer is collective,
// agreed and named as every data-movement collective is (collective/movement.hpp): every rank
// must construct one with the same block size, algorithm and tag. The plan comes from the
// table (selector/plan_table.hpp): ring_allgather, bruck_allgather, or automatic_allgather
// (the default), which picks one of the two by the data's size.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>

#include <gradsync/collective/movement.hpp>
#include <gradsync/comm/communicator.hpp>
#include <gradsync/plan/allgather_plan.hpp>
#include <gradsync/selector/automatic_allgather.hpp>
#include <gradsync/selector/plan_table.hpp>

namespace gradsync {

// An allgather algorithm: a type with an allgather row in the table, a code and a name.
template <class A>
concept allgather_algorithm = std::copyable<A> && allgather_row<A>::exists && requires {
    { A::code } -> std::convertible_to<std::uint32_t>;
    { A::name } -> std::convertible_to<const char*>;
};

// data: count() = N * block_bytes() bytes, this rank's block at rank * block_bytes(); every
// other rank's block is written into its place.
template <communicator Comm, allgather_algorithm Algorithm = automatic_allgather>
class allgatherer : public detail::movement_collective<Comm, allgather_plan_of<Comm, Algorithm>> {
    using base = detail::movement_collective<Comm, allgather_plan_of<Comm, Algorithm>>;
    static_assert(allgather_plan<typename base::plan_type>,
                  "gradsync: a plan of the table does not model allgather_plan");

public:
    allgatherer(Comm& comm, std::size_t block_bytes, Algorithm algorithm = {}, movement_options options = {})
        : base(comm, block_bytes, 0, algorithm, options.tag, "gradsync::allgatherer", "allgatherer", "", block_bytes,
               plan_options<Algorithm>{algorithm, {}})
    {
    }
};

// One allgather of blocks of block_bytes, in place: data holds N of them.
template <communicator Comm, allgather_algorithm Algorithm = automatic_allgather>
void allgather(Comm& comm, std::span<std::byte> data, std::size_t block_bytes, Algorithm algorithm = {},
               movement_options options = {})
{
    allgatherer<Comm, Algorithm> g(comm, block_bytes, algorithm, options);
    g(data);
}

} // namespace gradsync
