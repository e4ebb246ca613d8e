// synchronizer over local_group (1..8 ranks).
//
// Results: after wait(), every layer equals a plain gradsync::allreduce of the same data,
// group by group, with the same algorithm and the group's layer sizes, bit for bit; for
// Sum/Average of integer data also the exact sum written out here. Matrix: {sum, average,
// adasum} x {ring, recursive_halving, automatic, hierarchical} x {fp16, fp32, fp64} (fp32
// under ThreadSanitizer) x plans
// {wfbp, single, mixed merges, an empty layer alone} x storage {one flat buffer (in place),
// a flat buffer in backward order and one vector per layer (both fused)}, three iterations
// per synchronizer; storage differs between ranks. Also: the flat buffer really is reduced
// in place and per-layer vectors are not; groups start while backward still runs (from
// last_times(), with a backward pass simulated by sleeps); the hot path allocates nothing;
// errors reach wait() on the failing rank and release the others; bad plans, disagreeing
// ranks, ready()/wait() misuse and a transport without thread support are refused;
// destruction without wait() joins and leaves the communicator usable.
//
// Rank code only records; CHECKs run on the main thread.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <latch>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <gradsync/gradsync.hpp>

#include "outcome.hpp"
#include "reference.hpp"
#include "sanitized.hpp"

// Every allocation of the program, on any thread: the hot-path test reads it. Every
// replaceable form that pairs with free() is replaced (a sanitizer runtime supplies the ones
// left out, and would see its own allocation freed here); not inlined, so that the compiler
// does not see free() meet a pointer from operator new.
namespace {
std::atomic<std::size_t> allocations{0};
void* counted(std::size_t n) noexcept
{
    allocations.fetch_add(1, std::memory_order_relaxed);
    return std::malloc(n ? n : 1);
}
} // namespace

