// The planner model (docs/planner.md): the paper's three cases worked by hand, MG-WFBP traces
// at the edges of its strict comparisons and against a literal transcription of the
// algorithm, the optimal plan against brute force over every contiguous partition, the
// optimum against every other planner, timeline invariants, plan validation, cost models
// and the least-squares fit, and the SVG picture.
//
// Hand-worked cases use bytes_per_element = 1 and times that are exact in binary, so the
// expected times are exact.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gradsync/planner.hpp>

namespace {

namespace gp = gradsync::planner;
using Catch::Matchers::Contains;

// A profile from backward times and parameter counts, both in forward order.
gp::profile make_profile(const std::vector<double>& backward_s, const std::vector<std::uint64_t>& params)
{
    gp::profile p;
    for (std::size_t l = 0; l < backward_s.size(); ++l)
        p.push_back({"layer" + std::to_string(l), params[l], backward_s[l], {}});
    return p;
}

double predicted(const gp::profile& p, const gp::merge_plan& groups, const gp::linear_cost& c, std::size_t bpe = 1)
{
    return gp::simulate(p, groups, c, bpe).predicted_s;
}

// Random profile: times uniform or small integers (integers make ties common), params with
// zeros, a few huge layers.
gp::profile random_profile(std::mt19937_64& rng, std::size_t layers, bool integer_times)
{
    std::uniform_real_distribution<double> time(0.0, 4.0);
    std::uniform_int_distribution<int> small(0, 4), kind(0, 9);
    std::uniform_int_distribution<std::uint64_t> params(1, 1000);
    gp::profile p(layers);
    for (std::size_t l = 0; l < layers; ++l) {
        p[l].name = std::to_string(l);
        p[l].backward_s = integer_times ? double(small(rng)) : time(rng);
        const int k = kind(rng);
        p[l].params = k < 2 ? 0 : k < 9 ? params(rng) : params(rng) * 100;
    }
    return p;
}

gp::linear_cost random_cost(std::mt19937_64& rng, bool integer)
{
    std::uniform_real_distribution<double> a(0.0, 3.0), b(0.0, 0.02);
    if (integer)
        return {double(std::uniform_int_distribution<int>(0, 4)(rng)), 1.0 / 64};
    return {a(rng), b(rng)};
}

// Every partition of layers 0..L-1 into contiguous groups, in communication order: bit j of
// `cuts` set means a group ends after backward position j (layer L-1-j).
std::vector<gp::merge_plan> all_partitions(std::size_t layers)
{
    std::vector<gp::merge_plan> plans;
    if (layers == 0)
        return {gp::merge_plan{}};
    for (std::uint64_t cuts = 0; cuts < (std::uint64_t(1) << (layers - 1)); ++cuts) {
        gp::merge_plan groups;
        std::vector<std::size_t> open;
        for (std::size_t j = 0; j < layers; ++j) {
            open.insert(open.begin(), layers - 1 - j);
            if (j + 1 == layers || (cuts >> j) & 1) {
                groups.push_back(open);
                open.clear();
            }
        }
        plans.push_back(groups);
    }
    return plans;
}

// MG-WFBP as docs/planner.md writes it out, literally: arrays tau_b, tb, tc, tau_c, and tau_c
// recomputed in full after every merge.
gp::merge_plan mgwfbp_reference(const gp::profile& p, const gp::linear_cost& T, std::size_t bpe)
{
    const std::size_t L = p.size();
    if (L == 0)
        return {};
    std::vector<double> tb(L), tau_b(L), tc(L), tau_c(L);
    std::vector<std::uint64_t> bytes(L);
    for (std::size_t l = 0; l < L; ++l) {
        tb[l] = p[l].backward_s;
        bytes[l] = p[l].params * bpe;
        tc[l] = bytes[l] > 0 ? T.a + T.b * double(bytes[l]) : 0.0;
    }
    tau_b[L - 1] = 0;
    for (std::size_t l = L - 1; l-- > 0;)
        tau_b[l] = tau_b[l + 1] + tb[l + 1];
    auto recompute = [&] {
        tau_c[L - 1] = tau_b[L - 1] + tb[L - 1];
        for (std::size_t l = L - 1; l-- > 0;)
            tau_c[l] = std::max(tau_c[l + 1] + tc[l + 1], tau_b[l] + tb[l]);
    };
    recompute();
    gp::merge_plan groups;
    std::vector<std::size_t> current;
    for (std::size_t l = L - 1; l >= 1; --l) {
        current.insert(current.begin(), l);
        const double ready = tau_b[l - 1] + tb[l - 1];
        if (ready < tau_c[l] + tc[l] && (tau_c[l] > ready || ready - tau_c[l] < T.a)) {
            tc[l] = 0;
            bytes[l - 1] += bytes[l];
            bytes[l] = 0;
            tc[l - 1] = bytes[l - 1] > 0 ? T.a + T.b * double(bytes[l - 1]) : 0.0;
            recompute();
        } else {
            groups.push_back(current);
            current.clear();
        }
    }
    current.insert(current.begin(), 0);
    groups.push_back(current);
    return groups;
}

} // namespace

