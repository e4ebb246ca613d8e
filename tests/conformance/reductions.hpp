// The reductions conformance suite: the elementwise policies besides Average (sum, minimum,
// maximum, product, bitwise_and, bitwise_or, bitwise_xor) over every element type each takes,
// the integers int8, uint8, int32 and int64 among them, on host memory, once for every
// transport: a driver declares `conformance::harness` (harness.hpp) and includes this file,
// which registers the TEST_CASEs (tag [reductions]). For each N the harness runs (local_group:
// 1..5 and 7; a launched job: the launcher's N), each policy and type (a launched job: Sum
// over the integers, the other policies over float and int32; see runs() and types_for):
//  - the algorithms (which over which type: runs()): ring, recursive_halving,
//    recursive_doubling, hierarchical (nodes of N/2 ranks where N is even, else of one, and
//    the communicator's one node), shared_memory, automatic and tuned (two rounds, so that
//    its calls run every candidate and then the one it kept);
//  - layouts {} (no element), {1}, {0, 1, 0} and {500, 0, 1, 7, 493}: one-shot allreduce,
//    then a reducer called twice (tuned: fifteen times), each call on the same input;
//  - the integers' wraparound at their limits (int8's 127 + 1 among them).
// Checks (docs/semantics.md): every result equals the reference, the ranks' inputs combined
// in rank order by the plain operations below, and every rank's result has rank 0's bits.
// The inputs make the rank-order reference every algorithm's result: integer arithmetic
// modulo 2^bits, minimum, maximum and the bitwise operations do not depend on the order or
// grouping of the operands; floating-point sums and products get values whose every partial
// result is exact (see make_input).
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <gradsync/gradsync.hpp>

#include "../reference.hpp"
#include "harness.hpp"