[[gnu::noinline]] void* operator new(std::size_t n)
{
    if (void* p = counted(n))
        return p;
    throw std::bad_alloc();
}
[[gnu::noinline]] void* operator new[](std::size_t n) { return ::operator new(n); }
[[gnu::noinline]] void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted(n); }
[[gnu::noinline]] void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted(n); }
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace {

using gradsync::half;
using gradsync::local_communicator;
using gradsync::local_group;
using gradsync_test::kind;
using gradsync_test::kind_name;
using gradsync_test::outcome;
using Catch::Matchers::Contains;
using clock_type = std::chrono::steady_clock;
using plan_t = std::vector<std::vector<std::size_t>>;

// ---- gradients in three storages ------------------------------------------------------

std::vector<std::size_t> offsets_of(const std::vector<std::size_t>& sizes)
{
    std::vector<std::size_t> o{0};
    for (std::size_t s : sizes)
        o.push_back(o.back() + s);
    return o;
}

enum class storage { flat, flat_backward, per_layer };
constexpr storage storages[] = {storage::flat, storage::flat_backward, storage::per_layer};

const char* storage_name(storage s)
{
    switch (s) {
    case storage::flat: return "flat buffer";
    case storage::flat_backward: return "flat buffer in backward order";
    case storage::per_layer: return "one vector per layer";
    }
    return "?";
}

// One rank's gradients: layer l is layer[l], wherever the storage puts it.
template <class T>
struct gradients {
    std::vector<T> flat;
    std::vector<std::vector<T>> own;
    std::vector<std::span<T>> layer;

    gradients(storage s, const std::vector<std::size_t>& sizes)
    {
        std::size_t total = 0;
        for (std::size_t n : sizes)
            total += n;
        if (s == storage::per_layer) {
            for (std::size_t n : sizes)
                own.emplace_back(n);
            for (auto& v : own)
                layer.emplace_back(v);
            return;
        }
        flat.resize(total);
        layer.resize(sizes.size());
        std::size_t at = 0;
        for (std::size_t k = 0; k < sizes.size(); ++k) {
            const std::size_t l = s == storage::flat ? k : sizes.size() - 1 - k;
            layer[l] = std::span<T>(flat).subspan(at, sizes[l]);
            at += sizes[l];
        }
    }

    // Writes the layers from one forward-order vector.
    void load(const std::vector<T>& forward)
    {
        std::size_t at = 0;
        for (std::span<T> s : layer) {
            std::copy_n(forward.begin() + std::ptrdiff_t(at), s.size(), s.begin());
            at += s.size();
        }
    }

    std::vector<T> forward() const
    {
        std::vector<T> v;
        for (std::span<T> s : layer)
            v.insert(v.end(), s.begin(), s.end());
        return v;
    }
};

// The backward pass: layers L-1 down to 0.
template <class Sync, class T>
void backward(Sync& sync, gradients<T>& g)
{
    for (std::size_t l = g.layer.size(); l-- > 0;)
        sync.ready(l, g.layer[l]);
}

// The reference: a plain allreduce per group, with the group's layer sizes.
template <class T, class C, class Policy, class Algo>
void reduce_by_group(C& comm, std::vector<T>& data, const std::vector<std::size_t>& sizes, const plan_t& plan,
                     Policy policy, Algo algo)
{
    const std::vector<std::size_t> offset = offsets_of(sizes);
    for (const auto& group : plan) {
        const std::size_t lo = group.front(), hi = group.back();
        gradsync::allreduce(comm, std::span<T>(data).subspan(offset[lo], offset[hi + 1] - offset[lo]), policy, algo,
                            std::span<const std::size_t>(sizes).subspan(lo, group.size()));
    }
}

// Rank code's own list of problems; the main thread CHECKs them.
struct problems {
    std::mutex mutex;
    std::vector<std::string> list;
    void add(std::string s)
    {
        std::lock_guard lock(mutex);
        list.push_back(std::move(s));
    }
};

using gradsync_test::run_ranks;

std::string show(const std::vector<std::string>& list)
{
    std::string s;
    for (std::size_t i = 0; i < list.size() && i < 5; ++i)
        s += list[i] + "\n";
    return s;
}

// ---- the result matrix ---------------------------------------------------------------

// Empty layers: alone (5), at a group's edge (1) and inside merges.
const std::vector<std::size_t> matrix_sizes{7, 0, 33, 5, 120, 0, 64, 3};

struct named_plan {
    const char* name;
    plan_t groups;
};

const std::vector<named_plan> matrix_plans{
    {"wfbp", {{7}, {6}, {5}, {4}, {3}, {2}, {1}, {0}}},
    {"single", {{0, 1, 2, 3, 4, 5, 6, 7}}},
    {"mixed merges", {{6, 7}, {3, 4, 5}, {2}, {0, 1}}},
    {"an empty layer alone", {{7}, {6}, {5}, {3, 4}, {0, 1, 2}}},
};

template <class Algo>
Algo algorithm_for(int n)
{
    if constexpr (std::is_same_v<Algo, gradsync::hierarchical>)
        return gradsync::hierarchical{.ranks_per_node = n % 2 == 0 ? 2 : 1};
    else
        return Algo{};
}

template <class T, class Policy, class Algo>
void check_matrix(int n)
{
    const std::vector<std::size_t>& sizes = matrix_sizes;
    const std::size_t total = offsets_of(sizes).back();
    constexpr bool exact_kind = !gradsync::is_adasum<Policy>;
    constexpr bool average = std::is_same_v<Policy, gradsync::average>;
    problems found;
    local_group group(n);
    const std::string escaped = run_ranks(group, [&](local_communicator& comm) {
        const int rank = comm.rank();
        const Algo algo = algorithm_for<Algo>(n);
        for (std::size_t p = 0; p < matrix_plans.size(); ++p)
            for (std::size_t s = 0; s < 3; ++s) {
                const storage mine = storages[(s + std::size_t(rank)) % 3];
                gradients<T> g(mine, sizes);
                gradsync::synchronizer<T, local_communicator, Policy, Algo> sync(comm, sizes, matrix_plans[p].groups,
                                                                                Policy{}, algo);
                for (int it = 0; it < 3; ++it) {
                    const std::uint64_t seed = ref::mix(std::uint64_t(n) * 1000 + p * 100 + s * 10 + std::uint64_t(it));
                    const bool integer = it != 1;
                    const std::vector<T> input =
                        integer ? ref::int_data<T>(seed, rank, total) : ref::random_data<T>(seed, rank, total);
                    g.load(input);
                    backward(sync, g);
                    sync.wait();
                    const std::vector<T> got = g.forward();
                    std::vector<T> want = input;
                    reduce_by_group(comm, want, sizes, matrix_plans[p].groups, Policy{}, algo);
                    const std::string where = std::string(ref::type_name<T>()) + ", N " + std::to_string(n) + ", rank " +
                        std::to_string(rank) + ", plan " + matrix_plans[p].name + ", " + storage_name(mine) +
                        ", iteration " + std::to_string(it) + ": ";
                    if (const std::string d = ref::first_difference(got, want); !d.empty())
                        found.add(where + "differs from allreduce at " + d);
                    if (exact_kind && integer) {
                        std::vector<std::vector<T>> inputs;
                        for (int q = 0; q < n; ++q)
                            inputs.push_back(ref::int_data<T>(seed, q, total));
                        if (const std::string d = ref::first_difference(got, ref::exact(inputs, average)); !d.empty())
                            found.add(where + "differs from the exact sum at " + d);
                    }
                }
            }
    });
    INFO(ref::type_name<T>() << ", N " << n);
    CHECK(escaped == "");
    INFO(show(found.list));
    CHECK(found.list.empty());
}

template <class Policy, class Algo>
void run_matrix()
{
    for (int n = 1; n <= 8; ++n) {
        check_matrix<float, Policy, Algo>(n);
        if constexpr (!gradsync_test::thread_sanitized) { // sanitized.hpp: fp32 alone there
            check_matrix<half, Policy, Algo>(n);
            check_matrix<double, Policy, Algo>(n);
        }
    }
}

} // namespace