// Case 1 (communication hidden). tb = 4, 4, 4 for layers 0, 1, 2; 4 bytes each; T = 1 + M/4,
// so T(4) = 2. Ready: r(2) = 4, r(1) = 8, r(0) = 12.
// MG-WFBP: tau_c(2) = 4, tc(2) = 2; l = 2: ready r(1) = 8 < 6? no -> close {2}.
//   tau_c(1) = max(6, 8) = 8, tc(1) = 2; l = 1: ready r(0) = 12 < 10? no -> close {1}; {0}.
// WFBP: {2} 4..6, {1} 8..10, {0} 12..14 -> 14, the least possible: the group of layer 0
// starts at r(0) = 12 and costs at least T(4) = 2.
// Optimal: 14 too, with fewer groups: {1,2} 8..11 (T(8) = 3) ends before r(0), then {0}
// 12..14. All three layers in one group: 12 + T(12) = 16.
TEST_CASE("planner case 1: communication fully hidden", "[planner]")
{
    const gp::profile p = make_profile({4, 4, 4}, {4, 4, 4});
    const gp::linear_cost c{1, 0.25};
    const gp::merge_plan wfbp = gp::wfbp(p);
    CHECK(wfbp == gp::merge_plan{{2}, {1}, {0}});
    CHECK(gp::mgwfbp(p, c, 1) == wfbp);
    CHECK(predicted(p, wfbp, c) == 14.0);
    CHECK(gp::optimal(p, c, 1) == gp::merge_plan{{1, 2}, {0}});
    CHECK(predicted(p, gp::optimal(p, c, 1), c) == 14.0);
    CHECK(predicted(p, gp::single(p), c) == 16.0);
}

// Case 2 (one layer's communication not hidden, recovered by merging). a = 2, b = 1/4,
// 4 bytes per layer (T(4) = 3, T(8) = 4); tb = 4.5, 1, 4, 1 for layers 0..3.
// Ready: r(3) = 1, r(2) = 5, r(1) = 6, r(0) = 10.5.
// MG-WFBP: tau_c(3) = 1, tc(3) = 3; l = 3: ready 5 < 4? no -> close {3}.
//   tau_c(2) = max(4, 5) = 5, tc(2) = 3; l = 2: ready 6 < 8 and 6 - 5 = 1 < 2 -> merge:
//   tc(2) = 0, bytes(1) = 8, tc(1) = 4, tau_c(1) = max(5 + 0, 6) = 6.
//   l = 1: ready 10.5 < 6 + 4 = 10? no -> close {1,2}; {0}.
// WFBP: {3} 1..4, {2} 5..8, {1} 8..11 (past r(0)), {0} 11..14 -> 14.
// MG-WFBP: {3} 1..4, {1,2} 6..10, {0} 10.5..13.5 -> 13.5, which is optimal: the group of
// layer 0 starts no earlier than 10.5 and costs at least 3.
TEST_CASE("planner case 2: merging recovers a communication that is not hidden", "[planner]")
{
    const gp::profile p = make_profile({4.5, 1, 4, 1}, {4, 4, 4, 4});
    const gp::linear_cost c{2, 0.25};
    const gp::merge_plan m = gp::mgwfbp(p, c, 1);
    CHECK(m == gp::merge_plan{{3}, {1, 2}, {0}});
    CHECK(predicted(p, gp::wfbp(p), c) == 14.0);
    CHECK(predicted(p, m, c) == 13.5);
    CHECK(gp::optimal(p, c, 1) == m);
}