namespace conformance::reductions {

enum class operation { sum, minimum, maximum, product, bit_and, bit_or, bit_xor };

template <class Policy>
constexpr operation operation_of()
{
    if constexpr (std::is_same_v<Policy, gradsync::sum>)
        return operation::sum;
    else if constexpr (std::is_same_v<Policy, gradsync::minimum>)
        return operation::minimum;
    else if constexpr (std::is_same_v<Policy, gradsync::maximum>)
        return operation::maximum;
    else if constexpr (std::is_same_v<Policy, gradsync::product>)
        return operation::product;
    else if constexpr (std::is_same_v<Policy, gradsync::bitwise_and>)
        return operation::bit_and;
    else if constexpr (std::is_same_v<Policy, gradsync::bitwise_or>)
        return operation::bit_or;
    else
        return operation::bit_xor;
}

// a op b as docs/semantics.md defines it, written from the definitions: integers in 64-bit
// unsigned arithmetic (modulo 2^64, then 2^bits), the others in double, which holds every
// element type exactly and, for the inputs of make_input, every sum and product exactly too.
template <class T>
T combine(operation op, T a, T b)
{
    if constexpr (std::integral<T>) {
        const std::uint64_t x = std::uint64_t(a), y = std::uint64_t(b);
        switch (op) {
        case operation::sum: return T(x + y);
        case operation::product: return T(x * y);
        case operation::minimum: return ref::extremum(a, b, true);
        case operation::maximum: return ref::extremum(a, b, false);
        case operation::bit_and: return T(x & y);
        case operation::bit_or: return T(x | y);
        case operation::bit_xor: return T(x ^ y);
        }
        return a;
    } else {
        const double x = double(a), y = double(b);
        if (op == operation::sum)
            return ref::narrow<T>(x + y);
        if (op == operation::product)
            return ref::narrow<T>(x * y);
        return ref::extremum(a, b, op == operation::minimum);
    }
}

// Rank r's input, element i, for a key k = ref::key(seed, r, i):
//  - integers: every bit pattern, with the limits, 0 and -1 (all ones) often;
//  - minimum and maximum: +0, -0, NaNs of both signs and any payload (signalling ones too),
//    +-Inf, the smallest subnormals and any other bit pattern;
//  - sum: integers in [-2, 2] and -0: every partial sum over up to 7 ranks is an integer of
//    magnitude at most 14 (or a zero), exact in every type, so any order gives the same bits;
//  - product: +-0.5, +-1, +-2, +-0, +-Inf and NaN now and then: a product of up to 7 of them
//    is a power of two between 2^-7 and 2^7, a zero, an Inf or a NaN, exact in every type and
//    with a sign that does not depend on the order; Inf times 0 is a NaN in any order. NaNs
//    are compared as NaNs (a product keeps one operand's payload).
template <class T>
T make_input(operation op, std::uint64_t k)
{
    const std::uint64_t pick = k % 16, rest = k >> 4;
    if constexpr (std::integral<T>) {
        switch (pick) {
        case 0: return std::numeric_limits<T>::max();
        case 1: return std::numeric_limits<T>::min();
        case 2: return T(0);
        case 3: return T(~std::uint64_t(0));
        case 4: return T(1);
        default: return T(rest);
        }
    } else {
        using I = ref::ieee<T>;
        const std::uint64_t sign = (rest & 1) ? I::sign : 0;
        switch (op) {
        case operation::minimum:
        case operation::maximum:
            switch (pick) {
            case 0: return ref::from_bits<T>(0);
            case 1: return ref::from_bits<T>(I::sign);
            case 2: // a NaN: a payload of at least 1
                return ref::from_bits<T>(sign | I::exponent | std::max<std::uint64_t>(1, (rest >> 1) & I::fraction));
            case 3: return ref::from_bits<T>(sign | I::exponent);
            case 4: return ref::from_bits<T>(sign | 1u);
            default: return ref::from_bits<T>(rest);
            }
        case operation::sum: {
            const int v = int(rest % 6) - 3; // -3 stands for -0
            return v == -3 ? ref::narrow<T>(-0.0) : ref::narrow<T>(double(v));
        }
        default: {
            const double magnitude[] = {0.5, 1.0, 2.0};
            const double s = sign ? -1.0 : 1.0;
            if (pick == 0)
                return ref::narrow<T>(s * 0.0);
            if (pick == 1)
                return ref::narrow<T>(s * INFINITY);
            if (pick == 2 && (rest >> 1) % 4 == 0)
                return ref::from_bits<T>(sign | I::exponent | I::fraction);
            return ref::narrow<T>(s * magnitude[(rest >> 1) % 3]);
        }
        }
    }
}

template <class T>
std::vector<T> input(operation op, std::uint64_t seed, int rank, std::size_t count)
{
    std::vector<T> v(count);
    for (std::size_t i = 0; i < count; ++i)
        v[i] = make_input<T>(op, ref::key(seed, rank, i));
    return v;
}

template <class T>
std::vector<T> in_rank_order(operation op, const std::vector<std::vector<T>>& inputs)
{
    std::vector<T> want = inputs[0];
    for (std::size_t r = 1; r < inputs.size(); ++r)
        for (std::size_t i = 0; i < want.size(); ++i)
            want[i] = combine(op, want[i], inputs[r][i]);
    return want;
}

// "" when got has want's bits, else the first difference. A sum's or product's NaN may be
// any NaN; so may a NaN on one rank, which meets nothing: the algorithms leave it as it is,
// but for recursive_doubling, which makes every NaN canonical (docs/semantics.md).
template <class T>
std::string first_difference(operation op, int n, const std::vector<T>& got, const std::vector<T>& want)
{
    if (got.size() != want.size())
        return "size " + std::to_string(got.size()) + " != " + std::to_string(want.size());
    const bool any_nan = op == operation::sum || op == operation::product || n == 1;
    for (std::size_t i = 0; i < got.size(); ++i) {
        bool ok = ref::same_bits(&got[i], &want[i], sizeof(T));
        if constexpr (!std::integral<T>)
            ok = ok || (any_nan && std::isnan(double(got[i])) && std::isnan(double(want[i])));
        if (!ok)
            return "element " + std::to_string(i) + ": got " + ref::show(got[i]) + ", want " + ref::show(want[i]);
    }
    return "";
}

// The algorithms, by index: the hierarchical ones depend on N.
constexpr std::size_t algorithms = 8;

inline const char* algorithm_label(std::size_t a)
{
    static constexpr const char* labels[algorithms] = {
        "ring",         "recursive_halving",           "recursive_doubling", "hierarchical{N/2 or 1}",
        "shared_memory", "hierarchical{one node}", "automatic",          "tuned{rounds = 2}"};
    return labels[a];
}

// tuned runs its candidates (up to 7) twice each, then the one it kept.
inline std::size_t reducer_calls(std::size_t a) { return a == 7 ? 15 : 2; }

// Whether harness H runs algorithm a over element type T. In-process: ring and shared_memory
// over every type; the other algorithms that combine (recursive halving and doubling,
// hierarchical) over one type of each element size, floating and integer at 4 bytes (int8,
// half, float, int32, int64), since what they do with an element beyond the combine that
// ring and shared_memory check on every type is cut, place and send it by its size; the two
// that choose among them (automatic, tuned), whose choosing does not depend on the type, over
// float and int32. In a launched job ring and shared_memory (the message path, and the one
// automatic takes on one host), whose transport carries the policies' bytes as it carries
// Sum's (the allreduce matrix runs Sum on every algorithm there). Every reducer type costs
// each program that holds it compile time (docs/results.md, "The test suite's time").
template <class T>
constexpr bool combines_over = std::is_same_v<T, std::int8_t> || std::is_same_v<T, gradsync::half> ||
                               std::is_same_v<T, float> || std::is_same_v<T, std::int32_t> ||
                               std::is_same_v<T, std::int64_t>;
template <class T>
constexpr bool chooses_over = std::is_same_v<T, float> || std::is_same_v<T, std::int32_t>;

template <class H, class T>
constexpr bool runs(std::size_t a)
{
    if (a == 0 || a == 4)
        return true;
    if (!H::in_process)
        return false;
    return a < 6 ? combines_over<T> : chooses_over<T>;
}

template <class H, class T, class F>
void with_algorithm(std::size_t a, int n, F&& f)
{
    if (a == 0)
        return f(gradsync::ring{});
    if (a == 4)
        return f(gradsync::shared_memory{});
    if constexpr (H::in_process && combines_over<T>) {
        switch (a) {
        case 1: return f(gradsync::recursive_halving{});
        case 2: return f(gradsync::recursive_doubling{});
        case 3: return f(gradsync::hierarchical{.ranks_per_node = n % 2 == 0 ? n / 2 : 1});
        case 5: return f(gradsync::hierarchical{});
        }
    }
    if constexpr (H::in_process && chooses_over<T>) {
        if (a == 6)
            return f(gradsync::automatic{});
        return f(gradsync::tuned{.rounds = 2});
    }
}

// Every algorithm on every layout for every N of `sizes`; inputs(n, layout, algorithm, rank,
// count) gives a rank's input, the same for every call of a case.
template <class H, class T, class Policy, class Inputs>
void run_cases(const std::vector<int>& sizes, const std::vector<std::vector<std::size_t>>& layouts, Inputs inputs)
{
    using comm_type = typename H::comm_type;
    constexpr operation op = operation_of<Policy>();
    for (int n : H::sizes(sizes)) {
        // [layout][algorithm][call][rank]
        std::vector<std::array<std::vector<per_rank<T>>, algorithms>> out(layouts.size());
        for (auto& l : out)
            for (std::size_t a = 0; a < algorithms; ++a)
                l[a].assign(1 + reducer_calls(a), per_rank<T>(std::size_t(n)));
        const std::string escaped = H::run(n, [&](comm_type& comm) {
            const int r = comm.rank();
            for (std::size_t l = 0; l < layouts.size(); ++l) {
                const std::span<const std::size_t> layers(layouts[l]);
                std::size_t count = 0;
                for (std::size_t s : layers)
                    count += s;
                for (std::size_t a = 0; a < algorithms; ++a)
                    if (runs<H, T>(a))
                        with_algorithm<H, T>(a, n, [&](auto algo) {
                            const std::vector<T> in = inputs(n, l, a, r, count);
                            std::vector<T> data = in;
                            gradsync::allreduce(comm, std::span<T>(data), Policy{}, algo, layers);
                            out[l][a][0][std::size_t(r)] = std::move(data);
                            gradsync::reducer<T, comm_type, Policy, decltype(algo)> reduce(comm, layers, algo);
                            for (std::size_t call = 1; call <= reducer_calls(a); ++call) {
                                data = in;
                                reduce(std::span<T>(data));
                                out[l][a][call][std::size_t(r)] = std::move(data);
                            }
                        });
            }
        });
        {
            INFO("N " << n);
            CHECK(escaped == "");
        }
        if (!escaped.empty())
            continue;
        const auto here = std::size_t(H::checked_rank());
        for (std::size_t l = 0; l < layouts.size(); ++l)
            for (std::size_t a = 0; a < algorithms; ++a) {
                if (!runs<H, T>(a))
                    continue;
                std::size_t count = 0;
                for (std::size_t s : layouts[l])
                    count += s;
                std::vector<std::vector<T>> in;
                for (int q = 0; q < n; ++q)
                    in.push_back(inputs(n, l, a, q, count));
                const std::vector<T> want = in_rank_order(op, in);
                for (std::size_t call = 0; call < out[l][a].size(); ++call) {
                    const std::string identical = H::identical(out[l][a][call]);
                    const std::string which = call == 0 ? "one-shot" : "reducer call " + std::to_string(call);
                    INFO(Policy::name << ", " << ref::type_name<T>() << ", " << algorithm_label(a) << ", rank " << here
                                      << " of N " << n << ", " << count << " elements in " << layouts[l].size()
                                      << " layers, " << which);
                    CHECK(first_difference(op, n, out[l][a][call][here], want) == "");
                    CHECK(identical == "");
                }
            }
    }
}

template <class H, class T, class Policy>
void run_matrix()
{
    const std::vector<std::vector<std::size_t>> layouts{{}, {1}, {0, 1, 0}, {500, 0, 1, 7, 493}};
    run_cases<H, T, Policy>({1, 2, 3, 4, 5, 7}, layouts, [](int n, std::size_t l, std::size_t a, int r, std::size_t c) {
        return input<T>(operation_of<Policy>(), ref::mix(std::uint64_t(n) * 1009 + l * 31 + a), r, c);
    });
}

// Sums and products at the integers' limits: rank 0 holds max, min, max, min and 2^(bits-1),
// every other rank 1, -1, max, min and 2, so that the first element of a sum over two ranks
// is max + 1, which wraps to min (int8: 127 + 1 = -128; uint8: 255 + 1 = 0).
template <class T>
std::vector<T> at_limits(int rank)
{
    constexpr T max = std::numeric_limits<T>::max(), min = std::numeric_limits<T>::min();
    const T top = T(std::uint64_t(1) << (8 * sizeof(T) - 1));
    if (rank == 0)
        return {max, min, max, min, top};
    return {T(1), T(~std::uint64_t(0)), max, min, T(2)};
}

template <class H, class T>
void run_wraparound()
{
    {
        INFO("the reference wraps: max + 1 is min");
        CHECK(combine(operation::sum, std::numeric_limits<T>::max(), T(1)) == std::numeric_limits<T>::min());
    }
    const auto at = [](int, std::size_t, std::size_t, int r, std::size_t) { return at_limits<T>(r); };
    run_cases<H, T, gradsync::sum>({2, 3, 5}, {{5}}, at);
    run_cases<H, T, gradsync::product>({2, 3, 5}, {{5}}, at);
}

} // namespace conformance::reductions

