// space_memory<Space>: a memory space (device/space.hpp) as the Memory of the plans
// (algorithm/memory.hpp), so every plan reduces a device_span<T, Space> with the host plans'
// messages: Sum and Average with their bits, Adasum with the Thrust triple's order. Combine,
// finish, the canonical NaN and Adasum's triples and scaled add are the Thrust kernels
// (device/policy.hpp, kernels/thrust.hpp), queued in the span's space, so the plans
// synchronize the space before a send reads what a kernel wrote (Memory::synchronous is
// false); scratch is Space::buffer<T>. Only Adasum's triples (three doubles per layer)
// are copied to the host, for the coefficients.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include <gradsync/algorithm/memory.hpp>

#include <gradsync/broadcast_element.hpp>
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
    template <class T>
    using host_buffer = typename Space::template host_buffer<T>;
    template <class Policy>
    static constexpr bool combines = device_elementwise<Policy>;
    static constexpr bool synchronous = false;
    static constexpr std::uint32_t triple_order = triple_order_thrust;
    static constexpr std::size_t triple_workspace(std::size_t n) noexcept { return kernels::triple_workspace(n); }

    Space space{};

    template <broadcast_element T>
    static space_memory of(const device_span<T, Space>& s)
    {
        return {s.space()};
    }
    template <broadcast_element T>
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
    template <element T>
    device_span<T, Space> view(std::span<T> e) const
    {
        return {e.data(), e.size(), space};
    }

    template <element T>
    void add_triple(std::span<const T> a, std::span<const T> b, std::span<double> sums,
                    std::span<kernels::dot_triple> ws) const
    {
        kernels::add_triple(space.execution(), a, b, sums.data(), ws);
    }
    template <element T>
    void scaled_add(std::span<T> out, double ca, std::span<const T> a, double cb, std::span<const T> b) const
    {
        kernels::scaled_add(space.execution(), out, ca, a, cb, b);
    }
    void zero(std::span<double> x) const { kernels::zero(space.execution(), x); }
    void to_host(std::span<const double> x, std::span<double> out) const
    {
        space.copy(out.data(), x.data(), x.size_bytes());
        space.synchronize();
    }
};

} // namespace gradsync