// Case 3 (communication-bound; the greedy is not optimal). a = 3.5, b = 1; params 3, 3, 2
// and tb = 3, 2, 3 for layers 0, 1, 2. Ready: r(2) = 3, r(1) = 5, r(0) = 8.
// MG-WFBP: tau_c(2) = 3, tc(2) = T(2) = 5.5; l = 2: ready 5 < 8.5 and 5 - 3 = 2 < 3.5 ->
//   merge: bytes(1) = 5, tc(1) = 8.5, tau_c(1) = max(3 + 0, 5) = 5.
//   l = 1: ready 8 < 13.5 and 8 - 5 = 3 < 3.5 -> merge: one group {0,1,2}: 8 + T(8) = 19.5.
// The five partitions:
//   {2}{1}{0}: 3..8.5, 8.5..15, 15..21.5 -> 21.5     {1,2}{0}: 5..13.5, 13.5..20 -> 20
//   {2}{0,1}:  3..8.5, 8.5..18 (T(6) = 9.5) -> 18     {0,1,2}: 19.5
//   so the optimum is {2}{0,1} at 18: sending layer 2 at once keeps the link busy while
//   layer 1 computes; the greedy's merge delays it and the last group grows.
TEST_CASE("planner case 3: communication-bound, the optimum beats MG-WFBP", "[planner]")
{
    const gp::profile p = make_profile({3, 2, 3}, {3, 3, 2});
    const gp::linear_cost c{3.5, 1};
    const gp::merge_plan m = gp::mgwfbp(p, c, 1);
    const gp::merge_plan o = gp::optimal(p, c, 1);
    CHECK(m == gp::merge_plan{{0, 1, 2}});
    CHECK(predicted(p, m, c) == 19.5);
    CHECK(o == gp::merge_plan{{2}, {0, 1}});
    CHECK(predicted(p, o, c) == 18.0);
    CHECK(predicted(p, gp::wfbp(p), c) == 21.5);
    CHECK(predicted(p, gp::merge_plan{{1, 2}, {0}}, c) == 20.0);
}

// Two layers, so l = 1 is the only decision: ready = r(0) = tb1 + tb0, tau_c(1) = tb1.
TEST_CASE("mgwfbp: ready - tau_c equal to a does not merge, just below it does", "[planner]")
{
    // a = 2, b = 1, 4 bytes in layer 1 (T = 6); tb1 = 1.
    // tb0 = 2: ready 3 < 1 + 6, tau_c 1 > 3 no, 3 - 1 = 2 < 2 no -> {1}{0}.
    // tb0 = 1.75: 2.75 - 1 = 1.75 < 2 -> merged.
    const gp::linear_cost c{2, 1};
    CHECK(gp::mgwfbp(make_profile({2, 1}, {4, 4}), c, 1) == gp::merge_plan{{1}, {0}});
    CHECK(gp::mgwfbp(make_profile({1.75, 1}, {4, 4}), c, 1) == gp::merge_plan{{0, 1}});
    // a = 0: the startup branch never holds, and ready == tau_c is not "tau_c > ready".
    // tb0 = 0: ready 1 == tau_c 1 < 1 + T(4) = 5 -> {1}{0}.
    CHECK(gp::mgwfbp(make_profile({0, 1}, {4, 4}), gp::linear_cost{0, 1}, 1) == gp::merge_plan{{1}, {0}});
}

TEST_CASE("mgwfbp: a layer without parameters ready exactly when its turn comes does not merge", "[planner]")
{
    // Layer 1 has no parameters (tc(1) = 0); tb1 = 1, tb0 = 0, so ready = r(0) = 1 = tau_c(1).
    // ready - tau_c = 0 < a, but ready < tau_c + tc = 1 is false -> {1}{0}.
    CHECK(gp::mgwfbp(make_profile({0, 1}, {4, 0}), gp::linear_cost{2, 1}, 1) == gp::merge_plan{{1}, {0}});
    // The same empty layer carrying merged bytes: a = b = 1, tb = 0, 0.5, 1, params 2, 0, 5;
    // r(2) = 1, r(1) = r(0) = 1.5. l = 2: tau_c(2) = 1, tc(2) = T(5) = 6: ready 1.5 < 7 and
    // 1.5 - 1 = 0.5 < 1 -> merge (bytes(1) = 5, tau_c(1) = max(1 + 0, 1.5) = 1.5, tc(1) = 6).
    // l = 1: ready 1.5 < 7.5 and 1.5 - 1.5 = 0 < 1 -> merge: one group.
    CHECK(gp::mgwfbp(make_profile({0, 0.5, 1}, {2, 0, 5}), gp::linear_cost{1, 1}, 1) == gp::merge_plan{{0, 1, 2}});
}

