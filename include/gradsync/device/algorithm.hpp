// Which algorithm tags have a plan that runs on device memory, per policy: Sum and Average
// with ring, recursive_halving, recursive_doubling and automatic run those tags' own plans
// with space_memory<Space> (device/memory.hpp), so the messages and bits are the host
// path's and ranks may mix transports; comm/nccl.hpp adds nccl_passthrough. A plan here is
// a member template plan<T, C, Space> whose run<Policy>(comm, device_span<T, Space>, tag)
// reduces in place. The device reducer stages every other combination through host memory.
#pragma once

#include <concepts>

#include <gradsync/algorithm/automatic.hpp>
#include <gradsync/algorithm/recursive_doubling.hpp>
#include <gradsync/algorithm/recursive_halving.hpp>
#include <gradsync/algorithm/ring.hpp>
#include <gradsync/communicator.hpp>
#include <gradsync/device/memory.hpp>
#include <gradsync/device/policy.hpp>
#include <gradsync/types.hpp>

namespace gradsync {

template <class Algorithm, class Policy>
struct device_algorithm {
    static constexpr bool available = false;
};

template <class Algorithm, device_elementwise P>
    requires std::same_as<Algorithm, ring> || std::same_as<Algorithm, recursive_halving> ||
             std::same_as<Algorithm, recursive_doubling> || std::same_as<Algorithm, automatic>
struct device_algorithm<Algorithm, P> {
    static constexpr bool available = true;
    template <element T, communicator C, class Space>
    using plan = typename Algorithm::template plan<T, C, P, space_memory<Space>>;
};

} // namespace gradsync
