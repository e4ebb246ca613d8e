// Kernel launches and blocking synchronizations per call of the device plans, on the CPU:
// device_reducer's direct path over counting_space, a host space whose Thrust policy
// (Thrust's CPP system) counts every algorithm it is handed and whose synchronize() and
// copy() count themselves, ranks as a plain local_group, each rank with counters of its own.
//  - the counter itself: one add, zero or scaled_add is one launch, the algorithms Thrust
//    calls inside them not counted again; every Thrust algorithm called under include/gradsync
//    is one it counts (else its launches would go uncounted);
//  - Adasum with recursive_halving, recursive_doubling, ring, hierarchical{k = 2} (even N)
//    and automatic{}, N = 2..16, fp32, 1 << 18 elements per rank: the second call launches
//    as many kernels, synchronizes as often and copies to the host as often with ResNet-50's
//    107 layers (bench/resnet50_layers.hpp) as with one layer (the maximum over ranks),
//    copies nothing to the host, stays within its plan's bound (bound() below: a formula in
//    N and the triple's depth, none in the layers), and does all its work in the span's
//    space (a plan's set-up may use a default one);
//  - [.table] (hidden): the counts of Adasum and Sum for N = 2, 4, 8, 16, as a markdown table.
#include <catch2/catch.hpp>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <thrust/fill.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/system/cpp/execution_policy.h>
#include <thrust/transform.h>

#include <gradsync/collective/device_reducer.hpp>
#include <gradsync/core/device_span.hpp>
#include <gradsync/core/space.hpp>
#include <gradsync/gradsync.hpp>
#include <gradsync/kernels/thrust.hpp>
#include <gradsync/kernels/thrust_adasum.hpp>

#include "resnet50_layers.hpp"

namespace {

using gradsync::local_communicator;

// What one rank did in one call.
struct counts {
    std::size_t launches = 0; // Thrust algorithms run through the space's policy
    std::size_t syncs = 0;    // synchronize() calls
    std::size_t copies = 0;   // copy() calls: each waits for the space, as a synchronize() does
};

// Thrust's CPP system, tagged so that Thrust's dispatch finds the overloads below.
struct counting_policy : thrust::cpp::execution_policy<counting_policy> {
    counts* c = nullptr;
};

// Work on a space without counters: a default-constructed one, as a plan's set-up uses
// before any span exists. Per thread, so per rank; a call must add nothing here.
thread_local counts unattributed;

counts& counters_of(counts* c) { return c ? *c : unattributed; }

// Thrust's entry points call these by ADL with the derived policy (counting_policy&): an
// exact match, so they win over the systems' overloads, which take a base. Each counts one
// launch and runs the algorithm on thrust::cpp::par, whose own inner calls are not counted.
template <class Input, class Output, class F>
Output transform(counting_policy& p, Input first, Input last, Output out, F f)
{
    ++counters_of(p.c).launches;
    return thrust::transform(thrust::cpp::par, first, last, out, f);
}

template <class Input1, class Input2, class Output, class F>
Output transform(counting_policy& p, Input1 first1, Input1 last1, Input2 first2, Output out, F f)
{
    ++counters_of(p.c).launches;
    return thrust::transform(thrust::cpp::par, first1, last1, first2, out, f);
}

template <class Input, class F>
Input for_each(counting_policy& p, Input first, Input last, F f)
{
    ++counters_of(p.c).launches;
    return thrust::for_each(thrust::cpp::par, first, last, f);
}

template <class Forward, class T>
void fill(counting_policy& p, Forward first, Forward last, const T& value)
{
    ++counters_of(p.c).launches;
    thrust::fill(thrust::cpp::par, first, last, value);
}

// host_space (core/space.hpp) with counters: host memory, every kernel and wait counted.
struct counting_space : gradsync::host_space<counting_policy> {
    counts* c = nullptr;