// a = 1, b = 1; tb = 1 everywhere: r(3) = 1, r(2) = 2, r(1) = 3, r(0) = 4; params 1, 0, 1, 5.
// l = 3: tau_c(3) = 1, tc(3) = T(5) = 6: ready 2 < 7, 1 > 2 no, 2 - 1 = 1 < 1 no -> close {3}.
// l = 2: tau_c(2) = max(7, 2) = 7, tc(2) = 2: ready 3 < 9, 7 > 3 -> merge (bytes(1) = 1,
//   tau_c(1) = max(7 + 0, 3) = 7, tc(1) = 2).
// l = 1: ready 4 < 9, 7 > 4 -> merge (bytes(0) = 2); {0,1,2}.
// Times: {3} 1..7, {0,1,2} 7..10 (T(2) = 3) -> 10; WFBP: {3} 1..7, {2} 7..9, {1} empty
// at 9, {0} 9..11 -> 11.
TEST_CASE("mgwfbp: layers queued behind a long communication merge, empty layers included", "[planner]")
{
    const gp::profile p = make_profile({1, 1, 1, 1}, {1, 0, 1, 5});
    const gp::linear_cost c{1, 1};
    const gp::merge_plan m = gp::mgwfbp(p, c, 1);
    CHECK(m == gp::merge_plan{{3}, {0, 1, 2}});
    CHECK(predicted(p, m, c) == 10.0);
    CHECK(predicted(p, gp::wfbp(p), c) == 11.0);
}

TEST_CASE("planners: no layers, one layer, no parameters at all", "[planner]")
{
    const gp::linear_cost c{1, 1};
    const gp::profile none;
    for (const gp::merge_plan& g : {gp::wfbp(none), gp::single(none), gp::bucket(none, 8), gp::mgwfbp(none, c),
                              gp::optimal(none, c)}) {
        CHECK(g.empty());
        CHECK(gp::simulate(none, g, c).predicted_s == 0.0);
    }
    const gp::profile one = make_profile({2}, {3});
    for (const gp::merge_plan& g : {gp::wfbp(one), gp::single(one), gp::bucket(one, 8), gp::mgwfbp(one, c, 1),
                              gp::optimal(one, c, 1)}) {
        CHECK(g == gp::merge_plan{{0}});
        CHECK(predicted(one, g, c) == 2.0 + 1.0 + 3.0);
    }
    const gp::profile empty_layers = make_profile({1, 2, 3}, {0, 0, 0});
    CHECK(predicted(empty_layers, gp::mgwfbp(empty_layers, c, 1), c) == 6.0);
    CHECK(gp::optimal(empty_layers, c, 1) == gp::merge_plan{{0, 1, 2}});
    CHECK(predicted(empty_layers, gp::optimal(empty_layers, c, 1), c) == 6.0);
}

TEST_CASE("mgwfbp agrees with the algorithm written out literally on random profiles", "[planner]")
{
    for (std::uint64_t seed = 1; seed <= 400; ++seed) {
        std::mt19937_64 rng(seed);
        const std::size_t layers = std::uniform_int_distribution<std::size_t>(0, 60)(rng);
        const bool integer = seed % 2 == 0;
        const gp::profile p = random_profile(rng, layers, integer);
        const gp::linear_cost c = random_cost(rng, integer);
        INFO("seed " << seed << ", " << layers << " layers");
        CHECK(gp::mgwfbp(p, c, 4) == mgwfbp_reference(p, c, 4));
    }
}

