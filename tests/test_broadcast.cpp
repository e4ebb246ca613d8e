// Broadcasts over local_group (docs/semantics.md, "Broadcast"): every algorithm, element type
// (fp16, bf16, fp32, fp64, std::byte), N = 1..16, several roots, counts 0, 1, below N, not
// multiples of N and above a pipeline segment, over the plain local transport and over one
// with a small eager limit (so that messages are cut as MPI's and Gloo's are); every rank
// must end with the root's bits, in two calls of one broadcaster. Then the automatic choice,
// and misuse: a root out of range, a buffer of the wrong size and ranks that disagree, each
// refused by name. Rank code only records; CHECKs run on the main thread.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <gradsync/gradsync.hpp>

#include "broadcast_data.hpp"
#include "eager_communicator.hpp"
#include "outcome.hpp"
#include "sanitized.hpp"

namespace {

using gradsync::local_communicator;
using gradsync::local_group;
using gradsync_test::eager_communicator;
using gradsync_test::kind;
using gradsync_test::kind_name;
using gradsync_test::outcome;
using gradsync_test::record;
using Catch::Matchers::Contains;

std::vector<int> roots_of(int n)
{
    std::vector<int> r{0, n - 1, n / 2, std::min(1, n - 1)};
    std::sort(r.begin(), r.end());
    r.erase(std::unique(r.begin(), r.end()), r.end());
    return r;
}

// Above two 256 KiB pipeline segments, and not a multiple of any N here.
template <class T>
std::size_t large_count()
{
    return (std::size_t(600) << 10) / sizeof(T) + 7;
}

template <class T>
std::vector<std::size_t> counts_of(int n)
{
    const std::size_t k = std::size_t(n);
    std::vector<std::size_t> c{0, 1, k - 1 + (k == 1), k + 1, 7, 1000, 3 * k + 1, large_count<T>()};
    std::sort(c.begin(), c.end());
    c.erase(std::unique(c.begin(), c.end()), c.end());
    return c;
}

// Two calls of one broadcaster per (root, count) on this rank; the first difference, or "".
template <class T, class Algorithm, class Comm>
std::string broadcast_all(Comm& comm)
{
    const int n = comm.size();
    for (const int root : roots_of(n))
        for (const std::size_t count : counts_of<T>(n)) {
            gradsync::broadcaster<T, Comm, Algorithm> b(comm, count, root);
            for (int call = 1; call <= 2; ++call) {
                std::vector<T> data = comm.rank() == root ? broadcast_data::root_data<T>(count, root, call)
                                                          : broadcast_data::before<T>(count, comm.rank() + call);
                b(std::span<T>(data));
                if (const std::string d = broadcast_data::check_call(data, root, call); !d.empty())
                    return d;
            }
        }
    return "";
}

template <class T, class Algorithm>
void check_matrix()
{
    if (gradsync_test::thread_sanitized && !std::is_same_v<T, float>)
        return; // the threads do the same to each other whatever the type
    for (const int n : gradsync_test::group_sizes(16)) {
        for (const bool eager : {false, true}) {
            INFO(n << " ranks, " << (eager ? "eager limit 256 bytes" : "no eager limit"));
            std::vector<std::string> failed(static_cast<std::size_t>(n));
            local_group group(n);
            const std::string escaped = gradsync_test::run_ranks(group, [&](local_communicator& comm) {
                std::string& f = failed[std::size_t(comm.rank())];
                if (eager) {
                    eager_communicator e(comm);
                    f = broadcast_all<T, Algorithm>(e);
                } else {
                    f = broadcast_all<T, Algorithm>(comm);
                }
            });
            CHECK(escaped == "");
            for (int r = 0; r < n; ++r) {
                INFO("rank " << r);
                CHECK(failed[std::size_t(r)] == "");
            }
        }
    }
}

#define GRADSYNC_BROADCAST_TYPES gradsync::half, gradsync::bfloat16, float, double, std::byte

} // namespace

