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
#include <cstdint>
#include <span>
#include <string>

#include <gradsync/algorithm/linear_scatter.hpp>
#include <gradsync/collective/movement.hpp>
#include <gradsync/comm/communicator.hpp>

namespace gradsync {

template <communicator Comm>
class scatterer {
public:
    using plan_type = linear_scatter_plan<Comm>;

    scatterer(Comm& comm, std::size_t block_bytes, int root = 0, movement_options options = {})
        : comm_(&comm), plan_(comm, block_bytes, root, linear_scatter{}, options.tag, "gradsync::scatterer",
                              "scatterer", " from rank " + std::to_string(root), block_bytes, root)
    {
    }

    // At the root, data holds count() = N * block_bytes() bytes, block j for rank j, and is only
    // read (its own block stays where it is); elsewhere data, count() = block_bytes() bytes,
    // receives the rank's block. data.size() must equal count().
    void operator()(std::span<std::byte> data) { plan_(*comm_, data); }

    std::size_t count() const noexcept { return plan_.plan().count(); }
    std::size_t block_bytes() const noexcept { return plan_.plan().block_bytes(); }
    int root() const noexcept { return plan_.plan().root(); }
    const plan_type& plan() const noexcept { return plan_.plan(); }
    // The identity every rank's scatterer shares, carried in its messages (core/tags.hpp).
    std::uint64_t identity() const noexcept { return plan_.identity(); }

private:
    Comm* comm_;
    detail::agreed_movement<Comm, plan_type> plan_;
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