TEST_CASE("optimal equals brute force over every contiguous partition", "[planner]")
{
    for (std::uint64_t seed = 1; seed <= 600; ++seed) {
        std::mt19937_64 rng(seed);
        const std::size_t layers = std::uniform_int_distribution<std::size_t>(1, 12)(rng);
        const bool integer = seed % 3 == 0; // ties everywhere
        const gp::profile p = random_profile(rng, layers, integer);
        const gp::linear_cost c = random_cost(rng, integer);
        double best = std::numeric_limits<double>::infinity();
        std::size_t fewest = 0;
        for (const gp::merge_plan& candidate : all_partitions(layers)) {
            const double t = predicted(p, candidate, c, 4);
            if (t < best || (t == best && candidate.size() < fewest)) {
                best = t;
                fewest = candidate.size();
            }
        }
        const gp::merge_plan o = gp::optimal(p, c, 4);
        INFO("seed " << seed << ", " << layers << " layers");
        CHECK_NOTHROW(gp::validate_plan(o, layers));
        CHECK(predicted(p, o, c, 4) == Approx(best).epsilon(1e-12).margin(0));
        CHECK(o.size() == fewest);
        CHECK(gp::optimal(p, c, 4) == o);
    }
}

TEST_CASE("optimal is never worse than wfbp, single, bucket or mgwfbp", "[planner]")
{
    for (std::uint64_t seed = 1; seed <= 120; ++seed) {
        std::mt19937_64 rng(seed);
        const std::size_t layers = std::uniform_int_distribution<std::size_t>(1, 200)(rng);
        const gp::profile p = random_profile(rng, layers, seed % 4 == 0);
        const gp::linear_cost c = random_cost(rng, seed % 4 == 0);
        const double best = predicted(p, gp::optimal(p, c, 4), c, 4);
        INFO("seed " << seed << ", " << layers << " layers");
        CHECK(best <= predicted(p, gp::wfbp(p), c, 4));
        CHECK(best <= predicted(p, gp::single(p), c, 4));
        CHECK(best <= predicted(p, gp::mgwfbp(p, c, 4), c, 4));
        for (std::uint64_t cap : {1ull, 100ull, 4000ull, 40000ull, 1000000ull})
            CHECK(best <= predicted(p, gp::bucket(p, cap, 4), c, 4));
    }
}

TEST_CASE("bucket closes a group once it reaches the cap, in backward order", "[planner]")
{
    // Bytes 1, 2, 3, 4 (layers 0..3), cap 5: 4 -> +3 = 7 closes {2,3}; 2 -> +1 = 3, the rest {0,1}.
    const gp::profile p = make_profile({1, 1, 1, 1}, {1, 2, 3, 4});
    CHECK(gp::bucket(p, 5, 1) == gp::merge_plan{{2, 3}, {0, 1}});
    CHECK(gp::bucket(p, 4, 1) == gp::merge_plan{{3}, {1, 2}, {0}}); // reaching the cap exactly closes
    CHECK(gp::bucket(p, 1, 1) == gp::wfbp(p));
    CHECK(gp::bucket(p, 1000, 1) == gp::single(p));
    CHECK(gp::bucket(p, 20, 4) == gp::merge_plan{{2, 3}, {0, 1}}); // bytes 4, 8, 12, 16
    CHECK_THROWS_AS(gp::bucket(p, 0), gradsync::usage_error);
    // DDP's first bucket: its own cap, then cap_bytes. First cap 4: {3} closes; 3 + 2 = 5 closes {1, 2}.
    CHECK(gp::bucket(p, 5, 1, 4) == gp::merge_plan{{3}, {1, 2}, {0}});
    CHECK(gp::bucket(p, 1000, 1, 7) == gp::merge_plan{{2, 3}, {0, 1}});
    CHECK(gp::bucket(p, 1, 1, 1000) == gp::single(p));
    CHECK_THROWS_AS(gp::bucket(p, 5, 1, 0), gradsync::usage_error);
}