    counting_policy execution() const
    {
        counting_policy p;
        p.c = c;
        return p;
    }
    void synchronize() const { ++counters_of(c).syncs; }
    void copy(void* dst, const void* src, std::size_t bytes) const
    {
        ++counters_of(c).copies;
        gradsync::host_space<counting_policy>::copy(dst, src, bytes);
    }
};

// 1 MiB of fp32 per rank: large enough for automatic to pick the bandwidth algorithms and
// for ResNet-50's smallest layers to keep an element, small enough for a sanitized run.
constexpr std::size_t count = std::size_t(1) << 18;

// One policy and algorithm on n ranks: the maximum and minimum over ranks.
struct measured {
    counts most;
    counts least;
    std::size_t stray = 0; // most events of one rank's call on a space without counters
    bool direct = true;    // every rank took the direct path
};

template <class Policy, class Algorithm>
measured measure(int n, Algorithm algorithm, const std::vector<std::size_t>& layers)
{
    std::vector<counts> per_rank(std::size_t(n), counts{});
    std::vector<std::size_t> stray(std::size_t(n), 0);
    std::vector<char> direct(std::size_t(n), 0);
    gradsync::local_group group(n);
    group.run([&](local_communicator& comm) {
        const std::size_t r = std::size_t(comm.rank());
        std::vector<float> data(count);
        for (std::size_t i = 0; i < count; ++i) // positive: no layer is zero, on any rank
            data[i] = 0.5f + float((i * 7 + r * 3) % 11);
        gradsync::device_options options;
        options.path = gradsync::device_path::direct;
        gradsync::device_reducer<float, local_communicator, Policy, Algorithm, counting_space> reduce(
            comm, count, std::span<const std::size_t>(layers), algorithm, options);
        direct[r] = reduce.path() == gradsync::device_path::direct;
        counting_space space;
        space.c = &per_rank[r];
        const gradsync::device_span<float, counting_space> span(data.data(), data.size(), space);
        reduce(span); // the first call's one-time work is not what a training step repeats
        per_rank[r] = {};
        unattributed = {};
        reduce(span);
        stray[r] = unattributed.launches + unattributed.syncs + unattributed.copies;
    });
    measured m{.most = per_rank[0], .least = per_rank[0], .stray = 0, .direct = true};
    for (std::size_t r = 0; r < per_rank.size(); ++r) {
        const counts& c = per_rank[r];
        m.most = {std::max(m.most.launches, c.launches), std::max(m.most.syncs, c.syncs),
                  std::max(m.most.copies, c.copies)};
        m.least = {std::min(m.least.launches, c.launches), std::min(m.least.syncs, c.syncs),
                   std::min(m.least.copies, c.copies)};
        m.stray = std::max(m.stray, stray[r]);
        m.direct = m.direct && direct[r];
    }
    return m;
}

// The per-call bounds of the Adasum plans on N ranks, from the plans' structure (their
// headers' cost notes), none with a term in the number of layers. S = floor(log2 N), F = 1
// when N is not a power of two, D the depth of the triple's tree for the whole vector (one
// level up to 256 elements, then one per factor 256, 64, 64, ...: at least that of any
// step's block). A step of Adasum's tree costs a zero, D levels, its group's triple adds
// and one scaled add; recursive doubling's Sum of the triples (ring, hierarchical) costs a
// combine per round and a final NaN canonicalization.
struct shape {
    std::size_t s = 0, f = 0, d = 1;
    explicit shape(int n)
    {
        while ((2 << s) <= n)
            ++s;
        f = (std::size_t(1) << s) == std::size_t(n) ? 0 : 1;
        for (std::size_t m = (count + 255) / 256; m > 1; m = (m + 63) / 64)
            ++d;
    }
};

// Adasum's recursive halving tree on `n` ranks: step s launches D + s + 3 kernels and waits
// s + 3 times; folding adds one whole-vector combine.
counts halving_tree(int n)
{
    const shape x(n);
    return {x.s * (x.d + 3) + x.s * (x.s - 1) / 2 + x.f * (x.d + 2), 3 * x.s + x.s * (x.s - 1) / 2 + 2 * x.f, 0};
}

// Sum by recursive doubling on `n` ranks (the triples' sum): a combine and a wait per
// round, the canonical NaN, a wait before the first send and at the end.
counts triple_sum(int n)
{
    const shape x(n);
    return {x.s + x.f + 1, x.s + x.f + 2, 0};
}

counts bound(const gradsync::recursive_halving&, int n)
{
    counts b = halving_tree(n);
    ++b.syncs; // before the first send
    return b;
}

counts bound(const gradsync::recursive_doubling&, int n)
{
    const shape x(n);
    return {(x.s + x.f) * (x.d + 2) + 1, x.s + x.f + 2, 0};
}

counts bound(const gradsync::ring&, int n)
{
    const shape x(n);
    const counts sum = triple_sum(n);
    const std::size_t links = std::size_t(n - 1);
    return {links * (x.d + 2 + sum.launches), 1 + links * (sum.syncs + 1), 0};
}

// Inside a node of k ranks a ring reduce-scatter (k - 1 combines) and the node's average;
// across the N/k nodes the halving tree, each of its steps (and its fold) adding a Sum of
// the triples over the node.
counts bound(const gradsync::hierarchical& h, int n)
{
    const int k = h.ranks_per_node;
    const shape across(n / k);
    const counts tree = halving_tree(n / k), node = triple_sum(k);
    const std::size_t steps = across.s + across.f;
    return {std::size_t(k - 1) + 1 + tree.launches + steps * node.launches,
            std::size_t(k) + 2 + tree.syncs + steps * node.syncs, 0};
}

// automatic runs one of its candidates.
counts bound(const gradsync::automatic&, int n)
{
    const counts a = bound(gradsync::recursive_halving{}, n), b = bound(gradsync::recursive_doubling{}, n),
                 c = bound(gradsync::ring{}, n);
    return {std::max({a.launches, b.launches, c.launches}), std::max({a.syncs, b.syncs, c.syncs}), 0};
}

// Nodes of two ranks; Adasum averages within them (the default).
constexpr gradsync::hierarchical two_per_node{.ranks_per_node = 2, .within_node = gradsync::node_combine::average};

// The algorithms compared, each with a name for the messages and the table. hierarchical
// groups two ranks per node, so it runs for even N only.
template <class F>
void for_each_algorithm(int n, F f)
{
    f("recursive_halving", gradsync::recursive_halving{});
    f("recursive_doubling", gradsync::recursive_doubling{});
    f("ring", gradsync::ring{});
    if (n % 2 == 0)
        f("hierarchical (k = 2)", two_per_node);
    f("automatic", gradsync::automatic{});
}

// One layer against ResNet-50's layers for Adasum with `algorithm` on N = 2..16.
template <class Algorithm>
void check_layer_independent(Algorithm algorithm)
{
    const std::vector<std::size_t> one{count};
    const std::vector<std::size_t> resnet = gradsync_bench::resnet50_layers(count);
    REQUIRE(resnet.size() == 107);
    for (int n = 2; n <= 16; ++n) {
        if (std::same_as<Algorithm, gradsync::hierarchical> && n % 2 != 0)
            continue;
        INFO(Algorithm::name << ", Adasum, N = " << n);
        const measured single = measure<gradsync::adasum>(n, algorithm, one);
        const measured layered = measure<gradsync::adasum>(n, algorithm, resnet);
        REQUIRE(single.direct);
        REQUIRE(layered.direct);
        // A call's work on another space would go uncounted (and, on a GPU, unordered).
        CHECK(single.stray == 0);
        CHECK(layered.stray == 0);
        CHECK(layered.most.launches == single.most.launches);
        CHECK(layered.most.syncs == single.most.syncs);
        CHECK(layered.most.copies == single.most.copies);
        const counts b = bound(algorithm, n);
        INFO("launches " << layered.most.launches << " (bound " << b.launches << "), syncs " << layered.most.syncs
                         << " (bound " << b.syncs << ")");
        CHECK(layered.most.launches <= b.launches);
        CHECK(layered.most.syncs <= b.syncs);
        CHECK(layered.most.copies == 0); // nothing of a call goes to the host
    }
}

} // namespace

