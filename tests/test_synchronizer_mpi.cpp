// The runtime over MPI processes (run under mpiexec with N = 2 and 3).
//
// [sync]: a synchronizer over mpi_communicator, whose communication thread makes MPI calls
//   while the main thread computes, gives bit for bit what a plain allreduce per group
//   gives, on every rank, for {sum, average, adasum} x {ring, recursive_halving, automatic,
//   hierarchical} x {fp32, fp64}, a merged plan and a per-layer plan, a flat buffer and one
//   vector per layer, three iterations each.
// [delay]: delay_communicator over MPI: the arrival time crosses processes in the header, so
//   a ping-pong between ranks 0 and 1 takes at least two message times, with data intact.
// [stuck]: a synchronizer declared inside a try, over an mpi_communicator with no deadline,
//   whose peer never calls ready(): wait() throws its deadline_error, and the destructor,
//   run as the error leaves the scope, releases the communication thread stuck in MPI
//   instead of joining it for ever (a hang is the CTest timeout).
// [thread_level]: run with GRADSYNC_TEST_MPI_THREAD=funneled, so MPI is initialised with
//   MPI_THREAD_FUNNELED: the synchronizer refuses to start, saying what to pass to
//   MPI_Init_thread, directly and through a delay_communicator.
//
// Every CHECK is on a value agreed by all ranks (reduced with MPI), so rank 0's report, which
// is the one shown, speaks for every rank.
#include <catch2/catch.hpp>

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <gradsync/comm/mpi/mpi.hpp>
#include <gradsync/gradsync.hpp>

#include "catch_session.hpp"
#include "reference.hpp"