TEMPLATE_TEST_CASE("binomial_tree copies the root's bits to every rank", "[broadcast]", GRADSYNC_BROADCAST_TYPES)
{
    check_matrix<TestType, gradsync::binomial_tree>();
}

TEMPLATE_TEST_CASE("scatter_allgather copies the root's bits to every rank", "[broadcast]", GRADSYNC_BROADCAST_TYPES)
{
    check_matrix<TestType, gradsync::scatter_allgather>();
}

TEMPLATE_TEST_CASE("automatic_broadcast copies the root's bits to every rank", "[broadcast]",
                   GRADSYNC_BROADCAST_TYPES)
{
    check_matrix<TestType, gradsync::automatic_broadcast>();
}

TEST_CASE("the broadcast rows name their plans, which model broadcast_plan in every memory", "[broadcast]")
{
    using comm = local_communicator;
    using gradsync::broadcast_plan_of;
    STATIC_REQUIRE(std::is_same_v<broadcast_plan_of<float, comm, gradsync::binomial_tree>,
                                  gradsync::binomial_tree_plan<float, comm, gradsync::host_memory>>);
    STATIC_REQUIRE(std::is_same_v<broadcast_plan_of<std::byte, comm, gradsync::scatter_allgather>,
                                  gradsync::scatter_allgather_plan<std::byte, comm, gradsync::host_memory>>);
    STATIC_REQUIRE(std::is_same_v<broadcast_plan_of<gradsync::half, comm, gradsync::automatic_broadcast>,
                                  gradsync::automatic_broadcast_plan<gradsync::half, comm, gradsync::host_memory>>);
    STATIC_REQUIRE(gradsync::broadcast_plan<broadcast_plan_of<double, comm, gradsync::binomial_tree>>);
    STATIC_REQUIRE(gradsync::broadcast_plan<broadcast_plan_of<std::byte, comm, gradsync::scatter_allgather>>);
    STATIC_REQUIRE(gradsync::broadcast_plan<broadcast_plan_of<gradsync::bfloat16, comm, gradsync::automatic_broadcast>>);
    STATIC_REQUIRE(gradsync::broadcast_algorithm<gradsync::automatic_broadcast>);
    STATIC_REQUIRE(!gradsync::broadcast_algorithm<gradsync::ring>); // an allreduce algorithm has no broadcast row
    STATIC_REQUIRE(!gradsync::allreduce_algorithm<gradsync::binomial_tree>);
    STATIC_REQUIRE(!gradsync::element<std::byte>); // no arithmetic: a reducer refuses it
    STATIC_REQUIRE(gradsync::broadcast_element<std::byte>);
}

TEST_CASE("automatic_broadcast takes the tree for small vectors, two ranks and count < N", "[broadcast]")
{
    const gradsync::automatic_broadcast a;
    constexpr std::uint32_t tree = gradsync::binomial_tree::code, scatter = gradsync::scatter_allgather::code;
    CHECK(a.choose(a.scatter_bytes - 1, a.scatter_bytes - 1, 8) == tree);
    CHECK(a.choose(a.scatter_bytes, a.scatter_bytes, 8) == scatter);
    CHECK(a.choose(a.scatter_bytes, a.scatter_bytes, 3) == scatter);
    CHECK(a.choose(std::size_t(1) << 30, std::size_t(1) << 30, 2) == tree);
    CHECK(a.choose(std::size_t(1) << 30, 7, 8) == tree); // 7 huge elements: most blocks would be empty
    local_group group(4);
    std::vector<std::uint32_t> chosen(4);
    std::vector<int> planned(4); // not vector<bool>: ranks write their own element concurrently
    CHECK(gradsync_test::run_ranks(group, [&](local_communicator& comm) {
              gradsync::broadcaster<std::byte, local_communicator> small(comm, 1000),
                  large(comm, std::size_t(1) << 20, 3);
              chosen[std::size_t(comm.rank())] = small.plan().chosen() * 100 + large.plan().chosen();
              planned[std::size_t(comm.rank())] = small.count() == 1000 && large.root() == 3;
          }) == "");
    for (int r = 0; r < 4; ++r) {
        CHECK(chosen[std::size_t(r)] == tree * 100 + scatter);
        CHECK(planned[std::size_t(r)] == 1);
    }
}

