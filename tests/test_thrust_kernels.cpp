// The Thrust kernels (kernels/thrust.hpp) on the CPU back ends, Thrust's OpenMP system with
// 1, 2 and 4 threads and its sequential CPP system, against the host kernels:
//  - add, scale and scaled_add bit for bit (NaN: NaN) for fp16, bf16, fp32 and fp64, with
//    Inf and NaN among the inputs, out aliasing a or b, and guard elements past the span;
//  - triple bit for bit against a plain loop of the order the header documents (level-1
//    lanes of stride ceil(n/256), then lanes of stride ceil(L/64)); it and the host kernel
//    each within Higham's rounding bound of the exact triple; the same bits on every back end, thread
//    count and repetition; NaN and Inf propagate;
//  - lengths 0, 1, 7, 255..257, 1000, 16385 and 1048587 (one to four levels of partials);
//  - operands of different sizes and a short workspace are usage_errors.
#include <catch2/catch.hpp>

#include <omp.h>
#include <thrust/system/cpp/execution_policy.h>
#include <thrust/system/omp/execution_policy.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <gradsync/kernels/host.hpp>
#include <gradsync/kernels/host_adasum.hpp>
#include <gradsync/kernels/thrust.hpp>

#include "gpu/kernel_reference.hpp"
#include "reference.hpp"

namespace {

using gradsync::bfloat16;
using gradsync::half;
using gradsync::kernels::dot_triple;
using namespace kernel_reference;

const std::vector<std::size_t> lengths{0, 1, 7, 255, 256, 257, 1000, 16385, 1048587};

// The back ends a kernel runs on: OpenMP with a thread count, or the sequential system.
struct backend {
    int omp_threads; // 0: thrust::cpp::par

    std::string name() const { return omp_threads ? "omp/" + std::to_string(omp_threads) : "cpp"; }

    template <class F>
    void run(F&& f) const
    {
        if (omp_threads == 0)
            return f(thrust::cpp::par);
        omp_set_num_threads(omp_threads);
        f(thrust::omp::par);
    }
};

const std::vector<backend> backends{{1}, {2}, {4}, {0}};

template <class T>
dot_triple thrust_triple(const backend& be, const std::vector<T>& a, const std::vector<T>& b)
{
    const std::size_t n = a.size();
    std::vector<dot_triple> ws(gradsync::kernels::triple_workspace(n) + guard, dot_triple{guard_value, 0, 0});
    dot_triple result{guard_value, guard_value, guard_value};
    be.run([&](const auto& exec) {
        gradsync::kernels::triple(exec, std::span<const T>(a), std::span<const T>(b), &result,
                                  std::span<dot_triple>(ws.data(), ws.size() - guard));
    });
    for (std::size_t i = ws.size() - guard; i < ws.size(); ++i)
        REQUIRE(ws[i].ab == guard_value);
    return result;
}

} // namespace

TEMPLATE_TEST_CASE("Thrust add and scale give the host kernels' bits", "[thrust][kernels]", half, bfloat16, float,
                   double)
{
    using T = TestType;
    using A = gradsync::accumulate_t<T>;
    for (const backend& be : backends)
        for (std::size_t n : lengths) {
            INFO(ref::type_name<T>() << " on " << be.name() << ", n = " << n);
            const std::vector<T> in = values<T>(1 + n, n, true);
            std::vector<T> want = values<T>(2 + n, n + guard, true);
            std::vector<T> got = want;
            gradsync::kernels::add<T>(std::span<T>(want.data(), n), std::span<const T>(in));
            be.run([&](const auto& exec) {
                gradsync::kernels::add(exec, std::span<T>(got.data(), n), std::span<const T>(in));
            });
            CHECK(first_difference(got, want) == -1);

            const A factor = A(1) / A(3);
            gradsync::kernels::scale<T>(std::span<T>(want.data(), n), factor);
            be.run([&](const auto& exec) { gradsync::kernels::scale(exec, std::span<T>(got.data(), n), factor); });
            CHECK(first_difference(got, want) == -1);
        }
}

TEMPLATE_TEST_CASE("Thrust scaled_add gives the host kernel's bits, in place on either operand", "[thrust][kernels]",
                   half, bfloat16, float, double)
{
    using T = TestType;
    const double ca = 1 - 0x1.3p-3, cb = 0.7 + 0x1.0p-40;
    for (const backend& be : backends)
        for (std::size_t n : lengths) {
            INFO(ref::type_name<T>() << " on " << be.name() << ", n = " << n);
            const std::vector<T> a = values<T>(3 + n, n, true), b = values<T>(4 + n, n, true);
            std::vector<T> want(n + guard, T(1.0f)), got = want;
            gradsync::kernels::scaled_add<T>(std::span<T>(want.data(), n), ca, std::span<const T>(a), cb,
                                             std::span<const T>(b));
            be.run([&](const auto& exec) {
                gradsync::kernels::scaled_add(exec, std::span<T>(got.data(), n), ca, std::span<const T>(a), cb,
                                              std::span<const T>(b));
            });
            CHECK(first_difference(got, want) == -1);

            std::vector<T> on_a = a, on_b = b;
            be.run([&](const auto& exec) {
                gradsync::kernels::scaled_add(exec, std::span<T>(on_a), ca, std::span<const T>(on_a), cb,
                                              std::span<const T>(b));
                gradsync::kernels::scaled_add(exec, std::span<T>(on_b), ca, std::span<const T>(a), cb,
                                              std::span<const T>(on_b));
            });
            want.resize(n);
            CHECK(first_difference(on_a, want) == -1);
            CHECK(first_difference(on_b, want) == -1);
        }
}

