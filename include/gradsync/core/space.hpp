// Memory spaces: where a device_span's elements live and how work on them runs. A space S
// provides
//   s.execution()            a Thrust execution policy whose kernels run in the space
//   s.synchronize()          returns when everything queued in the space has finished
//   s.copy(dst, src, bytes)  queues a copy between the space and host memory, either way
//   S::buffer<T>             owning scratch of n elements in the space: buffer<T>(n).data()
//   S::host_buffer<T>        host memory the space copies to fastest (pinned, for a GPU)
//   S::carries(comm)         whether comm's isend/irecv move the space's memory themselves
// cuda_stream (<gradsync/core/cuda.hpp>) is a GPU's memory with a CUDA stream. host_space
// is ordinary host memory with a Thrust CPU back end (thrust::omp::par, thrust::cpp::par):
// the device path's plans and kernels, run and tested on machines without a GPU.
#pragma once

#include <cstddef>
#include <cstring>
#include <vector>

namespace gradsync {

template <class Exec>
struct host_space {
    Exec exec{};

    const Exec& execution() const noexcept { return exec; }
    // Thrust's CPU systems return when their kernels are done.
    void synchronize() const noexcept {}
    void copy(void* dst, const void* src, std::size_t bytes) const noexcept
    {
        if (bytes)
            std::memcpy(dst, src, bytes);
    }

    template <class T>
    using buffer = std::vector<T>;
    template <class T>
    using host_buffer = std::vector<T>;

    // Any communicator; unconstrained, as this header sits below comm/communicator.hpp.
    template <class C>
    static constexpr bool carries(const C&) noexcept
    {
        return true;
    }
};

template <class Exec>
host_space(Exec) -> host_space<Exec>;

} // namespace gradsync
