// Adasum over local_group (docs/semantics.md, "Adasum" and "Errors"):
//
//  - the conformance suite (tests/conformance/adasum.hpp: the matrix of every algorithm, type,
//    N and layout, and Horovod's scenarios) for N = 1..16 (1..8, 12 and 16 under sanitizers),
//    against the independent double-precision reference of adasum_reference.hpp;
//  - misuse: a ranks_per_node that does not divide N, ranks that disagree on the policy or on
//    hierarchical's parameters.
//
// Catch2 is not thread-safe: rank code only stores results; every CHECK runs on the main thread.
#include <catch2/catch.hpp>

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include <gradsync/gradsync.hpp>

#include "adasum_reference.hpp"
#include "adasum_variant.hpp"
#include "conformance/local_harness.hpp"
#include "outcome.hpp"
#include "reference.hpp"

#include "conformance/adasum.hpp"

// ---------------------------------------------------------------------------------------
// Misuse.

namespace {

using gradsync::local_communicator;
using gradsync::local_group;
using Catch::Matchers::Contains;
using namespace adasum_variant;
using gradsync_test::kind;
using gradsync_test::kind_name;
using gradsync_test::outcome;
using gradsync_test::record;

// body(comm) runs on every rank of a fresh group of n; what it throws is recorded per rank,
// with whether the rank's buffer is still intact.
template <class Body>
std::vector<outcome> run_recording(int n, Body body)
{
    std::vector<outcome> res(static_cast<std::size_t>(n));
    local_group group(n);
    group.run([&](local_communicator& comm) {
        outcome& o = res[std::size_t(comm.rank())];
        std::vector<float> data = adaref::normal_data<float>(9, comm.rank(), 1000);
        const std::vector<float> before = data;
        record(o, false, [&] { body(comm, std::span<float>(data)); });
        o.untouched = ref::same_bits(data.data(), before.data(), data.size() * sizeof(float));
    });
    return res;
}

void expect_everywhere(const std::vector<outcome>& res, kind expected, const std::string& word)
{
    for (std::size_t r = 0; r < res.size(); ++r) {
        const outcome& o = res[r];
        INFO("rank " << r << ": " << kind_name(o.k) << ": " << o.what);
        CHECK(kind_name(o.k) == std::string(kind_name(expected)));
        CHECK_THAT(o.what, Contains(word, Catch::CaseSensitive::No));
        CHECK(o.untouched);
    }
}

const std::vector<std::size_t> misuse_layers{400, 0, 1, 599};

// Adasum over hierarchical{tag}, by the one-shot allreduce or by a reducer.
void reduce_hierarchical(local_communicator& comm, std::span<float> data, const gradsync::hierarchical& tag,
                         std::span<const std::size_t> layers, bool oneshot)
{
    if (oneshot) {
        gradsync::allreduce(comm, data, gradsync::adasum{}, tag, layers);
    } else {
        gradsync::reducer<float, local_communicator, gradsync::adasum, gradsync::hierarchical> r(comm, layers, tag);
        r(data);
    }
}

} // namespace

TEST_CASE("adasum hierarchical: a ranks_per_node that does not divide N is a usage_error on every rank",
          "[adasum][misuse]")
{
    struct bad {
        int n, k;
    };
    for (bad b : {bad{6, 4}, bad{5, 2}, bad{3, 2}, bad{4, 3}, bad{4, 8}, bad{2, -1}})
        for (bool oneshot : {true, false})
            for (bool node_sum : {false, true}) {
                INFO("N " << b.n << ", ranks_per_node " << b.k << (oneshot ? ", one-shot" : ", reducer")
                          << (node_sum ? ", node sum" : ", node average"));
                const gradsync::hierarchical tag{.ranks_per_node = b.k, .within_node = node_sum ? gradsync::node_combine::sum : gradsync::node_combine::average};
                const auto res = run_recording(
                    b.n,
                    [&](local_communicator& comm, std::span<float> data) {
                        const std::span<const std::size_t> layers(misuse_layers);
                        reduce_hierarchical(comm, data, tag, layers, oneshot);
                    });
                expect_everywhere(res, kind::usage, "ranks_per_node");
                for (const outcome& o : res)
                    CHECK_THAT(o.what, Contains(std::to_string(b.k)));
            }
}

TEST_CASE("adasum: ranks that disagree on the policy (adasum vs sum) get a mismatch_error on every rank",
          "[adasum][misuse]")
{
    constexpr int n = 5, odd = 3;
    for (const variant& v : {variant{.a = alg::recursive_halving}, variant{.a = alg::recursive_doubling},
                             variant{.a = alg::ring}, variant{.a = alg::automatic},
                             variant{.a = alg::hierarchical, .k = 1}, variant{.a = alg::hierarchical, .k = 0}})
        for (bool odd_is_adasum : {false, true}) {
            INFO(describe(v) << (odd_is_adasum ? ": rank 3 adasum, the others sum"
                                               : ": rank 3 sum, the others adasum"));
            const auto res = run_recording(
                n,
                [&](local_communicator& comm, std::span<float> data) {
                    const std::span<const std::size_t> layers(misuse_layers);
                    with_algorithm(v, [&](auto algo) {
                        if ((comm.rank() == odd) == odd_is_adasum)
                            gradsync::allreduce(comm, data, gradsync::adasum{}, algo, layers);
                        else
                            gradsync::allreduce(comm, data, gradsync::sum{}, algo, layers);
                    });
                });
            expect_everywhere(res, kind::mismatch, "policy");
            for (std::size_t r = 0; r < res.size(); ++r)
                if (r != std::size_t(odd))
                    CHECK_THAT(res[r].what, Contains("rank " + std::to_string(odd)));
        }
}

TEST_CASE("adasum hierarchical: ranks that disagree on ranks_per_node or the node rule get a mismatch_error "
          "on every rank",
          "[adasum][misuse]")
{
    struct disagreement {
        int n;
        gradsync::hierarchical most, odd;
        const char* what;
    };
    using gradsync::node_combine;
    const std::vector<disagreement> cases{
        {8, {.ranks_per_node = 2}, {.ranks_per_node = 4}, "ranks_per_node 2 vs 4"},
        {6, {.ranks_per_node = 2}, {.ranks_per_node = 3}, "ranks_per_node 2 vs 3"},
        {6, {.ranks_per_node = 2}, {.ranks_per_node = 4}, "ranks_per_node 2 vs 4, which does not divide 6"},
        {4, {.ranks_per_node = 2}, {.ranks_per_node = 2, .within_node = node_combine::sum}, "node average vs sum"},
    };
    for (const disagreement& d : cases)
        for (bool oneshot : {true, false}) {
            INFO("N " << d.n << ", " << d.what << (oneshot ? ", one-shot" : ", reducer"));
            const auto res = run_recording(
                d.n,
                [&](local_communicator& comm, std::span<float> data) {
                    const gradsync::hierarchical tag = comm.rank() == d.n - 1 ? d.odd : d.most;
                    const std::span<const std::size_t> layers(misuse_layers);
                    reduce_hierarchical(comm, data, tag, layers, oneshot);
                });
            expect_everywhere(res, kind::mismatch, "algorithm");
        }
}