TEMPLATE_TEST_CASE("Thrust triple: the documented order on every back end, close to the host kernel",
                   "[thrust][kernels]", half, bfloat16, float, double)
{
    using T = TestType;
    for (std::size_t n : lengths) {
        INFO(ref::type_name<T>() << ", n = " << n);
        const std::vector<T> a = values<T>(5 + n, n, false), b = values<T>(6 + n, n, false);
        const dot_triple want = triple_in_documented_order(a, b);
        for (const backend& be : backends)
            for (int repeat = 0; repeat < 2; ++repeat) {
                INFO("on " << be.name() << ", repetition " << repeat);
                const dot_triple got = thrust_triple(be, a, b);
                CHECK(same_bits(got, want));
            }

        CHECK(close_to_host(want, a, b) == "");
    }
}

TEMPLATE_TEST_CASE("Thrust add_triple adds the documented-order triple to three doubles, and zero clears them",
                   "[thrust][kernels]", half, bfloat16, float, double)
{
    using T = TestType;
    for (std::size_t n : lengths) {
        INFO(ref::type_name<T>() << ", n = " << n);
        const std::vector<T> a = values<T>(9 + n, n, false), b = values<T>(10 + n, n, false);
        const dot_triple t = triple_in_documented_order(a, b);
        for (const backend& be : backends) {
            INFO("on " << be.name());
            // Three sums between two guards, starting from values the triple is added to.
            std::vector<double> sums{guard_value, 0.25, -3.0, 1e300, guard_value};
            std::vector<dot_triple> ws(gradsync::kernels::triple_workspace(n));
            be.run([&](const auto& exec) {
                gradsync::kernels::add_triple(exec, std::span<const T>(a), std::span<const T>(b), sums.data() + 1,
                                              std::span<dot_triple>(ws));
            });
            CHECK(sums[0] == guard_value);
            CHECK(sums[4] == guard_value);
            CHECK(std::bit_cast<std::uint64_t>(sums[1]) == std::bit_cast<std::uint64_t>(0.25 + t.ab));
            CHECK(std::bit_cast<std::uint64_t>(sums[2]) == std::bit_cast<std::uint64_t>(-3.0 + t.aa));
            CHECK(std::bit_cast<std::uint64_t>(sums[3]) == std::bit_cast<std::uint64_t>(1e300 + t.bb));
            be.run([&](const auto& exec) { gradsync::kernels::zero(exec, std::span<double>(sums).subspan(1, 3)); });
            CHECK(sums == std::vector<double>{guard_value, 0.0, 0.0, 0.0, guard_value});
            CHECK(!std::signbit(sums[1]));
        }
    }
}

TEMPLATE_TEST_CASE("Thrust triple propagates NaN and Inf", "[thrust][kernels]", half, float, double)
{
    using T = TestType;
    for (std::size_t n : {std::size_t(1), std::size_t(1000), std::size_t(16385)}) {
        std::vector<T> a = values<T>(7, n, false), b = values<T>(8, n, false);
        a[n / 2] = T(NAN);
        dot_triple t = thrust_triple(backend{2}, a, b);
        CHECK(std::isnan(t.ab));
        CHECK(std::isnan(t.aa));
        CHECK(!std::isnan(t.bb));
        a[n / 2] = T(1.0f);
        b[n - 1] = T(-INFINITY);
        t = thrust_triple(backend{2}, a, b);
        CHECK(std::isinf(t.bb));
        CHECK(!std::isnan(t.aa));
    }
}

TEST_CASE("Thrust kernels refuse operands of different sizes and a short workspace", "[thrust][kernels]")
{
    std::vector<float> a(300, 1.0f), b(299, 1.0f);
    std::vector<dot_triple> ws(gradsync::kernels::triple_workspace(300));
    dot_triple result;
    REQUIRE(ws.size() == 2);
    auto sa = std::span<float>(a);
    auto sb = std::span<const float>(b);
    CHECK_THROWS_WITH(gradsync::kernels::add(thrust::cpp::par, sa, sb), Catch::Contains("300 and 299"));
    CHECK_THROWS_AS(gradsync::kernels::scaled_add(thrust::cpp::par, sa, 1.0, std::span<const float>(a), 1.0, sb),
                    gradsync::usage_error);
    CHECK_THROWS_AS(gradsync::kernels::triple(thrust::cpp::par, std::span<const float>(a), sb, &result,
                                              std::span<dot_triple>(ws)),
                    gradsync::usage_error);
    CHECK_THROWS_WITH(gradsync::kernels::triple(thrust::cpp::par, std::span<const float>(a), std::span<const float>(a),
                                                &result, std::span<dot_triple>(ws.data(), 1)),
                      Catch::Contains("workspace of 2"));
    double sums[3] = {};
    CHECK_THROWS_WITH(gradsync::kernels::add_triple(thrust::cpp::par, std::span<const float>(a), sb, sums,
                                                    std::span<dot_triple>(ws)),
                      Catch::Contains("add_triple (Thrust): operands hold 300 and 299"));
    CHECK_THROWS_WITH(gradsync::kernels::add_triple(thrust::cpp::par, std::span<const float>(a),
                                                    std::span<const float>(a), sums, std::span<dot_triple>(ws.data(), 1)),
                      Catch::Contains("workspace of 2"));
}
