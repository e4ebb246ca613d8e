// space_memory<Space>: a memory space (device/space.hpp) as the Memory of the elementwise
// plans (algorithm/memory.hpp), so ring, recursive_halving, recursive_doubling and automatic
// reduce a device_span<T, Space> with the host plans' messages and bits. Combine, finish
// and the canonical NaN are the Thrust kernels (device/policy.hpp, kernels/thrust.hpp),
// queued in the span's space, so the plans synchronize the space before a send reads what
// a kernel wrote (Memory::synchronous is false); scratch is Space::buffer<T>.
#pragma once

#include <span>

#include <gradsync/device/policy.hpp>
#include <gradsync/device/span.hpp>
#include <gradsync/kernels/thrust.hpp>
#include <gradsync/types.hpp>

namespace gradsync {

template <class Space>
struct space_memory {
    using space_type = Space;
    template <class T>
    using span = device_span<T, Space>;
    template <class T>
    using buffer = typename Space::template buffer<T>;
    template <class Policy>
    static constexpr bool combines = device_elementwise<Policy>;
    static constexpr bool synchronous = false;

    Space space{};

    template <element T>
    static space_memory of(const device_span<T, Space>& s)
    {
        return {s.space()};
    }
    template <element T>
    static std::span<T> elements(const device_span<T, Space>& s) noexcept
    {
        return s.elements();
    }

    template <class Policy, element T>
    void combine(std::span<T> acc, std::span<const T> in) const
    {
        device_combine<Policy>(space, acc, in);
    }
    template <class Policy, element T>
    void finish(std::span<T> x, int ranks) const
    {
        device_finish<Policy>(space, x, ranks);
    }
    template <element T>
    void canonicalize_nan(std::span<T> x) const
    {
        kernels::canonicalize_nan(space.execution(), x);
    }
    void synchronize() const { space.synchronize(); }
};

} // namespace gradsync