TEST_CASE("simulate: invariants of the timeline on random plans", "[planner]")
{
    for (std::uint64_t seed = 1; seed <= 300; ++seed) {
        std::mt19937_64 rng(seed);
        const std::size_t layers = std::uniform_int_distribution<std::size_t>(1, 80)(rng);
        const gp::profile p = random_profile(rng, layers, seed % 2 == 0);
        const gp::linear_cost c = random_cost(rng, false);
        gp::merge_plan groups;
        for (std::size_t l = layers; l-- > 0;) {
            if (groups.empty() || std::uniform_int_distribution<int>(0, 2)(rng) == 0)
                groups.emplace_back();
            groups.back().insert(groups.back().begin(), l);
        }
        const gp::timeline t = gp::simulate(p, groups, c, 2);
        INFO("seed " << seed);
        REQUIRE(t.ready_s.size() == layers);
        REQUIRE(t.groups.size() == groups.size());
        for (std::size_t l = 0; l < layers; ++l) {
            double r = 0; // summed from the last layer down, as the model defines it
            for (std::size_t k = layers; k-- > l;)
                r += p[k].backward_s;
            CHECK(t.ready_s[l] == r);
            CHECK(t.backward_start_s[l] + p[l].backward_s == t.ready_s[l]);
        }
        double previous_end = 0;
        for (std::size_t g = 0; g < groups.size(); ++g) {
            std::uint64_t bytes = 0;
            for (std::size_t l : groups[g])
                bytes += p[l].params * 2;
            const gp::group_span& s = t.groups[g];
            CHECK(s.bytes == bytes);
            CHECK(s.start_s >= previous_end);
            CHECK(s.start_s >= t.ready_s[groups[g].front()]);
            CHECK((s.start_s == previous_end || s.start_s == t.ready_s[groups[g].front()]));
            CHECK(s.end_s == s.start_s + (bytes > 0 ? c.a + c.b * double(bytes) : 0.0));
            previous_end = s.end_s;
        }
        CHECK(t.predicted_s >= t.ready_s[0]);
        CHECK(t.predicted_s == std::max(previous_end, t.ready_s[0]));
    }
}

TEST_CASE("simulate refuses invalid times, costs and element sizes, naming the layer", "[planner]")
{
    gp::profile p = make_profile({1, 1, 1}, {1, 1, 1});
    const gp::linear_cost c{1, 1};
    const gp::merge_plan w = gp::wfbp(p);
    p[1].backward_s = std::nan("");
    CHECK_THROWS_WITH(gp::simulate(p, w, c), Contains("layer 1 ('layer1')"));
    CHECK_THROWS_AS(gp::mgwfbp(p, c), gradsync::usage_error);
    CHECK_THROWS_AS(gp::optimal(p, c), gradsync::usage_error);
    p[1].backward_s = -1;
    CHECK_THROWS_WITH(gp::simulate(p, w, c), Contains("layer 1 ('layer1')"));
    p[1].backward_s = 1;
    CHECK_THROWS_AS(gp::simulate(p, w, gp::linear_cost{-1, 1}), gradsync::usage_error);
    CHECK_THROWS_AS(gp::simulate(p, w, gp::linear_cost{1, std::numeric_limits<double>::infinity()}),
                    gradsync::usage_error);
    CHECK_THROWS_AS(gp::simulate(p, w, c, 0), gradsync::usage_error);
    p[2].params = std::numeric_limits<std::uint64_t>::max() / 2;
    CHECK_THROWS_WITH(gp::simulate(p, w, c, 4), Contains("layer 2") && Contains("overflow"));
    CHECK_THROWS_WITH(gp::optimal(p, c, 4), Contains("overflow"));
    // Finite costs whose predicted times overflow: refused, not a plan with layers missing.
    p[2].params = 1000;
    CHECK_THROWS_WITH(gp::optimal(p, gp::linear_cost{1e308, 1e308}), Contains("overflow"));
}

