// Which algorithm tags have a plan that runs on device memory, per policy. The device plan
// headers (device/ring.hpp, device/recursive_halving.hpp, device/recursive_doubling.hpp,
// device/automatic.hpp; comm/nccl.hpp for nccl_passthrough) specialize device_algorithm with
// available = true and a member template plan<T, C, Space>. The device reducer stages every
// other combination through host memory.
#pragma once

namespace gradsync {

template <class Algorithm, class Policy>
struct device_algorithm {
    static constexpr bool available = false;
};

} // namespace gradsync