TEST_CASE("broadcast(): one call, the root's data everywhere", "[broadcast]")
{
    for (const int n : {1, 3, 6}) {
        std::vector<std::string> failed(static_cast<std::size_t>(n));
        local_group group(n);
        gradsync_test::run_ranks(group, [&](local_communicator& comm) {
            const int root = n - 1;
            std::vector<double> data = comm.rank() == root ? broadcast_data::root_data<double>(5000, root, 1)
                                                           : broadcast_data::before<double>(5000, comm.rank());
            gradsync::broadcast(comm, std::span<double>(data), root);
            failed[std::size_t(comm.rank())] = broadcast_data::differs(data, broadcast_data::root_data<double>(5000, root, 1));
        });
        for (const std::string& f : failed)
            CHECK(f == "");
    }
}

namespace {

constexpr int ranks = 5;
constexpr int odd_rank = 3;

// body(comm, outcome&) on every rank of a group of `ranks`; a rank's rethrown error releases
// the others and does not escape.
template <class Body>
std::vector<outcome> run_group(Body body)
{
    std::vector<outcome> res(ranks);
    local_group group(ranks);
    try {
        group.run([&](local_communicator& comm) { body(comm, res[std::size_t(comm.rank())]); });
    } catch (const gradsync::error&) {
    }
    return res;
}

// One broadcast of 100 elements of T from root with Algorithm; records its outcome and whether
// the data was left as it was.
template <class T, class Algorithm = gradsync::automatic_broadcast>
void attempt(local_communicator& comm, outcome& o, std::size_t count, int root)
{
    std::vector<T> data = broadcast_data::before<T>(count, comm.rank());
    const std::vector<T> before = data;
    record(o, false, [&] { gradsync::broadcast(comm, std::span<T>(data), root, Algorithm{}); });
    o.untouched = broadcast_data::differs(data, before).empty();
}

void expect_everywhere(const std::vector<outcome>& res, kind k, const std::vector<std::string>& words)
{
    for (std::size_t r = 0; r < res.size(); ++r) {
        const outcome& o = res[r];
        INFO("rank " << r << ": " << kind_name(o.k) << ": " << o.what);
        CHECK(kind_name(o.k) == std::string(kind_name(k)));
        CHECK(o.untouched);
        CHECK_THAT(o.what, Contains("gradsync::broadcaster (rank " + std::to_string(r) + " of 5)"));
        for (const std::string& w : words)
            CHECK_THAT(o.what, Contains(w));
    }
}

} // namespace

TEST_CASE("a root that is not a rank is refused on every rank, by name", "[broadcast][misuse]")
{
    for (const int bad : {ranks, -1}) {
        const auto res = run_group([&](local_communicator& comm, outcome& o) { attempt<float>(comm, o, 100, bad); });
        expect_everywhere(res, kind::usage, {"rank 0's root " + std::to_string(bad) + " is out of range: ranks are 0..4"});
    }
}

TEST_CASE("ranks that disagree on the root get a mismatch_error on every rank", "[broadcast][misuse]")
{
    const auto res = run_group([](local_communicator& comm, outcome& o) {
        attempt<float>(comm, o, 100, comm.rank() == odd_rank ? 2 : 1);
    });
    expect_everywhere(res, kind::mismatch, {"ranks disagree on the root: rank 0 has 1, rank 3 has 2"});
}

TEST_CASE("ranks that disagree on the count get a mismatch_error on every rank", "[broadcast][misuse]")
{
    const auto res = run_group([](local_communicator& comm, outcome& o) {
        attempt<std::byte>(comm, o, comm.rank() == odd_rank ? 101 : 100, 0);
    });
    expect_everywhere(res, kind::mismatch, {"ranks disagree on the element count: rank 0 has 100, rank 3 has 101"});
}

