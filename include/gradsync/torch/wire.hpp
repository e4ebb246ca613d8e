// Compressed gradients (data_parallel_options::compress): each layer rounded to fp16 or bf16
// (to nearest, ties to even: gradsync's conversions, core/types.hpp) as it is handed over, reduced
// in that type, and widened back (exactly) once the iteration's reduction has ended. Half the
// bytes of fp32 on the wire, a quarter of fp64's. One buffer the size of the gradients, made
// once (in a shared_buffer where the ranks reduce through shared memory).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include <gradsync/core/types.hpp>
#include <gradsync/torch/options.hpp>

namespace gradsync::torch_binding {

template <class T>
class wire_buffer {
public:
    // `storage`: count 16-bit elements of memory to use (a shared_buffer's slot), or null for
    // memory of its own.
    wire_buffer(compression c, std::size_t count, std::byte* storage = nullptr)
    {
        if (c == compression::none)
            return;
        if (!storage) {
            own_.resize(count * 2);
            storage = own_.data();
        }
        data_ = storage;
    }

    // Elements [offset, offset + from.size()) rounded to W, as W's span.
    template <class W>
    std::span<W> narrow(std::span<const T> from, std::size_t offset)
    {
        W* to = data<W>() + offset;
        for (std::size_t i = 0; i < from.size(); ++i)
            to[i] = W(accumulate_t<T>(from[i]));
        return {to, from.size()};
    }

    template <class W>
    void widen(std::span<T> to)
    {
        const W* from = data<W>();
        for (std::size_t i = 0; i < to.size(); ++i)
            to[i] = T(float(from[i]));
    }

private:
    static_assert(sizeof(half) == 2 && sizeof(bfloat16) == 2);

    template <class W>
    W* data() noexcept
    {
        return reinterpret_cast<W*>(data_);
    }

    std::vector<std::byte> own_;
    std::byte* data_ = nullptr;
};

} // namespace gradsync::torch_binding
