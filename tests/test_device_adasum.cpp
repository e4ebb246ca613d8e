// The device plans of Adasum and hierarchical on the CPU: the direct path of device_reducer
// on host_space with one Thrust CPU system, thrust::omp::par, or thrust::cpp::par when
// GRADSYNC_TEST_THRUST_CPP is defined (CMake builds the first in an optimized build, the second
// under sanitizers). The cases are those of tests/gpu/adasum_cases.hpp, which
// test_device_local runs on a GPU:
//  - the matrix: N = 1..16 (1..8, 12 and 16 under sanitizers) x {fp16, bf16, fp32, fp64} x
//    {recursive_halving, recursive_doubling, ring, automatic{small thresholds}, hierarchical},
//    and for N <= 8 automatic{} and hierarchical{k = 1, 2, 4 where k divides N} x {average,
//    sum}; layouts with empty and one-element layers, a layer of two 4 KiB segments + 77
//    elements across the halving cuts and the ring's blocks, 23 small layers, fewer elements
//    than ranks, none, no layout, default segments; each reducer called twice with different
//    data (N <= 8).
//    Per layer within docs/adasum.md's budget of adasum_reference.hpp's double evaluation,
//    within twice that of the host plan (reducer<> in host memory), every rank with rank 0's
//    bits;
//  - hierarchical with Sum and Average: exact on integer data, the host bits on random data;
//  - Horovod's scenarios: orthogonal gradients (QR of random vectors) sum, parallel ones
//    give their mean, identical ones themselves exactly, tiny and huge magnitudes stay
//    finite and accurate, zero layers drop out (A(x, 0) = x exactly), a NaN poisons its
//    layer on every rank without a hang;
//  - agreement: ranks mixing the staged (or a host reducer) and the direct path are refused
//    for Adasum on every rank, naming the Adasum triple order; for Sum they agree;
//  - (OpenMP build) the OpenMP and CPP systems give the same bits.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <thrust/system/cpp/execution_policy.h>
#ifndef GRADSYNC_TEST_THRUST_CPP
#include <thrust/system/omp/execution_policy.h>
#endif

#include <gradsync/collective/device_reducer.hpp>
#include <gradsync/core/space.hpp>
#include <gradsync/gradsync.hpp>

#include "gpu/adasum_cases.hpp"
#include "gpu/device_cases.hpp"
#include "gpu/host_harness.hpp"
#include "sanitized.hpp"

namespace {

using gradsync::bfloat16;
using gradsync::half;
using gradsync::device_path;
using cpp_harness = device_cases::host_harness<decltype(gradsync::host_space{thrust::cpp::par})>;
#ifdef GRADSYNC_TEST_THRUST_CPP
using harness = cpp_harness;
#else
using omp_harness = device_cases::host_harness<decltype(gradsync::host_space{thrust::omp::par})>;
using harness = omp_harness;
#endif

} // namespace

TEST_CASE("device Adasum matrix in fp16: every algorithm against the reference and the host plan", "[device][adasum]")
{
    CHECK(adasum_cases::matrix<harness, half>(gradsync_test::group_sizes(16), 8, 4096) == "");
}

TEST_CASE("device Adasum matrix in bf16: every algorithm against the reference and the host plan", "[device][adasum]")
{
    CHECK(adasum_cases::matrix<harness, bfloat16>(gradsync_test::group_sizes(16), 8, 4096) == "");
}

TEST_CASE("device Adasum matrix in fp32: every algorithm against the reference and the host plan", "[device][adasum]")
{
    CHECK(adasum_cases::matrix<harness, float>(gradsync_test::group_sizes(16), 8, 4096) == "");
}

TEST_CASE("device Adasum matrix in fp64: every algorithm against the reference and the host plan", "[device][adasum]")
{
    CHECK(adasum_cases::matrix<harness, double>(gradsync_test::group_sizes(16), 8, 4096) == "");
}

TEST_CASE("device hierarchical Sum and Average: exact on integers, the host bits on random data",
          "[device][hierarchical]")
{
    const std::vector<int> ns{1, 2, 3, 4, 6, 8, 16};
    const std::vector<std::size_t> counts{0, 1, 7, 3001}; // 3001: over one 4 KiB segment in every type
    CHECK(adasum_cases::hierarchical_elementwise<harness, half>(ns, counts, 4096) == "");
    CHECK(adasum_cases::hierarchical_elementwise<harness, bfloat16>(ns, counts, 4096) == "");
    CHECK(adasum_cases::hierarchical_elementwise<harness, float>(ns, counts, 4096) == "");
    CHECK(adasum_cases::hierarchical_elementwise<harness, double>(ns, counts, 4096) == "");
}

TEST_CASE("device Adasum scenario: orthogonal gradients (QR of random vectors) give their sum", "[device][adasum]")
{
    CHECK(adasum_cases::orthogonal<harness, half>(adasum_cases::scenario_ranks) == "");
    CHECK(adasum_cases::orthogonal<harness, float>(adasum_cases::scenario_ranks) == "");
    CHECK(adasum_cases::orthogonal<harness, double>(adasum_cases::scenario_ranks) == "");
}

