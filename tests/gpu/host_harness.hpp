// The CPU harness of the device cases (device_cases.hpp, adasum_cases.hpp): host_space with
// a Thrust CPU system (thrust::omp::par, thrust::cpp::par), ranks as a plain local_group
// (host_space memory is host memory, which every local_group moves), buffers as vectors.
#pragma once

#include <memory>
#include <vector>

#include <gradsync/core/device_span.hpp>
#include <gradsync/core/space.hpp>
#include <gradsync/gradsync.hpp>

namespace device_cases {

// Space: gradsync::host_space<Exec>, e.g. decltype(gradsync::host_space{thrust::omp::par}).
template <class Space>
struct host_harness {
    using space_type = Space;

    static std::unique_ptr<gradsync::local_group> make_group(int n)
    {
        return std::make_unique<gradsync::local_group>(n);
    }

    struct context {
        space_type space() const { return {}; }
    };

    template <class T>
    struct buffer {
        std::vector<T> values;
        space_type space;
        buffer(const context& ctx, const std::vector<T>& v) : values(v), space(ctx.space()) {}
        gradsync::device_span<T, space_type> span() { return {values.data(), values.size(), space}; }
        std::vector<T> read() const { return values; }
    };
};

} // namespace device_cases
