// Scatter: scatterer<> (plan once, run many) and scatter() (one call). Block j of the root's
// data, b bytes, is copied into rank j's data, bit for bit.
//
//   gradsync::scatterer<Comm> s(comm, b, /*root=*/0);
//   s(std::span<std::byte>(data)); // the root's data: N*b bytes, only read; another rank's:
//                                  // its b bytes, written
//
// Constructing a scatterer is collective, agreed and named as every data-movement collective
// is (collective/movement.hpp): every rank must construct one with the same block size, root
// and tag. One algorithm, linear_scatter (algorithm/linear_scatter.hpp): the root sends to
// every rank at once.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include <gradsync/algorithm/linear_scatter.hpp>
#include <gradsync/collective/movement.hpp>
#include <gradsync/comm/communicator.hpp>

namespace gradsync {

// At the root, data holds count() = N * block_bytes() bytes, block j for rank j, and is only
// read (its own block stays where it is); elsewhere data, count() = block_bytes() bytes,
// receives the rank's block.
template <communicator Comm>
class scatterer : public detail::movement_collective<Comm, linear_scatter_plan<Comm>> {
    using base = detail::movement_collective<Comm, linear_scatter_plan<Comm>>;

public:
    scatterer(Comm& comm, std::size_t block_bytes, int root = 0, movement_options options = {})
        : base(comm, block_bytes, root, linear_scatter{}, options.tag, "gradsync::scatterer", "scatterer",
               " from rank " + std::to_string(root), block_bytes, root)
    {
    }

    int root() const noexcept { return this->plan().root(); }
};

// One scatter of blocks of block_bytes from root: the root's data holds N of them, every
// other rank's receives its own.
template <communicator Comm>
void scatter(Comm& comm, std::span<std::byte> data, std::size_t block_bytes, int root = 0,
             movement_options options = {})
{
    scatterer<Comm> s(comm, block_bytes, root, options);
    s(data);
}

} // namespace gradsync
