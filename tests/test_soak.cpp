// Soak: 10 000 allreduces (2 500 under sanitizers) over 8 ranks (local_group) with random
// sizes, layouts, element types, policies and algorithms, every result checked against the
// independent references (tests/reference.hpp for Sum/Average, tests/adasum_reference.hpp
// for Adasum) and for bitwise identity across ranks. Under LeakSanitizer a leak fails the run at exit; without sanitizers
// the resident set must not grow between the first 1 000 calls and the end.
//
// Each call's parameters derive from its index alone, so every rank draws the same ones with
// no communication. Rank (call mod 8) checks the call against the reference; every rank
// stores a hash of its result, and the main thread compares the hashes after run().
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <span>
#include <string>
#include <type_traits>
#include <unistd.h>
#include <vector>

#include <gradsync/gradsync.hpp>

#include "adasum_reference.hpp"
#include "reference.hpp"
#include "sanitized.hpp"

namespace {

using gradsync::local_communicator;

constexpr int ranks = 8;
using gradsync_test::sanitized;
constexpr std::size_t calls = sanitized ? 2'500 : 10'000;

std::size_t resident_bytes()
{
    std::ifstream statm("/proc/self/statm");
    std::size_t pages = 0, resident = 0;
    statm >> pages >> resident;
    return resident * std::size_t(sysconf(_SC_PAGESIZE));
}

enum class policy { sum, average, adasum };
enum class algorithm { ring, recursive_halving, recursive_doubling, automatic, hierarchical2, hierarchical4, shared_memory };

struct call_spec {
    int type;         // 0 fp16, 1 bf16, 2 fp32, 3 fp64
    policy pol;
    algorithm alg;
    std::size_t count;
    std::vector<std::size_t> layers;
};

call_spec spec_of(std::size_t call)
{
    std::uint64_t k = ref::mix(call + 0x50a4);
    auto draw = [&](std::uint64_t n) {
        k = ref::mix(k);
        return k % n;
    };
    call_spec s;
    s.type = int(draw(4));
    s.pol = policy(draw(3));
    s.alg = algorithm(draw(7));
    // Mostly small, now and then up to 40 000 elements: small calls exercise the latency
    // paths, large ones the pipelined segments.
    s.count = draw(10) == 0 ? std::size_t(draw(40'000)) : std::size_t(draw(600));
    // 1..6 layers, some of them empty; the last takes the rest.
    const std::size_t layers = 1 + draw(6);
    std::size_t left = s.count;
    for (std::size_t l = 0; l + 1 < layers; ++l) {
        const std::size_t size = draw(4) == 0 ? 0 : std::size_t(draw(left + 1));
        s.layers.push_back(size);
        left -= size;
    }
    s.layers.push_back(left);
    return s;
}

template <class F>
void with_types(int type, F&& f)
{
    switch (type) {
    case 0: f(gradsync::half{}); break;
    case 1: f(gradsync::bfloat16{}); break;
    case 2: f(float{}); break;
    default: f(double{}); break;
    }
}

template <class F>
void with_policy(policy p, F&& f)
{
    switch (p) {
    case policy::sum: f(gradsync::sum{}); break;
    case policy::average: f(gradsync::average{}); break;
    case policy::adasum: f(gradsync::adasum{}); break;
    }
}

template <class F>
void with_algorithm(algorithm a, F&& f)
{
    switch (a) {
    case algorithm::ring: f(gradsync::ring{}); break;
    case algorithm::recursive_halving: f(gradsync::recursive_halving{}); break;
    case algorithm::recursive_doubling: f(gradsync::recursive_doubling{}); break;
    case algorithm::automatic: f(gradsync::automatic{}); break;
    case algorithm::hierarchical2: f(gradsync::hierarchical{.ranks_per_node = 2}); break;
    case algorithm::hierarchical4: f(gradsync::hierarchical{.ranks_per_node = 4}); break;
    case algorithm::shared_memory: f(gradsync::shared_memory{}); break;
    }
}

template <class T>
std::vector<T> input_of(const call_spec& s, std::size_t call, int rank)
{
    // Integers for Sum/Average (exact in every type for 8 ranks), normal values for Adasum.
    return s.pol == policy::adasum ? adaref::normal_data<T>(call, rank, s.count)
                                   : ref::int_data<T>(call, rank, s.count);
}

// "" or what is wrong with rank 0's result of call `call`.
template <class T>
std::string check(const call_spec& s, std::size_t call, std::uint32_t chosen, const std::vector<T>& got)
{
    std::vector<std::vector<T>> inputs;
    for (int r = 0; r < ranks; ++r)
        inputs.push_back(input_of<T>(s, call, r));
    if (s.pol != policy::adasum)
        return ref::first_difference(got, ref::exact(inputs, s.pol == policy::average));
    std::vector<adaref::vec> g;
    for (const auto& in : inputs)
        g.emplace_back(in.begin(), in.end());
    // shared_memory (automatic's choice on one host) runs the ring's chains.
    const bool chain = chosen == gradsync::ring::code || chosen == gradsync::shared_memory::code;
    adaref::vec want;
    if (s.alg == algorithm::hierarchical2 || s.alg == algorithm::hierarchical4)
        want = adaref::hierarchical(g, s.layers, s.alg == algorithm::hierarchical2 ? 2 : 4, false);
    else if (chain)
        want = adaref::ring_chain(g, s.layers);
    else
        want = adaref::halving_tree(g, s.layers);
    return adaref::first_layer_out_of_tolerance(got, want, s.layers,
                                                adaref::tolerance<T>(chain, std::is_same_v<T, gradsync::bfloat16>), g);
}

} // namespace

TEST_CASE("soak: 10 000 random allreduces over 8 ranks (2 500 under sanitizers), every result checked", "[soak]")
{
    gradsync::local_group group(ranks);
    std::vector<std::uint64_t> hashes(calls * ranks);
    std::vector<std::string> failures(ranks);
    std::size_t resident_early = 0, resident_late = 0;
    group.run([&](local_communicator& comm) {
        const int rank = comm.rank();
        for (std::size_t call = 0; call < calls; ++call) {
            const call_spec s = spec_of(call);
            with_types(s.type, [&](auto t) {
                using T = decltype(t);
                with_policy(s.pol, [&](auto p) {
                    with_algorithm(s.alg, [&](auto a) {
                        using R = gradsync::reducer<T, local_communicator, decltype(p), decltype(a)>;
                        R reduce(comm, s.count, s.layers, a);
                        std::vector<T> data = input_of<T>(s, call, rank);
                        reduce(std::span<T>(data));
                        hashes[call * ranks + std::size_t(rank)] = ref::fnv1a(data.data(), data.size() * sizeof(T));
                        std::uint32_t chosen = decltype(a)::code;
                        if constexpr (std::is_same_v<decltype(a), gradsync::automatic>)
                            chosen = reduce.plan().chosen();
                        if (call % ranks == std::size_t(rank) && failures[std::size_t(rank)].empty()) {
                            const std::string e = check<T>(s, call, chosen, data);
                            if (!e.empty())
                                failures[std::size_t(rank)] = "call " + std::to_string(call) + " (" +
                                    gradsync::element_traits<T>::name + ", " + std::string(decltype(p)::name) + ", " +
                                    ref::algorithm_name(chosen) + ", count " + std::to_string(s.count) + "): " + e;
                        }
                    });
                });
            });
            if (rank == 0 && call + 1 == 1000)
                resident_early = resident_bytes();
        }
        if (rank == 0)
            resident_late = resident_bytes();
    });
    for (int r = 0; r < ranks; ++r)
        CHECK(failures[std::size_t(r)] == "");
    std::string first_mismatch;
    for (std::size_t call = 0; call < calls && first_mismatch.empty(); ++call)
        for (int r = 1; r < ranks; ++r)
            if (hashes[call * ranks + std::size_t(r)] != hashes[call * ranks])
                first_mismatch = "call " + std::to_string(call) + ": rank " + std::to_string(r) + " differs from rank 0";
    CHECK(first_mismatch == "");
    if (!sanitized) {
        INFO("resident after 1 000 calls " << resident_early << " bytes, after " << calls << " " << resident_late);
        CHECK(resident_late <= resident_early + (std::size_t(8) << 20));
    }
}
