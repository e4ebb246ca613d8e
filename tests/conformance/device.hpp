// The device path's elementwise matrix, once for every memory: host_space on a Thrust CPU
// system (test_thrust_kernels_allreduce, gpu/host_harness.hpp) and cuda_stream on a GPU
// (test_device_local.cu). For one algorithm and type: Sum and Average on the direct path for
// every N of `ns` and counts {0, 1, N-1, 1000, largest}, then, for Sum, staged and direct
// ranks mixed at N = 3 and 4. The cases and their references are gpu/device_cases.hpp's.
#pragma once

#include <catch2/catch.hpp>

#include <cstddef>
#include <vector>

#include <gradsync/collective/device_reducer.hpp>

#include "../gpu/device_cases.hpp"

namespace conformance {

// H: a device harness (gpu/device_cases.hpp). The segment sizes are the pipeline's, in bytes.
template <class H, class T, class Algorithm>
void device_elementwise_matrix(const std::vector<int>& ns, std::size_t largest, std::size_t sum_segment,
                               std::size_t average_segment)
{
    using gradsync::device_path;
    for (int n : ns)
        for (std::size_t count : {std::size_t(0), std::size_t(1), std::size_t(n - 1), std::size_t(1000), largest}) {
            CHECK(device_cases::elementwise_case<H, T, gradsync::sum, Algorithm>(n, count, {device_path::direct},
                                                                                sum_segment) == "");
            CHECK(device_cases::elementwise_case<H, T, gradsync::average, Algorithm>(n, count, {device_path::direct},
                                                                                    average_segment) == "");
        }
    for (int n : {3, 4})
        CHECK(device_cases::elementwise_case<H, T, gradsync::sum, Algorithm>(
                  n, 70001, {device_path::staged, device_path::direct}, sum_segment) == "");
}

} // namespace conformance
