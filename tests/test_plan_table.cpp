// The plan table and the plan contract: every row gives, for every element type and policy
// in host memory (the integer types and the policies besides Sum, Average and Adasum among
// them), the plan the table's comment names, and that plan models reduction_plan;
// the front doors' concepts accept the library's policies and algorithms and nothing else;
// and a plan's scratch_bytes() is what its header says it holds (schedule.hpp's blocks,
// exchange.hpp's segments), worked out here from those rules, not read from the plan.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include <gradsync/gradsync.hpp>

namespace {

using gradsync::local_communicator;
template <class T, class Algorithm, class Policy>
using host_plan = gradsync::plan_of<T, local_communicator, Algorithm, Policy>;

template <class T>
constexpr bool rows_give_the_named_plans()
{
    using namespace gradsync;
    using C = local_communicator;
    static_assert(std::is_same_v<host_plan<T, ring, sum>, ring_plan<T, C, sum>>);
    static_assert(std::is_same_v<host_plan<T, ring, average>, ring_plan<T, C, average>>);
    static_assert(std::is_same_v<host_plan<T, ring, adasum>, adasum_ring_plan<T, C>>);
    static_assert(std::is_same_v<host_plan<T, recursive_halving, sum>, recursive_halving_plan<T, C, sum>>);
    static_assert(std::is_same_v<host_plan<T, recursive_halving, adasum>, adasum_recursive_halving_plan<T, C>>);
    static_assert(std::is_same_v<host_plan<T, recursive_doubling, average>, recursive_doubling_plan<T, C, average>>);
    static_assert(std::is_same_v<host_plan<T, recursive_doubling, adasum>, adasum_recursive_doubling_plan<T, C>>);
    static_assert(std::is_same_v<host_plan<T, hierarchical, adasum>, hierarchical_plan<T, C, adasum>>);
    static_assert(std::is_same_v<host_plan<T, automatic, sum>, automatic_plan<T, C, sum, host_memory>>);
    static_assert(std::is_same_v<host_plan<T, tuned, average>, tuned_plan<T, C, average>>);
    static_assert(!has_plan<T, C, tuned, adasum>);
    static_assert(std::is_same_v<host_plan<T, shared_memory, sum>, shared_memory_plan<T, C, sum>>);
    static_assert(std::is_same_v<host_plan<T, shared_memory, adasum>, adasum_shared_memory_plan<T, C>>);
    return true;
}

template <class T, class Algorithm, class Policy>
constexpr bool models_the_contract()
{
    using P = host_plan<T, Algorithm, Policy>;
    return gradsync::has_plan<T, local_communicator, Algorithm, Policy> && gradsync::reduction_plan<P> &&
        std::is_same_v<typename P::algorithm_type, Algorithm> &&
        std::is_same_v<typename P::data_type, std::span<T>>;
}

template <class T, class Algorithm>
constexpr bool every_policy()
{
    return models_the_contract<T, Algorithm, gradsync::sum>() && models_the_contract<T, Algorithm, gradsync::average>() &&
        models_the_contract<T, Algorithm, gradsync::adasum>();
}

template <class T>
constexpr bool every_row()
{
    using namespace gradsync;
    return every_policy<T, ring>() && every_policy<T, recursive_halving>() && every_policy<T, recursive_doubling>() &&
        every_policy<T, hierarchical>() && every_policy<T, automatic>() && models_the_contract<T, tuned, sum>() &&
        models_the_contract<T, tuned, average>() && every_policy<T, shared_memory>();
}

// An elementwise policy other than Sum and Average gets every elementwise row's plan, for
// each element type it reduces.
template <class T, class Policy>
constexpr bool every_elementwise_row()
{
    using namespace gradsync;
    using C = local_communicator;
    static_assert(std::is_same_v<host_plan<T, ring, Policy>, ring_plan<T, C, Policy>>);
    static_assert(std::is_same_v<host_plan<T, recursive_halving, Policy>, recursive_halving_plan<T, C, Policy>>);
    static_assert(std::is_same_v<host_plan<T, recursive_doubling, Policy>, recursive_doubling_plan<T, C, Policy>>);
    static_assert(std::is_same_v<host_plan<T, hierarchical, Policy>, hierarchical_plan<T, C, Policy>>);
    static_assert(std::is_same_v<host_plan<T, shared_memory, Policy>, shared_memory_plan<T, C, Policy>>);
    static_assert(std::is_same_v<host_plan<T, automatic, Policy>, automatic_plan<T, C, Policy, host_memory>>);
    static_assert(std::is_same_v<host_plan<T, tuned, Policy>, tuned_plan<T, C, Policy>>);
    return models_the_contract<T, ring, Policy>() && models_the_contract<T, recursive_halving, Policy>() &&
        models_the_contract<T, recursive_doubling, Policy>() && models_the_contract<T, hierarchical, Policy>() &&
        models_the_contract<T, shared_memory, Policy>() && models_the_contract<T, automatic, Policy>() &&
        models_the_contract<T, tuned, Policy>();
}

template <class T>
constexpr bool every_row_of_the_other_policies()
{
    using namespace gradsync;
    bool all = every_elementwise_row<T, minimum>() && every_elementwise_row<T, maximum>() &&
        every_elementwise_row<T, product>();
    if constexpr (std::is_integral_v<T>)
        all = all && every_elementwise_row<T, sum>() && every_elementwise_row<T, bitwise_and>() &&
            every_elementwise_row<T, bitwise_or>() && every_elementwise_row<T, bitwise_xor>();
    return all;
}

// A policy that is neither elementwise nor Adasum, and a type that is no algorithm.
struct median_policy {
    static constexpr std::uint32_t code = 99;
    static constexpr const char* name = "median";
};
struct not_an_algorithm {
    static constexpr std::uint32_t code = 98;
    static constexpr const char* name = "not_an_algorithm";
};

std::size_t elems_per_segment(std::size_t elem_bytes)
{
    return gradsync::pipeline_options{}.segment_bytes / elem_bytes;
}

} // namespace

