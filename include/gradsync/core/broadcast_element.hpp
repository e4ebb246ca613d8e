// What a broadcast moves: every element type, and std::byte for raw bytes (packed tensors of
// mixed types). A broadcast copies and never computes, so it needs an element's code and
// name (for the agreement check) but not its arithmetic.
#pragma once

#include <concepts>
#include <cstddef>

#include <gradsync/core/types.hpp>

namespace gradsync {

template <class T>
concept broadcast_element = element<T> || std::same_as<T, std::byte>;

} // namespace gradsync
