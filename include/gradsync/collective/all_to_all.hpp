// All-to-all with equal blocks: exchanger<> (plan once, run many) and all_to_all() (one
// call). Every rank's data holds N blocks of b bytes, block j for rank j; after a call, block
// i of rank j's data holds what block j of rank i's held, bit for bit (the N x N matrix of
// blocks, rank by block, is transposed).
//
//   gradsync::exchanger<Comm> x(comm, b);
//   x(std::span<std::byte>(data)); // data: N*b bytes in, N*b bytes out
//
//   gradsync::all_to_all(comm, std::span<std::byte>(data), b); // one call
//
// Constructing an exchanger is collective, agreed and named as every data-movement collective
// is (collective/movement.hpp): every rank must construct one with the same block size and
// tag. One algorithm, pairwise_exchange (algorithm/pairwise_exchange.hpp), whose scratch of
// floor(N/2) blocks is allocated then.
#pragma once

#include <cstddef>
#include <span>

#include <gradsync/algorithm/pairwise_exchange.hpp>
#include <gradsync/collective/movement.hpp>
#include <gradsync/comm/communicator.hpp>

namespace gradsync {

// data: count() = N * block_bytes() bytes, block j for rank j in; block i from rank i out.
template <communicator Comm>
class exchanger : public detail::movement_collective<Comm, pairwise_exchange_plan<Comm>> {
    using base = detail::movement_collective<Comm, pairwise_exchange_plan<Comm>>;

public:
    exchanger(Comm& comm, std::size_t block_bytes, movement_options options = {})
        : base(comm, block_bytes, 0, pairwise_exchange{}, options.tag, "gradsync::exchanger", "exchanger", "",
               block_bytes, plan_options<pairwise_exchange>{})
    {
    }
};

// One all-to-all of blocks of block_bytes, in place: data holds N of them.
template <communicator Comm>
void all_to_all(Comm& comm, std::span<std::byte> data, std::size_t block_bytes, movement_options options = {})
{
    exchanger<Comm> x(comm, block_bytes, options);
    x(data);
}

} // namespace gradsync