TEST_CASE("device Adasum scenario: parallel gradients of different magnitudes give their mean", "[device][adasum]")
{
    CHECK(adasum_cases::parallel<harness, float>(adasum_cases::scenario_ranks) == "");
    CHECK(adasum_cases::parallel<harness, double>(adasum_cases::scenario_ranks) == "");
}

TEST_CASE("device Adasum scenario: identical gradients on every rank give that gradient exactly", "[device][adasum]")
{
    CHECK(adasum_cases::identical<harness, bfloat16>(adasum_cases::scenario_ranks) == "");
    CHECK(adasum_cases::identical<harness, float>(adasum_cases::scenario_ranks) == "");
    CHECK(adasum_cases::identical<harness, double>(adasum_cases::scenario_ranks) == "");
}

TEST_CASE("device Adasum scenario: tiny gradients stay finite and accurate", "[device][adasum]")
{
    CHECK(adasum_cases::magnitude<harness, float>(adasum_cases::scenario_ranks, 1e-30) == ""); // squares 1e-60: above sqrt(DBL_MIN)
    CHECK(adasum_cases::magnitude<harness, float>(adasum_cases::scenario_ranks, 1e-20) == "");
    CHECK(adasum_cases::magnitude<harness, double>(adasum_cases::scenario_ranks, 1e-70) == "");
    CHECK(adasum_cases::magnitude<harness, double>(adasum_cases::scenario_ranks, 1e-100) == ""); // below the guard: A is the sum
}

TEST_CASE("device Adasum scenario: huge gradients stay finite and accurate", "[device][adasum]")
{
    CHECK(adasum_cases::magnitude<harness, float>(adasum_cases::scenario_ranks, 1e18) == "");
    CHECK(adasum_cases::magnitude<harness, float>(adasum_cases::scenario_ranks, 1e30) == "");
    CHECK(adasum_cases::magnitude<harness, double>(adasum_cases::scenario_ranks, 1e30) == "");
    CHECK(adasum_cases::magnitude<harness, double>(adasum_cases::scenario_ranks, 1e150) == "");
}

TEST_CASE("device Adasum scenario: zero layers drop out, A(x, 0) = x", "[device][adasum]")
{
    CHECK(adasum_cases::zero_layers<harness, float>(adasum_cases::scenario_ranks) == "");
    CHECK(adasum_cases::zero_layers<harness, double>(adasum_cases::scenario_ranks) == "");
    CHECK(adasum_cases::one_nonzero<harness, float>(adasum_cases::scenario_ranks) == "");
    CHECK(adasum_cases::one_nonzero<harness, double>(adasum_cases::scenario_ranks) == "");
}

TEST_CASE("device Adasum scenario: a NaN in one rank's input makes its layer NaN on every rank, without hanging",
          "[device][adasum]")
{
    CHECK(adasum_cases::nan_input<harness, float>(adasum_cases::scenario_ranks) == "");
    CHECK(adasum_cases::nan_input<harness, double>(adasum_cases::scenario_ranks) == "");
}

TEST_CASE("device Adasum: ranks mixing the staged and the direct path get a mismatch_error naming the triple order",
          "[device][adasum][misuse]")
{
    CHECK(device_cases::adasum_mixing_refused<harness>() == "");
}

TEST_CASE("device Sum: a host reducer beside direct-path ranks agrees, with the exact sum on every rank",
          "[device][misuse]")
{
    using cases = device_cases::misuse<harness>;
    for (int n : {2, 3, 4}) {
        INFO("N " << n);
        std::vector<std::vector<float>> data = device_cases::inputs<float>(true, 4, n, 100);
        const std::vector<float> want = ref::exact(data, false);
        const device_cases::device_run run = cases::host_beside_direct<gradsync::sum>(data);
        CHECK(device_cases::outcomes_ok(run) == "");
        CHECK(device_cases::paths_are(run, {device_path::staged, device_path::direct}) == "");
        CHECK(ref::first_difference(data[0], want) == "");
        CHECK(device_cases::identical(data) == "");
    }
}

#ifndef GRADSYNC_TEST_THRUST_CPP
TEST_CASE("device Adasum: Thrust's OpenMP and CPP systems give the same bits", "[device][adasum]")
{
    // The Thrust triple's order is fixed by the length alone, not by the system or its threads.
    using namespace adasum_cases;
    for (int n : {2, 3, 5, 8})
        for (const variant& v : {variant{.a = alg::recursive_halving}, variant{.a = alg::recursive_doubling},
                                 variant{.a = alg::ring}, variant{.a = alg::hierarchical, .k = 1}}) {
            INFO("N " << n << ", " << describe(v));
            std::vector<job<float>> jobs{{"layers", {0, 1, 700, 3001, 13}, 4096, std::vector<per_rank<float>>(1)}};
            for (int r = 0; r < n; ++r)
                jobs[0].sets[0].push_back(adaref::normal_data<float>(606, r, total(jobs[0].layers)));
            const adasum_run<float> omp = run_adasum<omp_harness, float>(n, v, jobs);
            const adasum_run<float> cpp = run_adasum<cpp_harness, float>(n, v, jobs);
            REQUIRE(omp.error == "");
            REQUIRE(cpp.error == "");
            CHECK(ref::first_difference(omp.device[0][0][0], cpp.device[0][0][0]) == "");
        }
}
#endif
