// Gather: gatherer<> (plan once, run many) and gather() (one call). Every rank's block of b
// bytes is copied into the root's data, bit for bit.
//
//   gradsync::gatherer<Comm> g(comm, b, /*root=*/0);
//   g(std::span<std::byte>(data)); // the root's data: N*b bytes, its own block filled at
//                                  // root*b; another rank's: its b bytes, only read
//
// Constructing a gatherer is collective, agreed and named as every data-movement collective
// is (collective/movement.hpp): every rank must construct one with the same block size, root
// and tag. One algorithm, linear_gather (algorithm/linear_gather.hpp): the root receives from
// every rank at once.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include <gradsync/algorithm/linear_gather.hpp>
#include <gradsync/collective/movement.hpp>
#include <gradsync/comm/communicator.hpp>

namespace gradsync {

// At the root, data holds count() = N * block_bytes() bytes, its own block at
// root * block_bytes() (left as it is), and every other rank's block is written into its
// place; elsewhere data is the rank's block, count() = block_bytes() bytes, and is only read.
template <communicator Comm>
class gatherer : public detail::movement_collective<Comm, linear_gather_plan<Comm>> {
    using base = detail::movement_collective<Comm, linear_gather_plan<Comm>>;

public:
    gatherer(Comm& comm, std::size_t block_bytes, int root = 0, movement_options options = {})
        : base(comm, block_bytes, root, linear_gather{}, options.tag, "gradsync::gatherer", "gatherer",
               " to rank " + std::to_string(root), block_bytes, root)
    {
    }

    int root() const noexcept { return this->plan().root(); }
};

// One gather of blocks of block_bytes to root: the root's data holds N of them, every other
// rank's its own.
template <communicator Comm>
void gather(Comm& comm, std::span<std::byte> data, std::size_t block_bytes, int root = 0,
            movement_options options = {})
{
    gatherer<Comm> g(comm, block_bytes, root, options);
    g(data);
}

} // namespace gradsync
