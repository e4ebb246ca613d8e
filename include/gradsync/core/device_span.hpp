// device_span<T, Space>: the buffer the device path reduces or broadcasts (T an element type,
// or std::byte for a broadcast). A pointer, an element count and the memory space the
// elements live in, owning nothing: for a GPU the space is a cuda_stream
// (<gradsync/core/cuda.hpp>), so
//
//   gradsync::device_span<float> grad(device_pointer, count, stream);
//
// Work on the elements is queued in the space after whatever the caller queued there before
// (a CUDA stream orders it); the host never dereferences them.
#pragma once

#include <cstddef>
#include <span>

#include <gradsync/core/broadcast_element.hpp>

namespace gradsync {

struct cuda_stream;

template <broadcast_element T, class Space = cuda_stream>
class device_span {
public:
    device_span(T* data, std::size_t size, Space space) : data_(data), size_(size), space_(space) {}

    T* data() const noexcept { return data_; }
    std::size_t size() const noexcept { return size_; }
    const Space& space() const noexcept { return space_; }
    // The same elements as a std::span, for communicators and kernels (which pass the
    // pointer on); not for the host to dereference.
    std::span<T> elements() const noexcept { return {data_, size_}; }

private:
    T* data_;
    std::size_t size_;
    Space space_;
};

} // namespace gradsync
