// Allreduce cases of the device path (collective/device_reducer.hpp), shared by the CPU tests
// (host_space with Thrust's CPU systems, host_harness.hpp) and the GPU test (cuda_stream,
// local_group ranks sharing one GPU). A harness H provides
//   H::space_type                    the memory space
//   H::make_group(n)                 a std::unique_ptr<local_group> whose ranks move that memory
//   H::context                       a rank's resources (a CUDA stream), made on its thread; .space()
//   H::buffer<T>(ctx, values)        a copy of values in the space; .span(), .read()
// Every case runs whole local_groups, records per rank, and returns "" or what went wrong,
// so Catch2's assertions stay on the main thread. The independent references are
// reference.hpp's exact sums and the host path (reducer<> on host memory, itself checked
// against the references by test_allreduce_local). Adasum's cases, checked against
// adasum_reference.hpp, are in adasum_cases.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <gradsync/collective/device_reducer.hpp>
#include <gradsync/gradsync.hpp>

#include "../outcome.hpp"
#include "../reference.hpp"

namespace device_cases {

using gradsync::local_communicator;
template <class T>
using per_rank = std::vector<std::vector<T>>;

// "" when every rank holds rank 0's bits.
template <class T>
std::string identical(const per_rank<T>& got)
{
    for (std::size_t r = 1; r < got.size(); ++r)
        if (const std::string e = ref::first_difference(got[r], got[0]); !e.empty())
            return "rank " + std::to_string(r) + " differs from rank 0: " + e;
    return "";
}

template <class T>
per_rank<T> inputs(bool integers, std::uint64_t seed, int n, std::size_t count)
{
    per_rank<T> in;
    for (int r = 0; r < n; ++r)
        in.push_back(integers ? ref::int_data<T>(seed, r, count) : ref::random_data<T>(seed, r, count));
    return in;
}

// The algorithm a device_reducer runs: the given one, with no shared memory (docs/gpu.md,
// "Paths"); the host plans the device plans are compared with run it too.
template <class Algorithm>
Algorithm device_choice(Algorithm algorithm)
{
    if constexpr (requires { algorithm.share_memory = false; })
        algorithm.share_memory = false;
    return algorithm;
}

// The host path: one reducer per rank, called on each input set in turn.
template <class T, class Policy, class Algorithm>
std::vector<per_rank<T>> host_results(const std::vector<per_rank<T>>& sets, std::span<const std::size_t> layers,
                                      Algorithm algorithm = {})
{
    const int n = int(sets[0].size());
    std::vector<per_rank<T>> out = sets;
    gradsync::local_group group(n);
    group.run([&](local_communicator& comm) {
        const std::size_t r = std::size_t(comm.rank()), count = sets[0][r].size();
        gradsync::reducer<T, local_communicator, Policy, Algorithm> reduce(comm, count, layers,
                                                                         device_choice(algorithm));
        for (auto& set : out)
            reduce(std::span<T>(set[r]));
    });
    return out;
}

struct device_run {
    std::vector<gradsync::device_path> path;      // per rank
    std::vector<gradsync_test::outcome> outcomes; // per rank
};

// Rank r's input of every set, reduced in turn by `reduce` in the harness's memory; the
// results replace the inputs.
template <class H, class T, class Reducer>
void reduce_each(Reducer& reduce, const typename H::context& ctx, std::vector<per_rank<T>>& sets, std::size_t r)
{
    for (per_rank<T>& set : sets) {
        typename H::template buffer<T> data(ctx, set[r]);
        reduce(data.span());
        set[r] = data.read();
    }
}

// The device path: one device_reducer per rank (options per rank), called on each input
// set in turn; results replace the inputs.
template <class H, class T, class Policy, class Algorithm>
device_run device_results(std::vector<per_rank<T>>& sets, std::span<const std::size_t> layers,
                          const std::vector<gradsync::device_options>& options, Algorithm algorithm = {})
{
    const int n = int(sets[0].size());
    device_run run{std::vector<gradsync::device_path>(std::size_t(n)),
                   std::vector<gradsync_test::outcome>(std::size_t(n))};
    const auto group = H::make_group(n);
    try {
        group->run([&](local_communicator& comm) {
            const std::size_t r = std::size_t(comm.rank());
            gradsync_test::record(run.outcomes[r], true, [&] {
                typename H::context ctx;
                const std::size_t count = sets[0][r].size();
                gradsync::device_reducer<T, local_communicator, Policy, Algorithm, typename H::space_type> reduce(
                    comm, count, layers, algorithm, options[r]);
                run.path[r] = reduce.path();
                reduce_each<H>(reduce, ctx, sets, r);
            });
        });
    } catch (...) {
        // recorded per rank
    }
    return run;
}

inline std::string outcomes_ok(const device_run& run)
{
    for (std::size_t r = 0; r < run.outcomes.size(); ++r)
        if (run.outcomes[r].k != gradsync_test::kind::ok)
            return "rank " + std::to_string(r) + " ended in " + gradsync_test::kind_name(run.outcomes[r].k) + ": " +
                run.outcomes[r].what;
    return "";
}

inline std::string paths_are(const device_run& run, const std::vector<gradsync::device_path>& want)
{
    for (std::size_t r = 0; r < run.path.size(); ++r)
        if (run.path[r] != want[r % want.size()])
            return "rank " + std::to_string(r) + " took the " + gradsync::device_path_name(run.path[r]) + " path";
    return "";
}

inline gradsync::device_options with(gradsync::device_path path, std::size_t segment_bytes)
{
    gradsync::device_options o;
    o.path = path;
    o.reducer.pipeline.segment_bytes = segment_bytes;
    return o;
}

// Sum or Average through the device path with per-rank paths (cycled over the ranks):
// integer data gives the exact sum, random data the host path's bits, on every rank alike.
template <class H, class T, class Policy, class Algorithm>
std::string elementwise_case(int n, std::size_t count, const std::vector<gradsync::device_path>& paths,
                             std::size_t segment_bytes, Algorithm algorithm = {})
{
    constexpr bool average = std::is_same_v<Policy, gradsync::average>;
    const std::uint64_t seed = ref::mix(std::uint64_t(n) * 7919 + count);
    std::vector<per_rank<T>> sets{inputs<T>(true, seed, n, count), inputs<T>(false, seed + 1, n, count)};
    const std::vector<per_rank<T>> host = host_results<T, Policy, Algorithm>(sets, {}, algorithm);
    const std::vector<per_rank<T>> given = sets;
    std::vector<gradsync::device_options> options;
    for (int r = 0; r < n; ++r)
        options.push_back(with(paths[std::size_t(r) % paths.size()], segment_bytes));
    const device_run run = device_results<H, T, Policy, Algorithm>(sets, {}, options, algorithm);
    std::string e = outcomes_ok(run);
    if (e.empty())
        e = paths_are(run, paths);
    if (e.empty())
        if (const std::string d = ref::first_difference(sets[0][0], ref::exact(given[0], average)); !d.empty())
            e = "integer data, against the exact sum: " + d;
    if (e.empty())
        if (const std::string d = ref::first_difference(sets[1][0], host[1][0]); !d.empty())
            e = "random data, against the host path: " + d;
    for (std::size_t s = 0; e.empty() && s < sets.size(); ++s)
        e = identical(sets[s]);
    return e.empty() ? "" : "N " + std::to_string(n) + ", count " + std::to_string(count) + ": " + e;
}

// Any combination through the staged path, asked for explicitly (with a device plan in the
// table, the default would take the direct path): the host path's bits, on every rank alike.
template <class H, class T, class Policy, class Algorithm>
std::string staged_case(int n, std::size_t count, const std::vector<std::size_t>& layers, Algorithm algorithm = {})
{
    const std::uint64_t seed = ref::mix(std::uint64_t(n) * 104729 + count);
    std::vector<per_rank<T>> sets{inputs<T>(false, seed, n, count)};
    const std::vector<per_rank<T>> host = host_results<T, Policy, Algorithm>(sets, layers, algorithm);
    gradsync::device_options staged;
    staged.path = gradsync::device_path::staged;
    const device_run run = device_results<H, T, Policy, Algorithm>(
        sets, layers, std::vector<gradsync::device_options>(std::size_t(n), staged), algorithm);
    std::string e = outcomes_ok(run);
    if (e.empty())
        e = paths_are(run, {gradsync::device_path::staged});
    if (e.empty())
        if (const std::string d = ref::first_difference(sets[0][0], host[0][0]); !d.empty())
            e = "against the host path: " + d;
    if (e.empty())
        e = identical(sets[0]);
    return e.empty() ? "" : "N " + std::to_string(n) + ", count " + std::to_string(count) + ": " + e;
}

// Misuse ends in the same error on every rank, with a message naming the problem.
template <class H>
struct misuse {
    // Adasum with staged and direct ranks alternating: the host kernels and the Thrust
    // kernels sum the triples in different orders, so the agreement check refuses the mix.
    template <class Algorithm>
    static device_run adasum_paths_mixed(int n, Algorithm algorithm = {})
    {
        const std::vector<std::size_t> layers{40, 0, 1, 59};
        std::vector<per_rank<float>> sets{inputs<float>(false, 1, n, 100)};
        std::vector<gradsync::device_options> options;
        for (int r = 0; r < n; ++r)
            options.push_back(with(r % 2 == 0 ? gradsync::device_path::staged : gradsync::device_path::direct, 1 << 20));
        return device_results<H, float, gradsync::adasum, Algorithm>(sets, layers, options, algorithm);
    }

