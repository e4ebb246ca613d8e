// The Thrust kernels (kernels/thrust.hpp) on the CPU back ends, Thrust's OpenMP system with
// 1, 2 and 4 threads and its sequential CPP system, against the host kernels:
//  - add, scale and scaled_add bit for bit (NaN: NaN) for fp16, bf16, fp32 and fp64, with
//    Inf and NaN among the inputs, out aliasing a or b, and guard elements past the span;
//  - triple bit for bit against a plain loop of the order the header documents (level-1
//    lanes of stride ceil(n/256), then lanes of stride ceil(L/64)); it and the host kernel
//    each within Higham's rounding bound of the exact triple; the same bits on every back end, thread
//    count and repetition; NaN and Inf propagate;
//  - lengths 0, 1, 7, 255..257, 1000, 16385 and 1048587 (one to four levels of partials);
//  - part tables (kernels/thrust_adasum.hpp): parts of those lengths over several layers,
//    operands and results in data and scratch, a layer in three parts: each layer's sums
//    gain triple()'s bits of each part in part order, in one call or cut in two; the scaled
//    add gives the host kernel's bits with adasum::from of the sums, guards untouched; 107
//    small parts take as many levels as one part of all their elements;
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
#include <gradsync/kernels/thrust_adasum.hpp>
#include <gradsync/policy/adasum.hpp>

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

namespace {

using gradsync::kernels::adasum_part;
using gradsync::kernels::in_data;
using gradsync::kernels::in_scratch;

// A part table over 5 layers: layer 1 in three parts (a layer cut by segments), one part
// of every length (a tree of one to four levels), operands in data and in scratch either
// way round, results in both; layer 3 has no part.
struct part_case {
    std::vector<adasum_part> parts;
    std::size_t data_size = 0, scratch_size = 0;

    part_case()
    {
        const std::size_t layer_of[] = {0, 1, 1, 1, 2, 4, 4};
        const std::size_t sizes[] = {1, 7, 256, 16385, 257, 1048587, 1000};
        for (std::size_t p = 0; p < 7; ++p) {
            const std::size_t n = sizes[p];
            const bool swap = p % 2 == 1, into_scratch = p == 4;
            adasum_part q{layer_of[p], 0, 0, 0, n, swap ? in_scratch : in_data, swap ? in_data : in_scratch, 0};
            q.a = q.a_in == in_data ? data_size : scratch_size;
            q.b = q.b_in == in_data ? data_size : scratch_size;
            q.out_in = into_scratch ? in_scratch : in_data;
            q.out = q.out_in == in_data ? data_size : scratch_size;
            data_size += n + guard; // guards between parts stay untouched
            scratch_size += n + guard;
            parts.push_back(q);
        }
    }
};

template <class T>
std::span<const T> operand(const std::vector<T>& data, const std::vector<T>& scratch, std::uint32_t in,
                           std::uint64_t at, std::uint64_t n)
{
    return std::span<const T>((in == in_scratch ? scratch : data).data() + at, n);
}

} // namespace