TEST_CASE("validate_plan refuses plans that do not cover the layers in backward order", "[planner]")
{
    using gradsync::usage_error;
    CHECK_NOTHROW(gp::validate_plan({{3}, {1, 2}, {0}}, 4));
    CHECK_NOTHROW(gp::validate_plan({}, 0));
    CHECK_THROWS_WITH(gp::validate_plan({{3}, {1}, {0}}, 4), Contains("layer 2 is in no group"));
    CHECK_THROWS_WITH(gp::validate_plan({{3}, {2, 3}, {1}, {0}}, 4),
                      Contains("layer 3 appears twice (in group 0 and group 1)"));
    CHECK_THROWS_WITH(gp::validate_plan({{3}, {0, 2}, {1}}, 4),
                      Contains("group 1 is not a contiguous ascending run of layers (layer 0 is followed by 2)"));
    CHECK_THROWS_WITH(gp::validate_plan({{3}, {2, 1}, {0}}, 4),
                      Contains("group 1 is not a contiguous ascending run of layers (layer 2 is followed by 1)"));
    CHECK_THROWS_WITH(gp::validate_plan({{0}, {1}, {2}, {3}}, 4),
                      Contains("groups are not in backward order: group 0 holds layers 0..0, but should end at "
                               "layer 3, which comes later, in group 3"));
    CHECK_THROWS_WITH(gp::validate_plan({{3}, {}, {0, 1, 2}}, 4), Contains("group 1 is empty"));
    CHECK_THROWS_WITH(gp::validate_plan({{4}, {0, 1, 2, 3}}, 4),
                      Contains("group 0 lists layer 4, but there are only 4 layers"));
    CHECK_THROWS_AS(gp::validate_plan({{0}}, 0), usage_error);
    CHECK_THROWS_AS(gp::simulate(make_profile({1, 1}, {1, 1}), {{0}, {1}}, gp::linear_cost{1, 1}), usage_error);
}

TEST_CASE("cost models: ring, recursive halving, hierarchical and Adasum against hand values", "[planner]")
{
    const gp::link_parameters l{1e-5, 1e-9, 1e-10};
    // N = 4: a = 2*3*alpha, b = 2*3/4 beta + 3/4 gamma.
    const gp::linear_cost ring = gp::ring_cost(l, 4);
    CHECK(ring.a == Approx(6e-5).epsilon(1e-12));
    CHECK(ring.b == Approx(1.5e-9 + 0.75e-10).epsilon(1e-12));
    CHECK(ring(0) == 0.0);
    CHECK(ring(1000) == Approx(6e-5 + 1000 * 1.575e-9).epsilon(1e-12));
    // N = 8: 2*log2(8) = 6 messages, b = 2*7/8 beta + 7/8 gamma.
    const gp::linear_cost rh8 = gp::recursive_halving_cost(l, 8);
    CHECK(rh8.a == Approx(6e-5).epsilon(1e-12));
    CHECK(rh8.b == Approx(1.75e-9 + 0.875e-10).epsilon(1e-12));
    // N = 6: P = 4 (a = 4 alpha, b = 1.5 beta + 0.75 gamma) plus folding 2 alpha, 2 beta + gamma.
    const gp::linear_cost rh6 = gp::recursive_halving_cost(l, 6);
    CHECK(rh6.a == Approx(6e-5).epsilon(1e-12));
    CHECK(rh6.b == Approx(3.5e-9 + 1.75e-10).epsilon(1e-12));
    CHECK(gp::ring_cost(l, 1).a == 0.0);
    CHECK(gp::ring_cost(l, 1).b == 0.0);
    // 8 ranks, 4 per node: intra ring over 4 (6 alpha, 1.5 beta + 0.75 gamma) plus recursive
    // halving over 2 nodes on a quarter of the bytes (2 alpha', (beta' + 0.5 gamma') / 4).
    const gp::link_parameters inter{1e-4, 1e-8, 1e-10};
    const gp::linear_cost h = gp::hierarchical_cost(l, inter, 8, 4);
    CHECK(h.a == Approx(6e-5 + 2e-4).epsilon(1e-12));
    CHECK(h.b == Approx(1.5e-9 + 0.75e-10 + (1e-8 + 0.5e-10) / 4).epsilon(1e-12));
    // Adasum, N = 4, 10 layers: 4 alpha + (1 + 2) (alpha + 240 beta); b = 1.5 beta + 1.5 gamma.
    const gp::linear_cost ad = gp::recursive_halving_adasum_cost(l, 4, 10);
    CHECK(ad.a == Approx(4e-5 + 3 * (1e-5 + 240e-9)).epsilon(1e-12));
    CHECK(ad.b == Approx(1.5e-9 + 1.5e-10).epsilon(1e-12));
    CHECK_THROWS_AS(gp::ring_cost(l, 0), gradsync::usage_error);
    CHECK_THROWS_AS(gp::ring_cost(gp::link_parameters{-1, 0, 0}, 2), gradsync::usage_error);
    CHECK_THROWS_AS(gp::hierarchical_cost(l, inter, 8, 3), gradsync::usage_error);
    CHECK_THROWS_AS(gp::hierarchical_cost(l, inter, 8, 0), gradsync::usage_error);
}

