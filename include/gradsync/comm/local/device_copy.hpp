// device_copy: the local_group copy (comm/local/local.hpp) for ranks that share a GPU. A message
// with device memory on either side goes through cudaMemcpyAsync(..., cudaMemcpyDefault) on
// the copying thread's per-thread stream and is finished before the requests complete, so
// the receiver's kernels see it; host to host stays a memcpy (the agreement check's small
// messages, staged buffers).
//
//   gradsync::local_group group(4, {.copy = gradsync::device_copy});
//
// Ranks must synchronize their streams before posting a send of data their kernels wrote
// (the device plans do).
#pragma once

#include <cstddef>
#include <cstring>

#include <cuda_runtime.h>

#include <gradsync/comm/local/local.hpp>
#include <gradsync/core/cuda.hpp>

namespace gradsync {

namespace detail {

inline const char* cuda_local_copy(void* dst, const void* src, std::size_t bytes)
{
    if (!on_device(dst) && !on_device(src)) {
        std::memcpy(dst, src, bytes);
        return nullptr;
    }
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cudaStreamPerThread);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(cudaStreamPerThread);
    return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

} // namespace detail

inline constexpr local_copy device_copy{&detail::cuda_local_copy, true};

} // namespace gradsync
