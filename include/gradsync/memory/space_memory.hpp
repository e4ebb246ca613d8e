// space_memory<Space>: a memory space (core/space.hpp) as the Memory of the plans
// (memory/host_memory.hpp), so every plan reduces a device_span<T, Space> with the host plans'
// messages: Sum and Average with their bits, Adasum with the Thrust triple's order. Combine,
// finish, the canonical NaN and Adasum's triples and scaled add are the Thrust kernels
// (policy/device_sum.hpp, kernels/thrust.hpp, kernels/thrust_adasum.hpp), queued in the span's
// space, so the plans synchronize the space before a send reads what a kernel wrote
// (Memory::synchronous is false); scratch is Space::buffer<T>. Adasum's part tables are
// copied into the space when a plan is built; its coefficients are formed there, so
// nothing of a call is copied to the host.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <gradsync/memory/host_memory.hpp>

#include <gradsync/core/broadcast_element.hpp>
#include <gradsync/core/device_span.hpp>
#include <gradsync/core/types.hpp>
#include <gradsync/kernels/adasum_part.hpp>
#include <gradsync/kernels/thrust.hpp>
#include <gradsync/kernels/thrust_adasum.hpp>
#include <gradsync/policy/device_sum.hpp>

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
    // The Thrust kernels combine Sum and Average of floating-point elements: integers
    // reduce in host memory (a device_reducer's staged path).
    template <class Policy, class T>
    static constexpr bool combines = device_elementwise<Policy> && !std::integral<T>;
    static constexpr bool synchronous = false;
    static constexpr std::uint32_t triple_order = triple_order_thrust;

    // A step's parts and their lanes, copied into the space once.
    class part_table {
    public:
        part_table() = default;
        explicit part_table(const std::vector<kernels::adasum_part>& parts)
            : lanes_(parts), parts_(upload(parts)), starts_(upload(lanes_.starts)), flat_(upload(lanes_.flat)),
              groups_(upload(lanes_.groups))
        {
        }
        std::size_t size() const noexcept { return lanes_.parts; }
        std::size_t workspace() const noexcept { return lanes_.low + lanes_.high; }
        const kernels::part_lanes& lanes() const noexcept { return lanes_; }
        kernels::part_arrays arrays() const noexcept
        {
            return {parts_.data(), starts_.data(), flat_.data(), groups_.data()};
        }

    private:
        template <class U>
        static buffer<U> upload(const std::vector<U>& v)
        {
            buffer<U> b(v.size());
            const Space space{};
            space.copy(b.data(), v.data(), v.size() * sizeof(U));
            space.synchronize();
            return b;
        }

        kernels::part_lanes lanes_;
        buffer<kernels::adasum_part> parts_;
        buffer<std::uint64_t> starts_, flat_, groups_;
    };

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
    void add_triples(const part_table& t, std::size_t first, std::size_t last, kernels::adasum_operands<const T> x,
                     std::span<double> sums, std::span<kernels::dot_triple> ws) const
    {
        kernels::add_part_triples(space.execution(), t.lanes(), t.arrays(), first, last, x, sums.data(), ws.data(),
                                  ws.data() + t.lanes().low);
    }
    template <element T>
    void scaled_add_parts(const part_table& t, std::size_t first, std::size_t last, kernels::adasum_operands<T> x,
                          std::span<const double> sums) const
    {
        kernels::scaled_add_parts(space.execution(), t.lanes(), t.arrays(), first, last, x, sums.data());
    }
    void zero(std::span<double> x) const { kernels::zero(space.execution(), x); }
};

} // namespace gradsync
