// Algorithms as run-time values, so one test runner covers every algorithm tag, and the
// reference result and tolerance of each: shared by the host Adasum tests (test_adasum.cpp)
// and the device ones (gpu/adasum_cases.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <gradsync/gradsync.hpp>

#include "adasum_reference.hpp"

namespace adasum_variant {

enum class alg { recursive_halving, recursive_doubling, ring, automatic, hierarchical, shared_memory };

struct variant {
    alg a = alg::recursive_halving;
    int k = 0;                     // hierarchical: ranks_per_node (0: ask the communicator)
    bool node_sum = false;         // hierarchical: node_combine::sum instead of average
    bool small_thresholds = false; // automatic{.small_bytes = 256, .ring_bytes = 2048}
};

// automatic's rule. The default shares memory between ranks of one host; the small thresholds
// let a few thousand elements choose ring or recursive_halving, with no shared memory, so that
// the message-passing choice runs on one host too.
inline gradsync::automatic automatic_rule(const variant& v)
{
    gradsync::automatic rule;
    if (v.small_thresholds) {
        rule.small_bytes = 256;
        rule.ring_bytes = 2048;
        rule.share_memory = false;
    }
    return rule;
}

inline std::string describe(const variant& v)
{
    switch (v.a) {
    case alg::recursive_halving: return "recursive_halving";
    case alg::recursive_doubling: return "recursive_doubling";
    case alg::ring: return "ring";
    case alg::automatic:
        return v.small_thresholds ? "automatic{small_bytes 256, ring_bytes 2048, share_memory false}" : "automatic{}";
    case alg::hierarchical:
        return "hierarchical{ranks_per_node " + std::to_string(v.k) + (v.node_sum ? ", sum}" : ", average}");
    case alg::shared_memory: return "shared_memory";
    }
    return "?";
}

// f(the algorithm tag v names). shared_memory runs in host memory only: Host = false (the
// device tests) leaves it out of f's instantiations.
template <bool Host = true, class F>
void with_algorithm(const variant& v, F&& f)
{
    switch (v.a) {
    case alg::recursive_halving: f(gradsync::recursive_halving{}); break;
    case alg::recursive_doubling: f(gradsync::recursive_doubling{}); break;
    case alg::ring: f(gradsync::ring{}); break;
    case alg::automatic: f(automatic_rule(v)); break;
    case alg::hierarchical:
        f(gradsync::hierarchical{.ranks_per_node = v.k,
                                 .within_node = v.node_sum ? gradsync::node_combine::sum
                                                           : gradsync::node_combine::average});
        break;
    case alg::shared_memory:
        if constexpr (Host)
            f(gradsync::shared_memory{});
        else
            throw std::logic_error("adasum_variant: shared_memory has no plan in a memory space");
        break;
    }
}

// The elements of a layout.
inline std::size_t total(const std::vector<std::size_t>& layers)
{
    std::size_t t = 0;
    for (std::size_t s : layers)
        t += s;
    return t;
}

// What a scenario's check is told: N, the variant, the algorithm code the plan chose and
// the layers.
struct scenario_context {
    int n;
    const variant& v;
    std::uint32_t chosen;
    std::vector<std::size_t> layers;
};

// The variants a scenario runs: every algorithm, automatic with small thresholds too, and
// hierarchical with two-rank nodes (one-rank for odd n) averaged and summed, and with the
// communicator's nodes (local_communicator: one node of all n ranks).
inline std::vector<variant> scenario_variants(int n)
{
    const int k = n % 2 == 0 ? 2 : 1;
    return {{.a = alg::recursive_halving},
            {.a = alg::recursive_doubling},
            {.a = alg::ring},
            {.a = alg::automatic},
            {.a = alg::automatic, .small_thresholds = true},
            {.a = alg::hierarchical, .k = k},
            {.a = alg::hierarchical, .k = 0},
            {.a = alg::hierarchical, .k = k, .node_sum = true}};
}

// k of a hierarchical variant on n ranks (local_communicator says one node of n ranks).
inline int resolved_k(const variant& v, int n) { return v.k == 0 ? n : v.k; }

// The reference result of variant v on the gradients g (automatic: of the algorithm it chose).
inline adaref::vec expected(const variant& v, std::uint32_t chosen, const std::vector<adaref::vec>& g,
                            const std::vector<std::size_t>& layers)
{
    if (v.a == alg::hierarchical)
        return adaref::hierarchical(g, layers, std::size_t(resolved_k(v, int(g.size()))), v.node_sum);
    if (chosen == gradsync::ring::code || chosen == gradsync::shared_memory::code)
        return adaref::ring_chain(g, layers);
    return adaref::halving_tree(g, layers);
}

// The order variant v reduces in (automatic: the algorithm it chose), for the reference's
// results on either side of A's jump (adaref::layer_results).
inline adaref::order order_of(const variant& v, std::uint32_t chosen, int n)
{
    if (v.a == alg::hierarchical)
        return {.kind = adaref::order::nodes, .k = std::size_t(resolved_k(v, n)), .sum = v.node_sum};
    if (chosen == gradsync::ring::code || chosen == gradsync::shared_memory::code)
        return {.kind = adaref::order::chain};
    return {.kind = adaref::order::tree};
}

// T's format (std::numeric_limits' digits and min_exponent), for the reference's evaluation
// as T rounds.
template <class T>
adaref::format format_of()
{
    if constexpr (std::is_same_v<T, gradsync::half>)
        return {.digits = 11, .min_exponent = -13};
    else if constexpr (std::is_same_v<T, gradsync::bfloat16>)
        return {.digits = 8, .min_exponent = -125};
    else
        return {.digits = std::numeric_limits<T>::digits, .min_exponent = std::numeric_limits<T>::min_exponent};
}

// The reference's tolerance for T (docs/adasum.md, "Accuracy") under the tree or chain chosen.
template <class T>
double tolerance_of(std::uint32_t chosen)
{
    return adaref::tolerance<T>(chosen == gradsync::ring::code || chosen == gradsync::shared_memory::code,
                                std::is_same_v<T, gradsync::bfloat16>);
}

} // namespace adasum_variant