    // The even ranks reduce `data` with a host reducer<> in host memory, the odd ones with
    // a device_reducer on the direct path; data[r] becomes rank r's result.
    template <class Policy>
    static device_run host_beside_direct(per_rank<float>& data)
    {
        const int n = int(data.size());
        device_run run{std::vector<gradsync::device_path>(std::size_t(n)),
                       std::vector<gradsync_test::outcome>(std::size_t(n))};
        const std::vector<std::size_t> layers{30, 0, 1, data[0].size() - 31};
        const auto group = H::make_group(n);
        try {
            group->run([&](local_communicator& comm) {
                const std::size_t r = std::size_t(comm.rank());
                gradsync_test::record(run.outcomes[r], true, [&] {
                    const gradsync::device_options direct = with(gradsync::device_path::direct, 1 << 20);
                    if (r % 2 == 0) {
                        run.path[r] = gradsync::device_path::staged; // host memory, as the staged path runs
                        gradsync::reducer<float, local_communicator, Policy, gradsync::ring> reduce(
                            comm, layers, gradsync::ring{}, direct.reducer);
                        reduce(std::span<float>(data[r]));
                        return;
                    }
                    typename H::context ctx;
                    using space = typename H::space_type;
                    gradsync::device_reducer<float, local_communicator, Policy, gradsync::ring, space> reduce(
                        comm, layers, gradsync::ring{}, direct);
                    run.path[r] = reduce.path();
                    typename H::template buffer<float> buffer(ctx, data[r]);
                    reduce(buffer.span());
                    data[r] = buffer.read();
                });
            });
        } catch (...) {
            // recorded per rank
        }
        return run;
    }