namespace conformance::reductions {

using every_type = std::tuple<gradsync::half, gradsync::bfloat16, float, double, std::int8_t, std::uint8_t, std::int32_t,
                              std::int64_t>;
using integer_types = std::tuple<std::int8_t, std::uint8_t, std::int32_t, std::int64_t>;

// The types of a launched job (see runs()): Sum over the integers, which the allreduce matrix
// does not hold; the other policies over one floating and one integer type, each element
// size crossing the transport in Sum's cases.
template <class Every, class Launched>
using types_for = std::conditional_t<harness::in_process, Every, Launched>;
using sum_types = types_for<every_type, integer_types>;
using ordered_types = types_for<every_type, std::tuple<float, std::int32_t>>;
using bitwise_types = types_for<integer_types, std::tuple<std::int32_t>>;

} // namespace conformance::reductions

TEMPLATE_LIST_TEST_CASE("reductions: sum", "[reductions]", conformance::reductions::sum_types)
{
    conformance::reductions::run_matrix<conformance::harness, TestType, gradsync::sum>();
}

TEMPLATE_LIST_TEST_CASE("reductions: minimum", "[reductions]", conformance::reductions::ordered_types)
{
    conformance::reductions::run_matrix<conformance::harness, TestType, gradsync::minimum>();
}

