// The automatic rule on device memory (Sum, Average): automatic::choose picks recursive
// doubling, recursive halving or ring from (bytes, count, ranks) exactly as for host memory,
// and the device plan of that algorithm runs, so the choice and the messages match the host
// path's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <variant>

#include <gradsync/algorithm/automatic.hpp>
#include <gradsync/communicator.hpp>
#include <gradsync/device/algorithm.hpp>
#include <gradsync/device/policy.hpp>
#include <gradsync/device/recursive_doubling.hpp>
#include <gradsync/device/recursive_halving.hpp>
#include <gradsync/device/ring.hpp>
#include <gradsync/device/span.hpp>
#include <gradsync/layout.hpp>
#include <gradsync/types.hpp>

namespace gradsync {

template <element T, communicator C, class Space>
class device_automatic_plan {
public:
    device_automatic_plan(const C& comm, const layer_layout& layout, const automatic& rule,
                          const pipeline_options& pipe)
        : chosen_(rule.choose(layout.total() * sizeof(T), layout.total(), comm.size())),
          plan_(make(comm, layout, chosen_, pipe))
    {
    }

    std::size_t count() const noexcept
    {
        return std::visit([](const auto& p) { return p.count(); }, plan_);
    }

    // Code of the algorithm this plan runs (ring::code, recursive_halving::code, ...).
    std::uint32_t chosen() const noexcept { return chosen_; }

    template <class P>
    void run(C& comm, device_span<T, Space> data, int tag)
    {
        std::visit([&](auto& p) { p.template run<P>(comm, data, tag); }, plan_);
    }

private:
    using variant = std::variant<device_recursive_doubling_plan<T, C, Space>,
                                 device_recursive_halving_plan<T, C, Space>, device_ring_plan<T, C, Space>>;

    static variant make(const C& comm, const layer_layout& layout, std::uint32_t chosen, const pipeline_options& pipe)
    {
        switch (chosen) {
        case recursive_doubling::code:
            return variant(std::in_place_index<0>, comm, layout, recursive_doubling{}, pipe);
        case recursive_halving::code:
            return variant(std::in_place_index<1>, comm, layout, recursive_halving{}, pipe);
        default:
            return variant(std::in_place_index<2>, comm, layout, ring{}, pipe);
        }
    }

    std::uint32_t chosen_;
    variant plan_;
};

template <device_elementwise P>
struct device_algorithm<automatic, P> {
    static constexpr bool available = true;
    template <element T, communicator C, class Space>
    using plan = device_automatic_plan<T, C, Space>;
};

} // namespace gradsync