TEST_CASE("every row of the table names its plan, and every plan models reduction_plan", "[plan_table]")
{
    STATIC_REQUIRE(rows_give_the_named_plans<gradsync::half>());
    STATIC_REQUIRE(rows_give_the_named_plans<gradsync::bfloat16>());
    STATIC_REQUIRE(rows_give_the_named_plans<float>());
    STATIC_REQUIRE(rows_give_the_named_plans<double>());
    STATIC_REQUIRE(every_row<gradsync::half>());
    STATIC_REQUIRE(every_row<gradsync::bfloat16>());
    STATIC_REQUIRE(every_row<float>());
    STATIC_REQUIRE(every_row<double>());
}

TEST_CASE("the other elementwise policies and the integer types take every elementwise row", "[plan_table]")
{
    STATIC_REQUIRE(every_row_of_the_other_policies<gradsync::half>());
    STATIC_REQUIRE(every_row_of_the_other_policies<gradsync::bfloat16>());
    STATIC_REQUIRE(every_row_of_the_other_policies<float>());
    STATIC_REQUIRE(every_row_of_the_other_policies<double>());
    STATIC_REQUIRE(every_row_of_the_other_policies<std::int8_t>());
    STATIC_REQUIRE(every_row_of_the_other_policies<std::uint8_t>());
    STATIC_REQUIRE(every_row_of_the_other_policies<std::int32_t>());
    STATIC_REQUIRE(every_row_of_the_other_policies<std::int64_t>());
}