    // Rank 1 plans for one element more than the others.
    static device_run counts_disagree(gradsync::device_path path)
    {
        std::vector<per_rank<float>> sets{inputs<float>(false, 2, 3, 100)};
        sets[0][1].push_back(1.0f);
        return device_results<H, float, gradsync::sum, gradsync::ring>(
            sets, {}, std::vector<gradsync::device_options>(3, with(path, 1 << 20)));
    }

    // The reducer is planned for 100 elements and called with 99.
    static device_run wrong_size()
    {
        const auto group = H::make_group(2);
        device_run run{std::vector<gradsync::device_path>(2), std::vector<gradsync_test::outcome>(2)};
        try {
            group->run([&](local_communicator& comm) {
                gradsync_test::record(run.outcomes[std::size_t(comm.rank())], true, [&] {
                    typename H::context ctx;
                    typename H::template buffer<float> data(ctx, std::vector<float>(99, 1.0f));
                    using space = typename H::space_type;
                    gradsync::device_reducer<float, local_communicator, gradsync::sum, gradsync::ring, space> reduce(
                        comm, 100);
                    reduce(data.span());
                });
            });
        } catch (...) {
            // recorded per rank
        }
        return run;
    }
};

// "" when some rank ended in kind k, every other one in k or released (aborted_error), and
// every message of kind k contains `says`.
inline std::string all_ended_in(const device_run& run, gradsync_test::kind k, const std::string& says)
{
    bool seen = false;
    for (std::size_t r = 0; r < run.outcomes.size(); ++r) {
        const gradsync_test::outcome& o = run.outcomes[r];
        if (o.k != k && o.k != gradsync_test::kind::aborted)
            return "rank " + std::to_string(r) + " ended in " + gradsync_test::kind_name(o.k) + ": " + o.what;
        if (o.k == k && o.what.find(says) == std::string::npos)
            return "rank " + std::to_string(r) + "'s message lacks \"" + says + "\": " + o.what;
        seen = seen || o.k == k;
    }
    return seen ? "" : std::string("no rank ended in ") + gradsync_test::kind_name(k);
}

// "" when every way of mixing host and device memory in one Adasum reducer ends in a
// mismatch_error naming the triple order on every rank: staged and direct ranks (N = 2..4,
// every algorithm), and host reducers beside direct-path device reducers.
template <class H>
std::string adasum_mixing_refused()
{
    using cases = misuse<H>;
    const std::string says = "the Adasum triple order";
    for (int n : {2, 3, 4}) {
        const std::string in = "N " + std::to_string(n) + ", ";
        for (const std::string& e :
             {all_ended_in(cases::adasum_paths_mixed(n, gradsync::ring{}), gradsync_test::kind::mismatch, says),
              all_ended_in(cases::adasum_paths_mixed(n, gradsync::recursive_halving{}), gradsync_test::kind::mismatch,
                           says),
              all_ended_in(cases::adasum_paths_mixed(n, gradsync::recursive_doubling{}), gradsync_test::kind::mismatch,
                           says),
              all_ended_in(cases::adasum_paths_mixed(n, gradsync::automatic{}), gradsync_test::kind::mismatch, says),
              all_ended_in(cases::adasum_paths_mixed(n, gradsync::hierarchical{.ranks_per_node = 1}),
                           gradsync_test::kind::mismatch, says)})
            if (!e.empty())
                return in + e;
    }
    per_rank<float> data = inputs<float>(false, 3, 3, 100);
    const std::string e =
        all_ended_in(cases::template host_beside_direct<gradsync::adasum>(data), gradsync_test::kind::mismatch, says);
    return e.empty() ? "" : "host reducers beside device ones: " + e;
}

} // namespace device_cases