#define GRADSYNC_SYNC_MATRIX(policy, algo)                                                                             \
    TEST_CASE("results equal allreduce: " #policy " with " #algo, "[synchronizer][matrix]")                               \
    {                                                                                                                  \
        run_matrix<gradsync::policy, gradsync::algo>();                                                                \
    }

GRADSYNC_SYNC_MATRIX(sum, ring)
GRADSYNC_SYNC_MATRIX(sum, recursive_halving)
GRADSYNC_SYNC_MATRIX(sum, automatic)
GRADSYNC_SYNC_MATRIX(sum, hierarchical)
GRADSYNC_SYNC_MATRIX(average, ring)
GRADSYNC_SYNC_MATRIX(average, recursive_halving)
GRADSYNC_SYNC_MATRIX(average, automatic)
GRADSYNC_SYNC_MATRIX(average, hierarchical)
GRADSYNC_SYNC_MATRIX(adasum, ring)
GRADSYNC_SYNC_MATRIX(adasum, recursive_halving)
GRADSYNC_SYNC_MATRIX(adasum, automatic)
GRADSYNC_SYNC_MATRIX(adasum, hierarchical)

namespace {

// ---- an instrumented transport ---------------------------------------------------------

// A local_communicator that records the byte range of every send, can throw on a chosen
// send, and has the optional thread-support hook (refusing when told to).
class instrumented {
public:
    using request = local_communicator::request;

    explicit instrumented(local_communicator& inner) : inner_(&inner) {}

    int rank() const { return inner_->rank(); }
    int size() const { return inner_->size(); }

    request isend(std::span<const std::byte> data, int peer, int tag)
    {
        if (fail_in == 0)
            throw gradsync::communication_error("injected failure on rank " + std::to_string(rank()));
        if (fail_in > 0)
            --fail_in;
        sent.emplace_back(data.data(), data.data() + data.size());
        return inner_->isend(data, peer, tag);
    }
    request irecv(std::span<std::byte> data, int peer, int tag) { return inner_->irecv(data, peer, tag); }
    void wait(request& r) { inner_->wait(r); }

    void check_thread_support(const char* who) const
    {
        ++hook_calls;
        if (refuse_threads)
            throw gradsync::usage_error(std::string(who) + ": this transport cannot be driven from a second thread");
    }

    int fail_in = -1; // sends left before the injected failure; -1: never
    bool refuse_threads = false;
    mutable int hook_calls = 0;
    std::vector<std::pair<const std::byte*, const std::byte*>> sent;

private:
    local_communicator* inner_;
};

template <class T>
bool inside(const std::pair<const std::byte*, const std::byte*>& range, std::span<const T> buffer)
{
    const auto* b = reinterpret_cast<const std::byte*>(buffer.data());
    return range.first != range.second && range.first >= b && range.second <= b + buffer.size_bytes();
}

TEST_CASE("a flat buffer is reduced in place and per-layer vectors through the fusion buffer",
          "[synchronizer]")
{
    const std::vector<std::size_t> sizes{40, 16, 0, 24, 64}; // two non-empty layers per group
    const plan_t plan{{3, 4}, {0, 1, 2}};
    const std::size_t total = offsets_of(sizes).back();
    for (int n : {2, 3})
        for (storage s : {storage::flat, storage::per_layer}) {
            INFO(n << " ranks, " << storage_name(s));
            std::vector<std::size_t> from_user(static_cast<std::size_t>(n)), sends(static_cast<std::size_t>(n));
            problems found;
            local_group group(n);
            const std::string escaped = run_ranks(group, [&](local_communicator& comm) {
                instrumented wire(comm);
                gradients<float> g(s, sizes);
                gradsync::synchronizer<float, instrumented, gradsync::sum, gradsync::ring> sync(wire, sizes, plan);
                wire.sent.clear();
                const std::uint64_t seed = 77;
                g.load(ref::int_data<float>(seed, comm.rank(), total));
                backward(sync, g);
                sync.wait();
                std::size_t hits = 0;
                for (const auto& range : wire.sent)
                    for (std::span<float> layer : g.layer)
                        hits += inside(range, std::span<const float>(layer)) ? 1 : 0;
                from_user[std::size_t(comm.rank())] = hits;
                sends[std::size_t(comm.rank())] = wire.sent.size();
                std::vector<std::vector<float>> inputs;
                for (int q = 0; q < n; ++q)
                    inputs.push_back(ref::int_data<float>(seed, q, total));
                if (const std::string d = ref::first_difference(g.forward(), ref::exact(inputs, false)); !d.empty())
                    found.add("rank " + std::to_string(comm.rank()) + ": " + d);
            });
            CHECK(escaped == "");
            CHECK(found.list.empty());
            for (int r = 0; r < n; ++r) {
                INFO("rank " << r << ": " << from_user[std::size_t(r)] << " of " << sends[std::size_t(r)]
                              << " sends came straight from the gradients");
                CHECK(sends[std::size_t(r)] > 0);
                if (s == storage::flat)
                    CHECK(from_user[std::size_t(r)] > 0);
                else
                    CHECK(from_user[std::size_t(r)] == 0);
            }
        }
}

// ---- overlap with backward -------------------------------------------------------------

TEST_CASE("groups start as soon as they are complete while backward still runs", "[synchronizer]")
{
    const std::vector<std::size_t> sizes(6, 1000);
    const std::vector<named_plan> plans{{"wfbp", {{5}, {4}, {3}, {2}, {1}, {0}}},
                                        {"pairs", {{4, 5}, {2, 3}, {0, 1}}}};
    const auto layer_time = std::chrono::milliseconds(20);
    for (int n : {2, 4})
        for (const named_plan& p : plans) {
            INFO(n << " ranks, plan " << p.name);
            // Per rank: when ready(l) was called, and the groups' times, for two iterations.
            std::vector<std::vector<std::vector<clock_type::time_point>>> readied(static_cast<std::size_t>(n));
            std::vector<std::vector<std::vector<gradsync::group_times>>> times(static_cast<std::size_t>(n));
            local_group group(n);
            const std::string escaped = run_ranks(group, [&](local_communicator& comm) {
                const std::size_t r = std::size_t(comm.rank());
                gradients<float> g(storage::flat, sizes);
                gradsync::synchronizer<float, local_communicator, gradsync::average, gradsync::ring> sync(comm, sizes,
                                                                                                          p.groups);
                for (int it = 0; it < 2; ++it) {
                    std::vector<clock_type::time_point> at(sizes.size());
                    for (std::size_t l = sizes.size(); l-- > 0;) {
                        std::this_thread::sleep_for(layer_time); // this layer's backward compute
                        at[l] = clock_type::now();
                        sync.ready(l, g.layer[l]);
                    }
                    sync.wait();
                    const auto t = sync.last_times();
                    times[r].emplace_back(t.begin(), t.end());
                    readied[r].push_back(at);
                }
            });
            REQUIRE(escaped == "");
            for (std::size_t r = 0; r < std::size_t(n); ++r)
                for (std::size_t it = 0; it < 2; ++it) {
                    INFO("rank " << r << ", iteration " << it);
                    const auto& t = times[r][it];
                    const auto& at = readied[r][it];
                    REQUIRE(t.size() == p.groups.size());
                    CHECK(t[0].start < at[0]); // the first group started before the last ready()
                    for (std::size_t g = 0; g < t.size(); ++g) {
                        INFO("group " << g);
                        CHECK(t[g].start >= at[p.groups[g].front()]); // not before it was complete
                        CHECK(t[g].end >= t[g].start);
                        if (g > 0)
                            CHECK(t[g].start >= t[g - 1].end); // one allreduce at a time, in plan order
                    }
                }
        }
}

// ---- no allocation on the hot path ------------------------------------------------------

TEST_CASE("ready() and wait() and the communication thread allocate nothing once warm", "[synchronizer]")
{
    using delayed = gradsync::delay_communicator<local_communicator>;
    const std::vector<std::size_t> sizes{300, 0, 50, 700, 20};
    const plan_t plan{{3, 4}, {1, 2}, {0}};
    const std::size_t total = offsets_of(sizes).back();
    constexpr int n = 3, warm = 2, counted = 3;
    for (storage s : {storage::flat, storage::per_layer}) {
        INFO(storage_name(s));
        std::size_t before = 0, after = 0;
        int phase = 0;
        std::barrier sync_point(n, [&]() noexcept {
            (phase++ == 0 ? before : after) = allocations.load();
        });
        problems found;
        local_group group(n);
        const std::string escaped = run_ranks(group, [&](local_communicator& comm) {
            delayed link(comm, {20e-6, 1e-9});
            gradients<double> g(s, sizes);
            gradsync::synchronizer<double, delayed, gradsync::adasum> sync(link, sizes, plan);
            std::vector<std::vector<double>> inputs;
            for (int it = 0; it < warm + counted; ++it)
                inputs.push_back(ref::random_data<double>(std::uint64_t(it), comm.rank(), total));
            std::vector<std::vector<double>> results(inputs.size(), std::vector<double>(total));
            for (int it = 0; it < warm + counted; ++it) {
                if (it == warm)
                    sync_point.arrive_and_wait();
                g.load(inputs[std::size_t(it)]);
                backward(sync, g);
                sync.wait();
                std::size_t at = 0;
                for (std::span<double> layer : g.layer) {
                    std::copy(layer.begin(), layer.end(), results[std::size_t(it)].begin() + std::ptrdiff_t(at));
                    at += layer.size();
                }
            }
            sync_point.arrive_and_wait();
            for (std::size_t it = 0; it < inputs.size(); ++it) {
                std::vector<double> want = inputs[it];
                // The delayed link shares no memory; the reference over the threads must not either.
                reduce_by_group(comm, want, sizes, plan, gradsync::adasum{}, gradsync::automatic{.share_memory = false});
                if (const std::string d = ref::first_difference(results[it], want); !d.empty())
                    found.add("rank " + std::to_string(comm.rank()) + ", iteration " + std::to_string(it) + ": " + d);
            }
        });
        CHECK(escaped == "");
        CHECK(found.list.empty());
        CHECK(after - before == 0);
    }
}

// ---- errors --------------------------------------------------------------------------

TEST_CASE("a failing allreduce is rethrown by wait() and retires the synchronizer while the other ranks are released",
          "[synchronizer]")
{
    const std::vector<std::size_t> sizes{50, 50, 50, 50};
    const plan_t plan{{3}, {2}, {1}, {0}};
    for (int n : {2, 3}) {
        INFO(n << " ranks");
        constexpr int failing = 1;
        std::vector<outcome> waited(static_cast<std::size_t>(n)), later(static_cast<std::size_t>(n));
        std::vector<gradsync::group_times> failing_times;
        local_group group(n);
        const std::string escaped = run_ranks(group, [&](local_communicator& comm) {
            instrumented wire(comm);
            gradients<float> g(storage::flat, sizes);
            gradsync::synchronizer<float, instrumented, gradsync::sum, gradsync::ring> sync(wire, sizes, plan);
            const std::size_t r = std::size_t(comm.rank());
            if (comm.rank() == failing)
                wire.fail_in = 2 * (n - 1); // a ring sends 2(N-1) messages per group: fail in group 1
            backward(sync, g);
            gradsync_test::record(waited[r], false, [&] { sync.wait(); });
            if (waited[r].k == kind::ok)
                return;
            gradsync_test::record(later[r], false, [&] { sync.ready(3, g.layer[3]); });
            if (comm.rank() == failing) {
                const auto t = sync.last_times();
                failing_times.assign(t.begin(), t.end());
                throw gradsync::communication_error(waited[r].what); // releases the other ranks
            }
        });
        CHECK_THAT(escaped, Contains("injected failure on rank 1"));
        for (int r = 0; r < n; ++r) {
            const outcome& w = waited[std::size_t(r)];
            const outcome& l = later[std::size_t(r)];
            INFO("rank " << r << ": wait() ended in " << kind_name(w.k) << ": " << w.what << "; then ready(): "
                         << kind_name(l.k) << ": " << l.what);
            if (r == failing) {
                CHECK(kind_name(w.k) == std::string(kind_name(kind::communication)));
                CHECK_THAT(w.what, Contains("injected failure"));
            } else {
                CHECK(kind_name(w.k) == std::string(kind_name(kind::aborted)));
            }
            CHECK(kind_name(l.k) == std::string(kind_name(kind::usage)));
            CHECK_THAT(l.what, Contains("earlier iteration failed") && Contains(w.what));
        }
        REQUIRE(failing_times.size() == plan.size());
        CHECK(failing_times[0].end > failing_times[0].start); // group 0 was reduced
        for (std::size_t g = 2; g < plan.size(); ++g) {       // groups after the failure were skipped
            INFO("group " << g);
            CHECK(failing_times[g].start == clock_type::time_point{});
        }
    }
}

TEST_CASE("with a deadline, wait() on a group a peer never completes is a deadline_error naming the group",
          "[synchronizer][deadline]")
{
    using namespace std::chrono_literals;
    const std::vector<std::size_t> sizes{50, 50, 50, 50};
    const plan_t plan{{3}, {2}, {1}, {0}};
    constexpr int n = 3, absent = 2;
    std::vector<outcome> waited(static_cast<std::size_t>(n));
    // The group has no deadline: the synchronizers' destructors release the communication
    // threads still waiting for rank 2 (see the header's "Deadline"). Theirs is long enough
    // for groups 0..2 to finish first on a loaded machine. The waiting ranks leave together,
    // once each has its own deadline_error: the first to leave aborts the group, which would
    // otherwise end the other's allreduce in aborted_error before its deadline.
    std::latch both_waited(n - 1);
    local_group group(n);
    const auto start = clock_type::now();
    const std::string escaped = run_ranks(group, [&](local_communicator& comm) {
        gradients<float> g(storage::flat, sizes);
        gradsync::synchronizer<float, local_communicator, gradsync::sum, gradsync::ring> sync(
            comm, sizes, plan, {}, {}, gradsync::synchronizer_options{.deadline = 2s});
        const std::size_t r = std::size_t(comm.rank());
        if (comm.rank() == absent) { // readies layers 3..1 and leaves: group 3 (layer 0) never runs here
            for (std::size_t l = 3; l >= 1; --l)
                sync.ready(l, g.layer[l]);
            return;
        }
        backward(sync, g);
        gradsync_test::record(waited[r], false, [&] { sync.wait(); });
        both_waited.arrive_and_wait();
        if (waited[r].k != kind::ok)
            throw gradsync::communication_error(waited[r].what); // releases the blocked communication threads
    });
    const std::chrono::duration<double> elapsed = clock_type::now() - start;
    CHECK_THAT(escaped, Contains("did not finish its allreduce"));
    for (int r = 0; r < n; ++r) {
        if (r == absent)
            continue;
        const outcome& w = waited[std::size_t(r)];
        INFO("rank " << r << ": " << kind_name(w.k) << ": " << w.what);
        CHECK(kind_name(w.k) == std::string(kind_name(kind::communication))); // deadline_error is one
        CHECK_THAT(w.what, Contains("rank " + std::to_string(r) + " of 3") &&
                               Contains("iteration 0, group 3 of 4 (layers 0..0)"));
    }
    CHECK(elapsed.count() >= 2.0);
    local_group one(1);
    CHECK_THROWS_AS(one.run([&](local_communicator& comm) {
        gradsync::synchronizer<float, local_communicator> sync(comm, sizes, plan, {}, {},
                                                               gradsync::synchronizer_options{.deadline = -1ms});
    }),
                    gradsync::usage_error);
}

// The synchronizer declared inside a try, as a trainer would, over a group with no deadline
// of its own: only the synchronizer's can end the wait, and its destructor, run while the
// deadline_error leaves the scope, must release the communication thread stuck in the
// transport instead of joining it for ever (a hang here is the CTest timeout).
TEST_CASE("a peer that never readies a layer: wait()'s deadline_error leaves the scope, the destructor returns",
          "[synchronizer][deadline]")
{
    using namespace std::chrono_literals;
    const std::vector<std::size_t> sizes{50, 50};
    const plan_t plan{{1}, {0}};
    outcome left;
    double seconds = 0;
    local_group group(2);
    const std::string escaped = run_ranks(group, [&](local_communicator& comm) {
        gradients<float> g(storage::flat, sizes);
        if (comm.rank() == 1) { // builds its synchronizer and leaves without a ready()
            gradsync::synchronizer<float, local_communicator> sync(comm, sizes, plan);
            return;
        }
        const auto start = clock_type::now();
        gradsync_test::record(left, false, [&] {
            gradsync::synchronizer<float, local_communicator> sync(comm, sizes, plan, {}, {},
                                                                   gradsync::synchronizer_options{.deadline = 300ms});
            backward(sync, g);
            sync.wait();
        });
        seconds = std::chrono::duration<double>(clock_type::now() - start).count();
    });
    INFO(kind_name(left.k) << ": " << left.what << " (" << seconds << " s)");
    CHECK(escaped.empty());
    CHECK(kind_name(left.k) == std::string(kind_name(kind::communication))); // deadline_error is one
    CHECK_THAT(left.what, Contains("iteration 0, group 0 of 2 (layers 1..1) did not finish its allreduce"));
    CHECK(seconds >= 0.3);
}

// body(comm, outcome&) on every rank of a fresh group of n; returns the outcomes.
template <class Body>
std::vector<outcome> outcomes(int n, Body body)
{
    std::vector<outcome> o(static_cast<std::size_t>(n));
    local_group group(n);
    group.run([&](local_communicator& comm) {
        gradsync_test::record(o[std::size_t(comm.rank())], false, [&] { body(comm); });
    });
    return o;
}

TEST_CASE("plans that do not cover every layer once in backward order are refused on every rank",
          "[synchronizer]")
{
    const std::vector<std::size_t> sizes{4, 4, 4, 4};
    struct bad_plan {
        plan_t groups;
        std::string says;
    };
    const std::vector<bad_plan> cases{
        {{{3}, {2}, {1}}, "layer 0 is in no group"},
        {{}, "layers 0..3 are in no group"},
        {{{3}, {1}, {0}}, "layer 2 is in no group"},
        {{{3}, {2}, {2}, {1}, {0}}, "layer 2 appears twice (in group 1 and group 2)"},
        {{{2, 3}, {1, 2}, {0}}, "layer 2 appears twice (in group 0 and group 1)"},
        {{{3}, {0, 2}, {1}}, "group 1 is not a contiguous ascending run of layers (layer 0 is followed by 2)"},
        {{{3}, {2, 1}, {0}}, "group 1 is not a contiguous ascending run of layers (layer 2 is followed by 1)"},
        {{{0}, {1}, {2}, {3}},
         "groups are not in backward order: group 0 holds layers 0..0, but should end at layer 3, which comes later, "
         "in group 3"},
        {{{0, 1}, {2, 3}}, "groups are not in backward order"},
        {{{3}, {}, {2, 1, 0}}, "group 1 is empty"},
        {{{4, 3}, {2, 1, 0}}, "group 0 lists layer 4, but there are only 4 layers"},
    };
    for (int n : {1, 2})
        for (const bad_plan& c : cases) {
            INFO(n << " ranks, expecting: " << c.says);
            const auto o = outcomes(n, [&](local_communicator& comm) {
                gradsync::synchronizer<float, local_communicator> sync(comm, sizes, c.groups);
            });
            for (const outcome& r : o) {
                INFO(r.what);
                CHECK(kind_name(r.k) == std::string(kind_name(kind::usage)));
                CHECK_THAT(r.what, Contains("invalid plan") && Contains(c.says));
            }
        }
}

TEST_CASE("ranks that disagree on the plan or the layers get an error instead of a hang", "[synchronizer]")
{
    const std::vector<std::size_t> sizes{4, 4, 4, 4};
    const plan_t wfbp{{3}, {2}, {1}, {0}}, pairs{{2, 3}, {0, 1}}, broken{{3}, {1}, {0}};

    const auto one_invalid = outcomes(2, [&](local_communicator& comm) {
        gradsync::synchronizer<float, local_communicator> sync(comm, sizes, comm.rank() == 1 ? broken : wfbp);
    });
    INFO("one rank's plan is invalid: " << one_invalid[0].what << " / " << one_invalid[1].what);
    CHECK(kind_name(one_invalid[0].k) == std::string(kind_name(kind::mismatch)));
    CHECK_THAT(one_invalid[0].what, Contains("plan"));
    CHECK(kind_name(one_invalid[1].k) == std::string(kind_name(kind::usage)));
    CHECK_THAT(one_invalid[1].what, Contains("layer 2 is in no group"));

    const auto two_plans = outcomes(3, [&](local_communicator& comm) {
        gradsync::synchronizer<float, local_communicator> sync(comm, sizes, comm.rank() == 2 ? pairs : wfbp);
    });
    for (const outcome& o : two_plans) {
        INFO("different valid plans: " << o.what);
        CHECK(kind_name(o.k) == std::string(kind_name(kind::mismatch)));
        CHECK_THAT(o.what, Contains("ranks disagree on the plan: group 0 is layer 3 on rank 0 and layers 2..3 on rank 2"));
        CHECK_THAT(o.what, !Contains("fingerprint"));
    }

    const std::vector<std::size_t> other_sizes{4, 4, 5, 3}; // as many elements
    const auto sizes_differ = outcomes(2, [&](local_communicator& comm) {
        gradsync::synchronizer<float, local_communicator> sync(comm, comm.rank() == 1 ? other_sizes : sizes, wfbp);
    });
    for (const outcome& o : sizes_differ) {
        INFO("different layer sizes: " << o.what);
        CHECK(kind_name(o.k) == std::string(kind_name(kind::mismatch)));
        CHECK_THAT(o.what, Contains("layer 2 has 4 elements on rank 0 and 5 on rank 1"));
    }

    const std::vector<std::size_t> three{4, 4, 8}; // as many elements, one layer fewer
    const plan_t three_wfbp{{2}, {1}, {0}};
    const auto layer_counts = outcomes(2, [&](local_communicator& comm) {
        if (comm.rank() == 0)
            gradsync::synchronizer<float, local_communicator> sync(comm, sizes, wfbp);
        else
            gradsync::synchronizer<float, local_communicator> sync(comm, three, three_wfbp);
    });
    for (const outcome& o : layer_counts) {
        INFO("different numbers of layers: " << o.what);
        CHECK(kind_name(o.k) == std::string(kind_name(kind::mismatch)));
        CHECK_THAT(o.what, Contains("number of layers"));
    }

    const auto types = outcomes(2, [&](local_communicator& comm) {
        if (comm.rank() == 0)
            gradsync::synchronizer<float, local_communicator> sync(comm, sizes, wfbp);
        else
            gradsync::synchronizer<double, local_communicator> sync(comm, sizes, wfbp);
    });
    for (const outcome& o : types) {
        INFO("different element types: " << o.what);
        CHECK(kind_name(o.k) == std::string(kind_name(kind::mismatch)));
        CHECK_THAT(o.what, Contains("element type"));
    }
}

// Each misuse is refused and changes nothing: the iteration that follows is correct.
TEST_CASE("ready() and wait() misuse is refused and leaves the synchronizer usable", "[synchronizer]")
{
    const std::vector<std::size_t> sizes{3, 0, 5};
    const plan_t plan{{1, 2}, {0}};
    const std::size_t total = offsets_of(sizes).back();
    constexpr int n = 2;
    struct misuse {
        std::string name, says;
    };
    const std::vector<misuse> expected{
        {"ready(3)", "ready(3): there are only 3 layers"},
        {"ready(1) first", "ready(1): layers must be ready in backward order, expected layer 2"},
        {"ready(2) of 4 elements", "ready(2): the gradient holds 4 elements, layer 2 has 5"},
        {"wait() before every layer", "wait(): layer 2 is not ready yet"},
        {"ready(2) twice", "expected layer 1 (layer 2 is already ready)"},
        {"last_times() mid-iteration", "last_times(): an iteration is in progress"},
        {"wait() with layer 0 missing", "wait(): layer 0 is not ready yet"},
        {"ready(0) after the last layer", "every layer of this iteration is already ready; call wait() first"},
    };
    std::vector<std::vector<outcome>> got(std::size_t(n), std::vector<outcome>(expected.size()));
    problems found;
    local_group group(n);
    const std::string escaped = run_ranks(group, [&](local_communicator& comm) {
        auto& mine = got[std::size_t(comm.rank())];
        gradients<float> g(storage::per_layer, sizes);
        gradsync::synchronizer<float, local_communicator> sync(comm, sizes, plan);
        std::vector<float> four(4);
        auto attempt = [&](std::size_t k, auto&& f) { gradsync_test::record(mine[k], false, f); };
        for (int it = 0; it < 2; ++it) {
            const std::uint64_t seed = 5 + std::uint64_t(it);
            g.load(ref::int_data<float>(seed, comm.rank(), total));
            attempt(0, [&] { sync.ready(3, g.layer[2]); });
            attempt(1, [&] { sync.ready(1, g.layer[1]); });
            attempt(2, [&] { sync.ready(2, four); });
            attempt(3, [&] { sync.wait(); });
            sync.ready(2, g.layer[2]);
            attempt(4, [&] { sync.ready(2, g.layer[2]); });
            attempt(5, [&] { (void)sync.last_times(); });
            sync.ready(1, g.layer[1]);
            attempt(6, [&] { sync.wait(); });
            sync.ready(0, g.layer[0]);
            attempt(7, [&] { sync.ready(0, g.layer[0]); });
            sync.wait();
            std::vector<std::vector<float>> inputs;
            for (int q = 0; q < n; ++q)
                inputs.push_back(ref::int_data<float>(seed, q, total));
            if (const std::string d = ref::first_difference(g.forward(), ref::exact(inputs, false)); !d.empty())
                found.add("rank " + std::to_string(comm.rank()) + ", iteration " + std::to_string(it) + ": " + d);
        }
    });
    REQUIRE(escaped == "");
    CHECK(found.list.empty());
    for (std::size_t r = 0; r < std::size_t(n); ++r)
        for (std::size_t k = 0; k < expected.size(); ++k) {
            INFO("rank " << r << ", " << expected[k].name << ": " << kind_name(got[r][k].k) << ": " << got[r][k].what);
            CHECK(kind_name(got[r][k].k) == std::string(kind_name(kind::usage)));
            CHECK_THAT(got[r][k].what, Contains(expected[k].says) && Contains("rank " + std::to_string(r) + " of 2"));
        }
}

TEST_CASE("no layers: wait() returns at once and ready() is refused", "[synchronizer]")
{
    std::vector<outcome> waited(2), readied(2);
    std::vector<std::size_t> groups(2, 1);
    local_group group(2);
    const std::string escaped = run_ranks(group, [&](local_communicator& comm) {
        const std::size_t r = std::size_t(comm.rank());
        gradsync::synchronizer<float, local_communicator> sync(comm, std::span<const std::size_t>(), {});
        gradsync_test::record(waited[r], false, [&] { sync.wait(); });
        gradsync_test::record(readied[r], false, [&] { sync.ready(0, {}); });
        groups[r] = sync.last_times().size();
    });
    REQUIRE(escaped == "");
    for (std::size_t r = 0; r < 2; ++r) {
        CHECK(kind_name(waited[r].k) == std::string(kind_name(kind::ok)));
        CHECK(kind_name(readied[r].k) == std::string(kind_name(kind::usage)));
        CHECK_THAT(readied[r].what, Contains("there are only 0 layers"));
        CHECK(groups[r] == 0);
    }
}

TEST_CASE("a transport without thread support is refused at construction", "[synchronizer]")
{
    const std::vector<std::size_t> sizes{4, 4};
    const plan_t plan{{1}, {0}};
    std::vector<outcome> refused(2), accepted(2);
    std::vector<int> calls(2);
    local_group group(2);
    const std::string escaped = run_ranks(group, [&](local_communicator& comm) {
        const std::size_t r = std::size_t(comm.rank());
        instrumented wire(comm);
        wire.refuse_threads = true;
        gradsync_test::record(refused[r], false, [&] {
            gradsync::synchronizer<float, instrumented> sync(wire, sizes, plan);
        });
        wire.refuse_threads = false;
        gradsync::delay_communicator<instrumented> slow(wire, {});
        gradsync_test::record(accepted[r], false, [&] {
            gradsync::synchronizer<float, gradsync::delay_communicator<instrumented>> sync(slow, sizes, plan);
        });
        calls[r] = wire.hook_calls;
    });
    REQUIRE(escaped == "");
    for (std::size_t r = 0; r < 2; ++r) {
        INFO("rank " << r << ": " << refused[r].what << " / " << accepted[r].what);
        CHECK(kind_name(refused[r].k) == std::string(kind_name(kind::usage)));
        CHECK_THAT(refused[r].what, Contains("gradsync::synchronizer") && Contains("second thread"));
        CHECK(kind_name(accepted[r].k) == std::string(kind_name(kind::ok)));
        CHECK(calls[r] == 2); // asked once by each synchronizer, through the delay_communicator too
    }
}

// Destroying without wait() finishes the complete groups (the other ranks expect them),
// skips the rest, joins the thread and leaves the communicator in step.
TEST_CASE("destruction without wait() joins cleanly", "[synchronizer]")
{
    const std::vector<std::size_t> sizes{10, 20, 30, 40};
    const plan_t plan{{3}, {2}, {1}, {0}};
    const std::vector<std::size_t> offset = offsets_of(sizes);
    struct scenario {
        const char* name;
        std::size_t readied; // layers made ready, from L-1 down
    };
    for (const scenario& sc : {scenario{"nothing ready", 0}, scenario{"two of four groups ready", 2},
                               scenario{"every group ready", 4}})
        for (int n : {1, 2, 3}) {
            INFO(sc.name << ", " << n << " ranks");
            problems found;
            local_group group(n);
            const std::string escaped = run_ranks(group, [&](local_communicator& comm) {
                const std::uint64_t seed = 31;
                const std::vector<float> input = ref::int_data<float>(seed, comm.rank(), offset.back());
                std::vector<std::vector<float>> inputs;
                for (int q = 0; q < n; ++q)
                    inputs.push_back(ref::int_data<float>(seed, q, offset.back()));
                const std::vector<float> sum = ref::exact(inputs, false);
                gradients<float> g(storage::flat, sizes);
                g.load(input);
                {
                    gradsync::synchronizer<float, local_communicator> sync(comm, sizes, plan);
                    for (std::size_t k = 0; k < sc.readied; ++k)
                        sync.ready(sizes.size() - 1 - k, g.layer[sizes.size() - 1 - k]);
                }
                const std::vector<float> got = g.forward();
                const std::size_t reduced_from = offset[sizes.size() - sc.readied];
                for (std::size_t i = 0; i < got.size(); ++i)
                    if (got[i] != (i >= reduced_from ? sum[i] : input[i])) {
                        found.add("rank " + std::to_string(comm.rank()) + ": element " + std::to_string(i) + " is " +
                                  std::to_string(got[i]));
                        break;
                    }
                std::vector<float> again = input; // the communicator is still in step
                gradsync::allreduce(comm, std::span<float>(again));
                if (const std::string d = ref::first_difference(again, sum); !d.empty())
                    found.add("rank " + std::to_string(comm.rank()) + ", allreduce afterwards: " + d);
            });
            CHECK(escaped == "");
            INFO(show(found.list));
            CHECK(found.list.empty());
        }
}

} // namespace