TEMPLATE_TEST_CASE("Thrust part tables: each layer's parts add triple()'s bits in part order, and the scaled add "
                   "applies adasum's coefficients of the sums with the host kernel's bits",
                   "[thrust][kernels]", half, bfloat16, float, double)
{
    using T = TestType;
    const part_case c;
    const gradsync::kernels::part_lanes lanes(c.parts);
    const gradsync::kernels::part_arrays arrays{c.parts.data(), lanes.starts.data(), lanes.flat.data(),
                                                lanes.groups.data()};
    const std::vector<T> data0 = values<T>(21, c.data_size, false), scratch0 = values<T>(22, c.scratch_size, false);
    // The triples as triple() forms them alone, added to sums that start away from zero.
    std::vector<double> want(3 * 5 + 2, guard_value);
    for (std::size_t l = 0; l < 5; ++l)
        for (int k = 0; k < 3; ++k)
            want[1 + 3 * l + k] = 0.25 * double(l + 1) - k;
    const std::vector<double> start = want;
    for (const adasum_part& q : c.parts) {
        const std::span<const T> a = operand(data0, scratch0, q.a_in, q.a, q.size),
                                 b = operand(data0, scratch0, q.b_in, q.b, q.size);
        const dot_triple t = thrust_triple(backend{0}, std::vector<T>(a.begin(), a.end()), std::vector<T>(b.begin(), b.end()));
        double* s = want.data() + 1 + 3 * q.layer;
        s[0] = s[0] + t.ab;
        s[1] = s[1] + t.aa;
        s[2] = s[2] + t.bb;
    }
    // The scaled add: the host kernel with adasum::from of the layer's sums.
    std::vector<T> want_data = data0, want_scratch = scratch0;
    for (const adasum_part& q : c.parts) {
        const double* s = want.data() + 1 + 3 * q.layer;
        const gradsync::adasum::coefficients k = gradsync::adasum::from({s[0], s[1], s[2]});
        std::vector<T>& out = q.out_in == in_scratch ? want_scratch : want_data;
        const std::vector<T> a(operand(data0, scratch0, q.a_in, q.a, q.size).begin(),
                               operand(data0, scratch0, q.a_in, q.a, q.size).end()),
            b(operand(data0, scratch0, q.b_in, q.b, q.size).begin(), operand(data0, scratch0, q.b_in, q.b, q.size).end());
        gradsync::kernels::scaled_add<T>(std::span<T>(out.data() + q.out, q.size), k.a, std::span<const T>(a), k.b,
                                         std::span<const T>(b));
    }
    for (const backend& be : backends)
        for (const std::size_t cut : {std::size_t(0), std::size_t(3), std::size_t(5)}) {
            INFO(ref::type_name<T>() << " on " << be.name() << ", parts in two calls cut at " << cut);
            std::vector<double> sums = start;
            std::vector<dot_triple> low(lanes.low + guard), high(lanes.high + guard);
            std::vector<T> data = data0, scratch = scratch0;
            const gradsync::kernels::adasum_operands<T> x{data.data(), scratch.data()};
            const gradsync::kernels::adasum_operands<const T> cx{data.data(), scratch.data()};
            be.run([&](const auto& exec) {
                gradsync::kernels::add_part_triples(exec, lanes, arrays, 0, cut, cx, sums.data() + 1, low.data(),
                                                    high.data());
                gradsync::kernels::add_part_triples(exec, lanes, arrays, cut, c.parts.size(), cx, sums.data() + 1,
                                                    low.data(), high.data());
            });
            for (std::size_t i = 0; i < sums.size(); ++i) {
                INFO("sum " << i);
                CHECK(std::bit_cast<std::uint64_t>(sums[i]) == std::bit_cast<std::uint64_t>(want[i]));
            }
            be.run([&](const auto& exec) {
                gradsync::kernels::scaled_add_parts(exec, lanes, arrays, 0, cut, x, sums.data() + 1);
                gradsync::kernels::scaled_add_parts(exec, lanes, arrays, cut, c.parts.size(), x, sums.data() + 1);
            });
            CHECK(first_difference(data, want_data) == -1);
            CHECK(first_difference(scratch, want_scratch) == -1);
        }
}

TEST_CASE("Thrust part tables: the triples take as many launches as one part of all the elements would", "[thrust][kernels]")
{
    using gradsync::kernels::part_lanes;
    // 107 parts of 1..300 elements, and one part of as many elements.
    std::vector<adasum_part> many;
    std::uint64_t at = 0;
    for (std::uint64_t l = 0; l < 107; ++l) {
        const std::uint64_t n = 1 + l * 37 % 300;
        many.push_back({l, at, at, at, n, in_data, in_scratch, in_data});
        at += n;
    }
    const std::vector<adasum_part> one{{0, 0, 0, 0, at, in_data, in_scratch, in_data}};
    const part_lanes m(many), o(one);
    CHECK(m.levels == o.levels);
    CHECK(m.depth_below(0, many.size()) == o.depth_below(0, 1));
    CHECK(m.groups.size() == 108);
    CHECK(m.flat.back() == at);
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
}
