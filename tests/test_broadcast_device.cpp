// Broadcasts of device memory on the CPU: device_broadcaster and broadcast() on a device_span
// over host_space (Thrust's CPP system), ranks as a local_group (host_space memory is host
// memory, which every local_group moves). The plans are the host plans over
// space_memory<host_space>: every algorithm, fp16, fp32 and std::byte, several N, roots and
// counts; every rank must end with the root's bits.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include <thrust/system/cpp/execution_policy.h>

#include <gradsync/collective/device_broadcaster.hpp>
#include <gradsync/core/device_span.hpp>
#include <gradsync/core/space.hpp>
#include <gradsync/gradsync.hpp>

#include "broadcast_data.hpp"
#include "outcome.hpp"

namespace {

using gradsync::local_communicator;
using space = decltype(gradsync::host_space{thrust::cpp::par});

// Two calls of one device_broadcaster per (root, count), then one broadcast(); the first
// difference on this rank, or "".
template <class T, class Algorithm>
std::string broadcast_device(local_communicator& comm)
{
    const int n = comm.size();
    for (const int root : {0, n - 1, n / 2})
        for (const std::size_t count : {std::size_t(0), std::size_t(1), std::size_t(n) + 1, std::size_t(1000),
                                        (std::size_t(600) << 10) / sizeof(T) + 7}) {
            gradsync::device_broadcaster<T, local_communicator, Algorithm, space> b(comm, count, root);
            for (int call = 1; call <= 3; ++call) {
                std::vector<T> data = comm.rank() == root ? broadcast_data::root_data<T>(count, root, call)
                                                          : broadcast_data::before<T>(count, comm.rank());
                const gradsync::device_span<T, space> span(data.data(), data.size(), space{});
                if (call < 3)
                    b(span);
                else
                    gradsync::broadcast(comm, span, root, Algorithm{});
                if (const std::string d = broadcast_data::check_call(data, root, call); !d.empty())
                    return d;
            }
        }
    return "";
}

template <class T, class Algorithm>
void check_device()
{
    for (const int n : {1, 2, 3, 5, 8}) {
        INFO(n << " ranks");
        std::vector<std::string> failed(static_cast<std::size_t>(n));
        gradsync::local_group group(n);
        CHECK(gradsync_test::run_ranks(group, [&](local_communicator& comm) {
                  failed[std::size_t(comm.rank())] = broadcast_device<T, Algorithm>(comm);
              }) == "");
        for (const std::string& f : failed)
            CHECK(f == "");
    }
}

} // namespace

TEMPLATE_TEST_CASE("device broadcast on host_space copies the root's bits", "[device][broadcast]", gradsync::half,
                   float, std::byte)
{
    check_device<TestType, gradsync::binomial_tree>();
    check_device<TestType, gradsync::scatter_allgather>();
    check_device<TestType, gradsync::automatic_broadcast>();
}