namespace {

using gradsync::mpi_communicator;
using plan_t = std::vector<std::vector<std::size_t>>;
using Catch::Matchers::Contains;

int thread_level_provided = MPI_THREAD_SINGLE;

// The largest of every rank's value.
long long most(long long mine)
{
    long long all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    return all;
}

// True when every rank holds the same 64-bit value.
bool same_everywhere(std::uint64_t mine)
{
    unsigned long long v = mine, lo = 0, hi = 0;
    MPI_Allreduce(&v, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&v, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    return lo == hi;
}

const std::vector<std::size_t> sizes{9, 0, 300, 41, 1000, 2};
const std::vector<plan_t> plans{{{4, 5}, {1, 2, 3}, {0}}, {{5}, {4}, {3}, {2}, {1}, {0}}};

// Runs the synchronizer with one storage for three iterations; returns the number of
// iterations whose result differs from a plain allreduce per group, and folds the results
// into `hash`.
template <class T, class Policy, class Algo>
long long mismatches(mpi_communicator& comm, const plan_t& plan, bool per_layer, Algo algo, std::uint64_t& hash)
{
    std::vector<std::size_t> offset{0};
    for (std::size_t s : sizes)
        offset.push_back(offset.back() + s);
    std::vector<T> flat(offset.back());
    std::vector<std::vector<T>> own;
    std::vector<std::span<T>> layer;
    own.reserve(sizes.size());
    for (std::size_t l = 0; l < sizes.size(); ++l) {
        if (per_layer)
            layer.emplace_back(own.emplace_back(sizes[l]));
        else
            layer.push_back(std::span<T>(flat).subspan(offset[l], sizes[l]));
    }
    gradsync::synchronizer<T, mpi_communicator, Policy, Algo> sync(comm, sizes, plan, Policy{}, algo);
    long long bad = 0;
    for (int it = 0; it < 3; ++it) {
        const std::vector<T> input = ref::random_data<T>(std::uint64_t(it) + 17, comm.rank(), offset.back());
        for (std::size_t l = 0; l < sizes.size(); ++l)
            std::copy_n(input.begin() + std::ptrdiff_t(offset[l]), sizes[l], layer[l].begin());
        for (std::size_t l = sizes.size(); l-- > 0;)
            sync.ready(l, layer[l]);
        sync.wait();
        std::vector<T> want = input;
        for (const auto& group : plan) {
            const std::size_t lo = group.front(), end = offset[group.back() + 1];
            gradsync::allreduce(comm, std::span<T>(want).subspan(offset[lo], end - offset[lo]), Policy{}, algo,
                                std::span<const std::size_t>(sizes).subspan(lo, group.size()));
        }
        std::vector<T> got;
        for (std::span<T> s : layer)
            got.insert(got.end(), s.begin(), s.end());
        bad += ref::first_difference(got, want).empty() ? 0 : 1;
        hash ^= ref::fnv1a(got.data(), got.size() * sizeof(T)) + std::uint64_t(it);
    }
    return bad;
}

template <class T, class Policy, class Algo>
void check_combination(Algo algo, const char* name)
{
    mpi_communicator comm(MPI_COMM_WORLD);
    for (std::size_t p = 0; p < plans.size(); ++p)
        for (bool per_layer : {false, true}) {
            std::uint64_t hash = 0;
            const long long bad = most(mismatches<T, Policy, Algo>(comm, plans[p], per_layer, algo, hash));
            INFO(ref::type_name<T>() << ", " << Policy::name << ", " << name << ", plan " << p << ", "
                                     << (per_layer ? "one vector per layer" : "flat buffer"));
            CHECK(bad == 0);
            CHECK(same_everywhere(hash));
        }
}

template <class T, class Policy>
void check_algorithms()
{
    check_combination<T, Policy>(gradsync::ring{}, "ring");
    check_combination<T, Policy>(gradsync::recursive_halving{}, "recursive_halving");
    check_combination<T, Policy>(gradsync::automatic{}, "automatic");
    check_combination<T, Policy>(gradsync::hierarchical{}, "hierarchical");
}

TEST_CASE("synchronizer over MPI equals a plain allreduce per group", "[sync]")
{
    REQUIRE(thread_level_provided >= MPI_THREAD_SERIALIZED);
    check_algorithms<float, gradsync::sum>();
    check_algorithms<float, gradsync::average>();
    check_algorithms<float, gradsync::adasum>();
    check_algorithms<double, gradsync::sum>();
    check_algorithms<double, gradsync::adasum>();
}

TEST_CASE("delay_communicator carries arrival times between processes", "[delay]")
{
    mpi_communicator comm(MPI_COMM_WORLD);
    const gradsync::emulated_link link{2e-3, 10e-9};
    const std::size_t bytes = 100'000;
    gradsync::delay_communicator<mpi_communicator> d(comm, link);
    auto pattern = [&](int from) {
        std::vector<std::byte> v(bytes);
        for (std::size_t i = 0; i < bytes; ++i)
            v[i] = std::byte(ref::key(7, from, i) & 0xff);
        return v;
    };
    const double want = 2 * (link.alpha + link.beta * double(bytes));
    long long short_trips = 0, corrupt = 0;
    std::vector<std::byte> out = pattern(comm.rank()), in(bytes);
    for (int k = 0; k < 3; ++k) {
        if (comm.rank() == 0) {
            const auto start = std::chrono::steady_clock::now();
            auto s = d.isend(out, 1, 3);
            d.wait(s);
            auto r = d.irecv(in, 1, 3);
            d.wait(r);
            const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            short_trips += took < want ? 1 : 0;
            corrupt += in == pattern(1) ? 0 : 1;
        } else if (comm.rank() == 1) {
            auto r = d.irecv(in, 0, 3);
            d.wait(r);
            corrupt += in == pattern(0) ? 0 : 1;
            auto s = d.isend(out, 0, 3);
            d.wait(s);
        }
    }
    CHECK(most(short_trips) == 0);
    CHECK(most(corrupt) == 0);
}

TEST_CASE("a peer that never readies a layer: wait()'s deadline_error leaves the scope, the destructor returns",
          "[.][stuck]")
{
    using namespace std::chrono_literals;
    REQUIRE(thread_level_provided >= MPI_THREAD_SERIALIZED);
    MPI_Comm copy = MPI_COMM_NULL; // the stuck messages stay on it
    MPI_Comm_dup(MPI_COMM_WORLD, &copy);
    {
        mpi_communicator comm(copy);
        const std::vector<std::size_t> layers{50, 50};
        const plan_t plan{{1}, {0}};
        std::vector<float> grad(100, 1.0f);
        const std::span<float> g(grad);
        std::string what;
        bool deadline = false, ok = false;
        const auto start = std::chrono::steady_clock::now();
        if (comm.rank() == comm.size() - 1) { // builds its synchronizer and leaves without a ready()
            gradsync::synchronizer<float, mpi_communicator> sync(comm, layers, plan);
            deadline = true;
        } else {
            try {
                gradsync::synchronizer<float, mpi_communicator> sync(comm, layers, plan, {}, {},
                                                                     gradsync::synchronizer_options{.deadline = 2s});
                sync.ready(1, g.subspan(50, 50));
                sync.ready(0, g.subspan(0, 50));
                sync.wait();
                ok = true;
            } catch (const gradsync::deadline_error& e) {
                what = e.what();
                deadline = what.find("did not finish its allreduce") != std::string::npos;
            } catch (const std::exception& e) {
                what = e.what();
            }
        }
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        INFO("rank " << comm.rank() << " after " << seconds << " s: " << what);
        CHECK(!ok);
        CHECK(deadline);
        CHECK((comm.rank() == comm.size() - 1 || seconds >= 2.0));
        CHECK(most(deadline ? 0 : 1) == 0);
    }
    MPI_Comm_free(&copy);
}

TEST_CASE("below MPI_THREAD_SERIALIZED the synchronizer refuses to start", "[.][thread_level]")
{
    REQUIRE(thread_level_provided < MPI_THREAD_SERIALIZED);
    mpi_communicator comm(MPI_COMM_WORLD);
    gradsync::delay_communicator<mpi_communicator> slow(comm, {});
    const plan_t plan{{5}, {4}, {3}, {2}, {1}, {0}};
    std::string direct, through_delay;
    try {
        gradsync::synchronizer<float, mpi_communicator> sync(comm, sizes, plan);
    } catch (const gradsync::usage_error& e) {
        direct = e.what();
    }
    try {
        gradsync::synchronizer<float, gradsync::delay_communicator<mpi_communicator>> sync(slow, sizes, plan);
    } catch (const gradsync::usage_error& e) {
        through_delay = e.what();
    }
    const long long refused = (direct.empty() ? 0 : 1) + (through_delay.empty() ? 0 : 1);
    INFO(direct << " / " << through_delay);
    CHECK(most(2 - refused) == 0); // both refused, on every rank
    CHECK_THAT(direct, Contains("MPI_THREAD_FUNNELED") && Contains("MPI_Init_thread") &&
                           Contains("gradsync::synchronizer"));
    CHECK(through_delay == direct);
}

} // namespace

int main(int argc, char** argv)
{
    const char* level = std::getenv("GRADSYNC_TEST_MPI_THREAD");
    const bool funneled = level && std::string(level) == "funneled";
    MPI_Init_thread(&argc, &argv, funneled ? MPI_THREAD_FUNNELED : MPI_THREAD_MULTIPLE, &thread_level_provided);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    // Rank 0's report covers every rank.
    const int failed = gradsync_test::run_catch(argc, argv, rank == 0 ? nullptr : "/dev/null");
    int worst = 0;
    MPI_Allreduce(&failed, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return worst == 0 ? 0 : 1;
}