TEST_CASE("fit_linear_cost recovers a line, measures the residual and refuses too few sizes", "[planner]")
{
    const double a = 2e-5, b = 3e-10;
    std::vector<std::pair<double, double>> exact;
    for (double x : {1e3, 1e5, 1e6, 1e7, 1e8})
        exact.emplace_back(x, a + b * x);
    const gp::fit_result f = gp::fit_linear_cost(exact);
    CHECK(f.cost.a == Approx(a).epsilon(1e-9));
    CHECK(f.cost.b == Approx(b).epsilon(1e-9));
    CHECK(f.residual_rms_s < 1e-15);
    // Noise e = (+d, -d, -d, +d) at x = 1, 2, 3, 4 MB sums to 0 and is orthogonal to x, so
    // least squares still returns (a, b) and the residual is exactly d.
    const double d = 1e-6;
    std::vector<std::pair<double, double>> noisy;
    const double e[] = {d, -d, -d, d};
    for (int i = 0; i < 4; ++i)
        noisy.emplace_back((i + 1) * 1e6, a + b * (i + 1) * 1e6 + e[i]);
    const gp::fit_result g = gp::fit_linear_cost(noisy);
    CHECK(g.cost.a == Approx(a).epsilon(1e-9));
    CHECK(g.cost.b == Approx(b).epsilon(1e-9));
    CHECK(g.residual_rms_s == Approx(d).epsilon(1e-9));
    // Random 1 % noise: the fit stays within a few percent.
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> jitter(-0.01, 0.01);
    std::vector<std::pair<double, double>> rough;
    for (int rep = 0; rep < 20; ++rep)
        for (double x : {1e3, 1e4, 1e5, 1e6})
            rough.emplace_back(x, (a + b * x) * (1 + jitter(rng)));
    const gp::fit_result r = gp::fit_linear_cost(rough);
    CHECK(r.cost.b == Approx(b).epsilon(0.02));
    CHECK(r.cost.a == Approx(a).epsilon(0.1));
    const std::vector<std::pair<double, double>> one_size{{1e3, 1.0}, {1e3, 2.0}};
    CHECK_THROWS_WITH(gp::fit_linear_cost(one_size), Contains("2 distinct sizes"));
    CHECK_THROWS_AS(gp::fit_linear_cost({}), gradsync::usage_error);
    const std::vector<std::pair<double, double>> bad{{1e3, 1.0}, {1e4, std::nan("")}};
    CHECK_THROWS_WITH(gp::fit_linear_cost(bad), Contains("sample 1"));
}

TEST_CASE("svg: a self-contained picture with escaped names, every group and the predicted time", "[planner]")
{
    gp::profile p = make_profile({3, 2, 3}, {3, 3, 2});
    p[0].name = "<conv&\"1\">";
    p[1].name = std::string("bad\xff\x01utf8");
    const gp::linear_cost c{3.5, 1};
    const gp::merge_plan o = gp::optimal(p, c, 1);
    const gp::timeline t = gp::simulate(p, o, c, 1);
    std::ostringstream out;
    gp::write_timeline_svg(out, p, o, t, "case 3 & <optimal>");
    const std::string svg = out.str();
    CHECK(svg.rfind("<?xml", 0) == 0);
    CHECK_THAT(svg, Contains("<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\""));
    CHECK(svg.size() > 9);
    CHECK(svg.substr(svg.size() - 7) == "</svg>\n");
    CHECK_THAT(svg, Contains("&lt;conv&amp;&quot;1&quot;&gt;"));
    CHECK_THAT(svg, Contains("bad\xEF\xBF\xBD\xEF\xBF\xBDutf8"));
    CHECK_THAT(svg, Contains("case 3 &amp; &lt;optimal&gt;"));
    CHECK_THAT(svg, Contains("g0: layer 2"));
    CHECK_THAT(svg, Contains("g1: layers 0-1"));
    CHECK_THAT(svg, Contains("predicted 18.00 s"));
    CHECK(svg.find("href") == std::string::npos);
    CHECK(svg.find("<conv") == std::string::npos);
    CHECK_THROWS_AS(gp::write_timeline_svg(out, p, gp::wfbp(p), t, "mismatch"), gradsync::usage_error);
}
