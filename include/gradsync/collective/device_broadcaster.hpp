// Broadcasts of device memory: device_broadcaster<> and broadcast() on a
// device_span, with the semantics of collective/broadcast.hpp (root's bits copied in place, the same
// collective construction and agreement check).
//
//   gradsync::device_span<std::byte> state(device_pointer, bytes, stream);
//   gradsync::device_broadcaster<std::byte, Comm> b(comm, bytes, /*root=*/0);
//   b(state);
//
// A broadcast only moves and copies, so there is one path: the broadcast plan runs in the
// span's memory space (space_memory<Space>), its messages straight from and into device
// memory. It needs a communicator that carries the space's memory (Space::carries: a
// local_group built with gradsync::device_copy, nccl_communicator, any communicator for
// host_space); for another, stage the data in host memory and use broadcaster. A call is
// ordered after the work the caller queued in the span's space and returns when the data
// is in place.
#pragma once

#include <cstddef>
#include <string>

#include <gradsync/collective/broadcast.hpp>
#include <gradsync/comm/communicator.hpp>
#include <gradsync/core/broadcast_element.hpp>
#include <gradsync/core/device_span.hpp>
#include <gradsync/core/error.hpp>
#include <gradsync/memory/space_memory.hpp>
#include <gradsync/selector/automatic_broadcast.hpp>

namespace gradsync {

template <broadcast_element T, communicator Comm, broadcast_algorithm Algorithm = automatic_broadcast,
          class Space = cuda_stream>
class device_broadcaster : public broadcaster<T, Comm, Algorithm, space_memory<Space>> {
public:
    device_broadcaster(Comm& comm, std::size_t count, int root = 0, Algorithm algorithm = {},
                       broadcaster_options options = {})
        : broadcaster<T, Comm, Algorithm, space_memory<Space>>(carried(comm), count, root, algorithm, options)
    {
    }

private:
    // comm, once it is known to move the space's memory (before the agreement check, as
    // device_reducer chooses its path).
    static Comm& carried(Comm& comm)
    {
        if (!Space::carries(comm))
            throw usage_error("gradsync::device_broadcaster (" + where(comm) +
                              "): this communicator does not move this memory; stage the data in host memory and "
                              "use gradsync::broadcaster");
        return comm;
    }
};

// One broadcast of device memory from root, in place.
template <communicator Comm, broadcast_element T, class Space, broadcast_algorithm Algorithm = automatic_broadcast>
void broadcast(Comm& comm, device_span<T, Space> data, int root = 0, Algorithm algorithm = {},
               broadcaster_options options = {})
{
    device_broadcaster<T, Comm, Algorithm, Space> b(comm, data.size(), root, algorithm, options);
    b(data);
}

} // namespace gradsync