TEST_CASE("device launches: the counting policy counts one launch per kernel, none for Thrust's inner calls",
          "[device][launches]")
{
    counts c;
    counting_policy p;
    p.c = &c;
    std::vector<float> acc(1000, 1.0f);
    const std::vector<float> in(1000, 2.0f);
    gradsync::kernels::add(p, std::span<float>(acc), std::span<const float>(in));
    CHECK(c.launches == 1);
    CHECK(acc[999] == 3.0f);

    // Thrust builds fill from generate and for_each: still one launch.
    c = {};
    gradsync::kernels::zero(p, std::span<float>(acc));
    CHECK(c.launches == 1);
    CHECK(acc[0] == 0.0f);

    // out = 0.5 * in + 2 * in: the two-input transform.
    c = {};
    gradsync::kernels::scaled_add(p, std::span<float>(acc), 0.5, std::span<const float>(in), 2.0,
                                  std::span<const float>(in));
    CHECK(c.launches == 1);
    CHECK(acc[0] == 5.0f);
}

TEST_CASE("device launches: every Thrust algorithm the library calls is one the counting policy counts",
          "[device][launches]")
{
    // The algorithms with an overload above; any other would run uncounted on the CPP system.
    const std::set<std::string> counted{"transform", "for_each", "fill"};
    const std::regex call(R"(thrust::(\w+)\s*\()");
    std::string uncounted;
    std::size_t calls = 0;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(GRADSYNC_INCLUDE_DIR "/gradsync")) {
        if (entry.path().extension() != ".hpp")
            continue;
        std::ifstream in(entry.path());
        std::ostringstream text;
        text << in.rdbuf();
        const std::string s = text.str();
        for (std::sregex_iterator it(s.begin(), s.end(), call), end; it != end; ++it) {
            ++calls;
            if (!counted.contains((*it)[1].str()))
                uncounted += entry.path().filename().string() + ": thrust::" + (*it)[1].str() + "\n";
        }
    }
    CHECK(calls > 0);
    CHECK(uncounted == "");
}

