// The device path (device_reducer, the device plans, the staged path) on the CPU:
// host_space with Thrust's OpenMP system, ranks as a local_group. The same cases run on a GPU
// in test_device_local.cu (tests/gpu/device_cases.hpp holds them):
//  - Sum and Average, direct path, ring / recursive_halving / recursive_doubling /
//    automatic, fp16, bf16, fp32, fp64, N in {1, 2, 3, 5, 8}, counts {0, 1, N-1, 1000, 65537}
//    in 4 KiB pipeline segments: integer data gives the exact sum, random data the host
//    path's bits, every rank the same bits;
//  - ranks that differ in path (staged and direct alternating) still agree for Sum;
//  - the staged path, asked for, gives the host path's bits for Adasum and hierarchical, and
//    for the policies and element types that have no device plan (Maximum, int32);
//  - misuse: ranks that mix the staged and the direct path for Adasum (refused: the
//    triples are summed in different orders), ranks that disagree on the count (on both
//    paths), a buffer of the wrong size.
// The direct path's Adasum and hierarchical plans are checked against the Adasum reference
// by test_device_adasum (tests/gpu/adasum_cases.hpp), on both Thrust CPU systems.
#include <catch2/catch.hpp>

#include <thrust/system/omp/execution_policy.h>

#include <cstdint>
#include <vector>

#include <gradsync/collective/device_reducer.hpp>
#include <gradsync/core/space.hpp>
#include <gradsync/gradsync.hpp>

#include "conformance/device.hpp"
#include "gpu/device_cases.hpp"
#include "gpu/host_harness.hpp"

namespace {

using gradsync::bfloat16;
using gradsync::half;
using gradsync::device_path;

using omp_harness = device_cases::host_harness<decltype(gradsync::host_space{thrust::omp::par})>;

} // namespace

#define GRADSYNC_DEVICE_MATRIX_CASE(algo, type, type_name)                                                             \
    TEST_CASE("device path on host_space: " #algo " " type_name, "[device][thrust]")                                 \
    {                                                                                                                  \
        conformance::device_elementwise_matrix<omp_harness, type, gradsync::algo>({1, 2, 3, 5, 8}, 65537, 4096, 4096); \
    }

GRADSYNC_DEVICE_MATRIX_CASE(ring, half, "fp16")
GRADSYNC_DEVICE_MATRIX_CASE(ring, bfloat16, "bf16")
GRADSYNC_DEVICE_MATRIX_CASE(ring, float, "fp32")
GRADSYNC_DEVICE_MATRIX_CASE(ring, double, "fp64")
GRADSYNC_DEVICE_MATRIX_CASE(recursive_halving, half, "fp16")
GRADSYNC_DEVICE_MATRIX_CASE(recursive_halving, bfloat16, "bf16")
GRADSYNC_DEVICE_MATRIX_CASE(recursive_halving, float, "fp32")
GRADSYNC_DEVICE_MATRIX_CASE(recursive_halving, double, "fp64")
GRADSYNC_DEVICE_MATRIX_CASE(recursive_doubling, half, "fp16")
GRADSYNC_DEVICE_MATRIX_CASE(recursive_doubling, float, "fp32")
GRADSYNC_DEVICE_MATRIX_CASE(recursive_doubling, double, "fp64")
GRADSYNC_DEVICE_MATRIX_CASE(automatic, half, "fp16")
GRADSYNC_DEVICE_MATRIX_CASE(automatic, float, "fp32")
GRADSYNC_DEVICE_MATRIX_CASE(automatic, double, "fp64")

TEST_CASE("device path on host_space: the staged path gives the host bits for Adasum and hierarchical",
          "[device][thrust]")
{
    const std::vector<std::size_t> layers{300, 0, 1, 4000, 699};
    for (int n : {1, 2, 3, 4, 5}) {
        CHECK(device_cases::staged_case<omp_harness, float, gradsync::adasum, gradsync::ring>(n, 5000, layers) == "");
        CHECK(device_cases::staged_case<omp_harness, half, gradsync::adasum, gradsync::recursive_halving>(n, 5000,
                                                                                                         layers) == "");
        CHECK(device_cases::staged_case<omp_harness, double, gradsync::adasum, gradsync::automatic>(n, 5000, layers) ==
              "");
    }
    CHECK(device_cases::staged_case<omp_harness, float, gradsync::sum, gradsync::hierarchical>(
              4, 5000, {}, gradsync::hierarchical{.ranks_per_node = 2}) == "");
}

TEST_CASE("device path on host_space: the other policies and integer types have no device plan and run staged",
          "[device][thrust]")
{
    using memory = gradsync::space_memory<omp_harness::space_type>;
    using gradsync::local_communicator;
    STATIC_REQUIRE(gradsync::has_plan<float, local_communicator, gradsync::ring, gradsync::sum, memory>);
    STATIC_REQUIRE_FALSE(gradsync::has_plan<float, local_communicator, gradsync::ring, gradsync::minimum, memory>);
    STATIC_REQUIRE_FALSE(gradsync::has_plan<half, local_communicator, gradsync::automatic, gradsync::product, memory>);
    STATIC_REQUIRE_FALSE(gradsync::has_plan<std::int32_t, local_communicator, gradsync::ring, gradsync::sum, memory>);
    STATIC_REQUIRE_FALSE(
        gradsync::has_plan<std::int64_t, local_communicator, gradsync::hierarchical, gradsync::bitwise_or, memory>);
    for (int n : {1, 2, 3}) {
        CHECK(device_cases::staged_case<omp_harness, float, gradsync::maximum, gradsync::ring>(n, 1000, {}) == "");
        CHECK(device_cases::staged_case<omp_harness, std::int32_t, gradsync::sum, gradsync::recursive_doubling>(
                  n, 1000, {}) == "");
    }
}

TEST_CASE("device path on host_space: misuse ends in a clear error on every rank", "[device][thrust]")
{
    using cases = device_cases::misuse<omp_harness>;
    using gradsync_test::kind;
    CHECK(device_cases::all_ended_in(cases::adasum_paths_mixed(3, gradsync::ring{}), kind::mismatch,
                                     "the Adasum triple order") == "");
    CHECK(device_cases::all_ended_in(cases::counts_disagree(device_path::direct), kind::mismatch,
                                     "element count") == "");
    CHECK(device_cases::all_ended_in(cases::counts_disagree(device_path::staged), kind::mismatch,
                                     "element count") == "");
    CHECK(device_cases::all_ended_in(cases::wrong_size(), kind::usage, "buffer holds 99 elements") == "");
}
