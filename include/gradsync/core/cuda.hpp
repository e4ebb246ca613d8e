// The GPU as a memory space (core/space.hpp): cuda_stream, and the memory it allocates.
//
//   cuda_stream{s}        kernels through thrust::cuda::par_nosync.on(s), copies with
//                         cudaMemcpyAsync on s, synchronize() = cudaStreamSynchronize(s)
//   device_buffer<T>(n)   n elements of device memory (cudaMalloc), owning, movable
//   pinned_buffer<T>(n)   n elements of page-locked host memory (cudaMallocHost)
//   device_error          a CUDA runtime call failed; the message names the call
//   detail::on_device(p)  whether p is device or managed memory (for transports that move
//                         both kinds: comm/local/device_copy.hpp, comm/nccl/nccl.hpp)
//
// A communicator carries device memory when it says so: c.device_memory() returning true
// (a local_group built with gradsync::device_copy, nccl_communicator). The kernels need nvcc:
// include this from .cu files.
#pragma once

#include <concepts>
#include <cstddef>
#include <string>
#include <utility>

#include <cuda_runtime.h>
#include <thrust/system/cuda/execution_policy.h>

#include <gradsync/core/error.hpp>

namespace gradsync {

class device_error : public error {
public:
    using error::error;
};

namespace detail {

inline void cuda_check(cudaError_t e, const char* call)
{
    if (e != cudaSuccess)
        throw device_error(std::string("gradsync: ") + call + " failed: " + cudaGetErrorName(e) + " (" +
                           cudaGetErrorString(e) + ")");
}

// Device or managed memory; false for host memory, pinned or not.
inline bool on_device(const void* p) noexcept
{
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError(); // not a pointer CUDA knows: host memory; clear the error
        return false;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

enum class cuda_memory_kind { device, pinned };

template <class T, cuda_memory_kind Kind>
class cuda_memory {
public:
    cuda_memory() = default;
    explicit cuda_memory(std::size_t n) : size_(n)
    {
        if (n == 0)
            return;
        void* p = nullptr;
        if constexpr (Kind == cuda_memory_kind::device)
            cuda_check(cudaMalloc(&p, n * sizeof(T)), "cudaMalloc");
        else
            cuda_check(cudaMallocHost(&p, n * sizeof(T)), "cudaMallocHost");
        data_ = static_cast<T*>(p);
    }
    cuda_memory(cuda_memory&& o) noexcept : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
    cuda_memory& operator=(cuda_memory&& o) noexcept
    {
        std::swap(data_, o.data_);
        std::swap(size_, o.size_);
        return *this;
    }
    ~cuda_memory()
    {
        if (!data_)
            return;
        if constexpr (Kind == cuda_memory_kind::device)
            cudaFree(data_);
        else
            cudaFreeHost(data_);
    }

    T* data() const noexcept { return data_; }
    std::size_t size() const noexcept { return size_; }

private:
    T* data_ = nullptr;
    std::size_t size_ = 0;
};

} // namespace detail

template <class T>
using device_buffer = detail::cuda_memory<T, detail::cuda_memory_kind::device>;
template <class T>
using pinned_buffer = detail::cuda_memory<T, detail::cuda_memory_kind::pinned>;

struct cuda_stream {
    cudaStream_t stream = nullptr;

    cuda_stream(cudaStream_t s = nullptr) noexcept : stream(s) {}

    auto execution() const { return thrust::cuda::par_nosync.on(stream); }
    void synchronize() const { detail::cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"); }
    void copy(void* dst, const void* src, std::size_t bytes) const
    {
        if (bytes)
            detail::cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream), "cudaMemcpyAsync");
    }

    template <class T>
    using buffer = device_buffer<T>;
    template <class T>
    using host_buffer = pinned_buffer<T>;

    // Any communicator; unconstrained, as this header sits below comm/communicator.hpp.
    template <class C>
    static bool carries(const C& c)
    {
        if constexpr (requires { { c.device_memory() } -> std::convertible_to<bool>; })
            return c.device_memory();
        else
            return false;
    }
};

} // namespace gradsync