TEMPLATE_LIST_TEST_CASE("reductions: maximum", "[reductions]", conformance::reductions::ordered_types)
{
    conformance::reductions::run_matrix<conformance::harness, TestType, gradsync::maximum>();
}

TEMPLATE_LIST_TEST_CASE("reductions: product", "[reductions]", conformance::reductions::ordered_types)
{
    conformance::reductions::run_matrix<conformance::harness, TestType, gradsync::product>();
}

TEMPLATE_LIST_TEST_CASE("reductions: bitwise_and", "[reductions]", conformance::reductions::bitwise_types)
{
    conformance::reductions::run_matrix<conformance::harness, TestType, gradsync::bitwise_and>();
}

TEMPLATE_LIST_TEST_CASE("reductions: bitwise_or", "[reductions]", conformance::reductions::bitwise_types)
{
    conformance::reductions::run_matrix<conformance::harness, TestType, gradsync::bitwise_or>();
}

TEMPLATE_LIST_TEST_CASE("reductions: bitwise_xor", "[reductions]", conformance::reductions::bitwise_types)
{
    conformance::reductions::run_matrix<conformance::harness, TestType, gradsync::bitwise_xor>();
}

TEMPLATE_LIST_TEST_CASE("reductions: integer sums and products wrap modulo 2^bits at the limits", "[reductions]",
                        conformance::reductions::integer_types)
{
    conformance::reductions::run_wraparound<conformance::harness, TestType>();
}