TEST_CASE("ranks that disagree on the algorithm get a mismatch_error on every rank", "[broadcast][misuse]")
{
    const auto res = run_group([](local_communicator& comm, outcome& o) {
        if (comm.rank() == odd_rank)
            attempt<float, gradsync::scatter_allgather>(comm, o, 100, 0);
        else
            attempt<float, gradsync::binomial_tree>(comm, o, 100, 0);
    });
    expect_everywhere(res, kind::mismatch,
                      {"ranks disagree on the algorithm: rank 0 has binomial_tree, rank 3 has scatter_allgather"});
}

TEST_CASE("ranks that disagree on the element type get a mismatch_error on every rank", "[broadcast][misuse]")
{
    const auto res = run_group([](local_communicator& comm, outcome& o) {
        if (comm.rank() == odd_rank)
            attempt<std::byte>(comm, o, 400, 0);
        else
            attempt<float>(comm, o, 100, 0);
    });
    expect_everywhere(res, kind::mismatch, {"ranks disagree on the element type: rank 0 has fp32, rank 3 has byte"});
}

TEST_CASE("a broadcaster beside a reducer: a mismatch_error on every rank", "[broadcast][misuse]")
{
    const auto res = run_group([](local_communicator& comm, outcome& o) {
        if (comm.rank() == odd_rank) {
            std::vector<float> data(100);
            record(o, false, [&] { gradsync::allreduce(comm, std::span<float>(data)); });
            o.untouched = true;
        } else {
            attempt<float>(comm, o, 100, 0);
        }
    });
    for (const outcome& o : res) {
        INFO(kind_name(o.k) << ": " << o.what);
        CHECK(o.k == kind::mismatch);
        CHECK_THAT(o.what, Contains("ranks disagree on the policy: rank 0 has none, rank 3 has sum"));
    }
}

TEST_CASE("a buffer of the wrong size is refused by name, before any message", "[broadcast][misuse]")
{
    const auto res = run_group([](local_communicator& comm, outcome& o) {
        gradsync::broadcaster<gradsync::bfloat16, local_communicator> b(comm, 100, 2);
        std::vector<gradsync::bfloat16> data(99);
        record(o, false, [&] { b(std::span<gradsync::bfloat16>(data)); });
        o.untouched = true;
    });
    expect_everywhere(res, kind::usage, {"buffer holds 99 elements, the broadcaster was planned for 100"});
}

TEST_CASE("broadcasters called in different orders: a mismatch_error naming both, never wrong data",
          "[broadcast][misuse]")
{
    std::vector<std::uint64_t> identity(4);
    std::vector<outcome> res(2);
    local_group group(2);
    try {
        group.run([&](local_communicator& comm) {
            gradsync::broadcaster<float, local_communicator> a(comm, 64), b(comm, 64);
            identity[std::size_t(comm.rank()) * 2] = a.identity();
            identity[std::size_t(comm.rank()) * 2 + 1] = b.identity();
            std::vector<float> x(64, 1.0f), y(64, 2.0f);
            outcome& o = res[std::size_t(comm.rank())];
            record(o, true, [&] {
                if (comm.rank() == 1) {
                    b(std::span<float>(y));
                    a(std::span<float>(x));
                } else {
                    a(std::span<float>(x));
                    b(std::span<float>(y));
                }
            });
        });
    } catch (const gradsync::error&) {
    }
    CHECK(identity[2] == identity[0]);
    CHECK(identity[3] == identity[1]);
    int named = 0;
    for (const outcome& o : res) {
        INFO(kind_name(o.k) << ": " << o.what);
        CHECK(o.k != kind::ok);
        if (o.k == kind::mismatch) {
            ++named;
            CHECK_THAT(o.what, Contains("same order") && Contains("broadcaster #" + std::to_string(identity[0])) &&
                                   Contains("broadcaster #" + std::to_string(identity[1])));
        }
    }
    CHECK(named >= 1);
}