TEST_CASE("device launches: Adasum with recursive_halving launches and waits as often with 107 layers as with one",
          "[device][launches][adasum]")
{
    check_layer_independent(gradsync::recursive_halving{});
}

TEST_CASE("device launches: Adasum with recursive_doubling launches and waits as often with 107 layers as with one",
          "[device][launches][adasum]")
{
    check_layer_independent(gradsync::recursive_doubling{});
}

TEST_CASE("device launches: Adasum with ring launches and waits as often with 107 layers as with one",
          "[device][launches][adasum]")
{
    check_layer_independent(gradsync::ring{});
}

TEST_CASE("device launches: Adasum with hierarchical (k = 2) launches and waits as often with 107 layers as with one",
          "[device][launches][adasum]")
{
    check_layer_independent(two_per_node);
}

TEST_CASE("device launches: Adasum with automatic launches and waits as often with 107 layers as with one",
          "[device][launches][adasum]")
{
    check_layer_independent(gradsync::automatic{});
}

TEST_CASE("device launches: the table of launches, syncs and copies per call", "[.table]")
{
    const std::vector<std::size_t> one{count};
    const std::vector<std::size_t> resnet = gradsync_bench::resnet50_layers(count);
    const std::string l = std::to_string(resnet.size());
    std::cout << "| algorithm | policy | N | launches 1 layer | launches " << l << " layers | syncs 1 layer | syncs "
              << l << " layers | copies 1 | copies " << l << " |\n"
              << "|---|---|---:|---:|---:|---:|---:|---:|---:|\n";
    std::vector<std::string> uneven; // rows whose ranks differ
    for (const int n : {2, 4, 8, 16})
        for_each_algorithm(n, [&](const char* name, auto algorithm) {
            const auto row = [&](const char* policy_name, const measured& single, const measured& layered) {
                std::cout << "| " << name << " | " << policy_name << " | " << n << " | " << single.most.launches
                          << " | " << layered.most.launches << " | " << single.most.syncs << " | "
                          << layered.most.syncs << " | " << single.most.copies << " | " << layered.most.copies
                          << " |\n";
                for (const auto& [layers, m] : {std::pair{"1", &single}, std::pair{l.c_str(), &layered}})
                    if (m->least.launches != m->most.launches || m->least.syncs != m->most.syncs ||
                        m->least.copies != m->most.copies)
                        uneven.push_back(std::string(name) + ", " + policy_name + ", N = " + std::to_string(n) +
                                         ", " + layers + " layer(s): launches " + std::to_string(m->least.launches) +
                                         ".." + std::to_string(m->most.launches) + ", syncs " +
                                         std::to_string(m->least.syncs) + ".." + std::to_string(m->most.syncs) +
                                         ", copies " + std::to_string(m->least.copies) + ".." +
                                         std::to_string(m->most.copies));
                CHECK(single.direct);
                CHECK(layered.direct);
                CHECK(single.stray == 0);
                CHECK(layered.stray == 0);
            };
            row("adasum", measure<gradsync::adasum>(n, algorithm, one),
                measure<gradsync::adasum>(n, algorithm, resnet));
            row("sum", measure<gradsync::sum>(n, algorithm, one), measure<gradsync::sum>(n, algorithm, resnet));
        });
    std::cout << "\nMaximum over ranks. Rows whose ranks differ (least..most):\n";
    for (const std::string& u : uneven)
        std::cout << "- " << u << "\n";
    if (uneven.empty())
        std::cout << "- none\n";
}
