// Compressed gradients (data_parallel_options::compress): each layer rounded to fp16 or bf16
// (to nearest, ties to even: gradsync's conversions, core/types.hpp) as it is handed over, reduced
// in that type, and widened back (exactly) once the iteration's reduction has ended. Half the
// bytes of fp32 on the wire, a quarter of fp64's. One buffer the size of the gradients, made
// once.
#pragma once

#include <cstddef>
#include <span>
#include <type_traits>
#include <vector>

#include <gradsync/core/types.hpp>
#include <gradsync/torch/options.hpp>

namespace gradsync::torch_binding {

template <class T>
class wire_buffer {
public:
    wire_buffer(compression c, std::size_t count)
    {
        if (c == compression::fp16)
            half_.resize(count);
        else if (c == compression::bf16)
            bf16_.resize(count);
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
    template <class W>
    W* data() noexcept
    {
        if constexpr (std::is_same_v<W, half>)
            return half_.data();
        else
            return bf16_.data();
    }

    std::vector<half> half_;
    std::vector<bfloat16> bf16_;
};

} // namespace gradsync::torch_binding