TEST_CASE("the front doors' concepts admit the library's policies and algorithms only", "[plan_table]")
{
    using namespace gradsync;
    STATIC_REQUIRE(reduction_policy<sum>);
    STATIC_REQUIRE(reduction_policy<average>);
    STATIC_REQUIRE(reduction_policy<adasum>);
    STATIC_REQUIRE(reduction_policy<minimum>);
    STATIC_REQUIRE(reduction_policy<maximum>);
    STATIC_REQUIRE(reduction_policy<product>);
    STATIC_REQUIRE(reduction_policy<bitwise_and>);
    STATIC_REQUIRE(reduction_policy<bitwise_or>);
    STATIC_REQUIRE(reduction_policy<bitwise_xor>);
    STATIC_REQUIRE_FALSE(reduction_policy<ring>);
    STATIC_REQUIRE_FALSE(reduction_policy<median_policy>);
    STATIC_REQUIRE(allreduce_algorithm<ring>);
    STATIC_REQUIRE(allreduce_algorithm<recursive_halving>);
    STATIC_REQUIRE(allreduce_algorithm<recursive_doubling>);
    STATIC_REQUIRE(allreduce_algorithm<hierarchical>);
    STATIC_REQUIRE(allreduce_algorithm<automatic>);
    STATIC_REQUIRE(allreduce_algorithm<tuned>);
    STATIC_REQUIRE(allreduce_algorithm<shared_memory>);
    STATIC_REQUIRE_FALSE(allreduce_algorithm<sum>);
    STATIC_REQUIRE_FALSE(allreduce_algorithm<not_an_algorithm>);
    STATIC_REQUIRE_FALSE(has_plan<float, local_communicator, ring, median_policy>);
}

TEST_CASE("a plan's scratch_bytes() is the scratch its header describes", "[plan_table]")
{
    const std::size_t count = 1'000'003; // blocks of unequal size for N = 3
    for (int n : {1, 2, 3, 4}) {
        gradsync::local_group group(n);
        const std::size_t ranks = std::size_t(n);
        std::vector<std::size_t> ring_bytes(ranks), doubling_bytes(ranks), adasum_ring_bytes(ranks),
            adasum_doubling_bytes(ranks);
        group.run([&](local_communicator& comm) {
            const gradsync::layer_layout layout(count, {});
            const std::size_t r = std::size_t(comm.rank());
            ring_bytes[r] = host_plan<float, gradsync::ring, gradsync::sum>(comm, layout, {}).scratch_bytes();
            doubling_bytes[r] =
                host_plan<float, gradsync::recursive_doubling, gradsync::sum>(comm, layout, {}).scratch_bytes();
            adasum_ring_bytes[r] = host_plan<float, gradsync::ring, gradsync::adasum>(comm, layout, {}).scratch_bytes();
            adasum_doubling_bytes[r] =
                host_plan<float, gradsync::recursive_doubling, gradsync::adasum>(comm, layout, {}).scratch_bytes();
        });
        INFO("N = " << n);
        const std::size_t largest_block = gradsync::block_of(count, n, 0).size();
        const std::size_t window = std::size_t(gradsync::pipeline_options{}.window);
        for (int r = 0; r < n; ++r) {
            INFO("rank " << r);
            // The ring: `window` segments of the largest block, or the block itself.
            CHECK(ring_bytes[std::size_t(r)] ==
                  std::min(largest_block, window * elems_per_segment(sizeof(float))) * sizeof(float));
            // Recursive doubling: the partner's whole vector.
            CHECK(doubling_bytes[std::size_t(r)] == count * sizeof(float));
            // Adasum's plans add their layer triples (layer_triples.hpp: three doubles per
            // layer, and no workspace in host memory; one layer here).
            const std::size_t triples = 3 * sizeof(double);
            CHECK(adasum_doubling_bytes[std::size_t(r)] == count * sizeof(float) + triples);
            // Adasum's ring: the other ranks' copies of this rank's block, the triples, and
            // the triple sum's recursive doubling (three doubles).
            const std::size_t mine = gradsync::block_of(count, n, r).size();
            CHECK(adasum_ring_bytes[std::size_t(r)] ==
                  std::size_t(n - 1) * mine * sizeof(float) + triples + 3 * sizeof(double));
        }
    }
}
