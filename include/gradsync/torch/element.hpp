// The element types data_parallel accepts and their libtorch scalar types. gradsync's half
// and bfloat16 hold the same bits as at::Half and at::BFloat16, so a tensor of those is read
// in place as a span of gradsync's type.
#pragma once

#include <c10/core/ScalarType.h>
#include <ATen/core/Tensor.h>

#include <type_traits>

#include <gradsync/core/types.hpp>

namespace gradsync::torch_binding {

template <class T>
inline constexpr bool is_module_element =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

template <class T>
constexpr c10::ScalarType scalar_type_of() noexcept
{
    if constexpr (std::is_same_v<T, float>)
        return c10::ScalarType::Float;
    else if constexpr (std::is_same_v<T, double>)
        return c10::ScalarType::Double;
    else if constexpr (std::is_same_v<T, half>)
        return c10::ScalarType::Half;
    else
        return c10::ScalarType::BFloat16;
}

static_assert(sizeof(half) == sizeof(c10::Half) && sizeof(bfloat16) == sizeof(c10::BFloat16));

// The elements of a dense, contiguous CPU tensor of T's scalar type.
template <class T>
T* elements_of(const at::Tensor& t) noexcept
{
    return static_cast<T*>(t.data_ptr());
}

} // namespace gradsync::torch_binding
