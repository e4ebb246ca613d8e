// The data-movement conformance suite (docs/semantics.md, "Allgather, gather, scatter and
// all-to-all"), once for every transport: a driver declares `conformance::harness`
// (harness.hpp) and includes this file, which registers the TEST_CASEs (Catch tag
// [movement]). N = 1..5 over local_group, the launcher's N elsewhere; blocks of 0, 1, 7,
// 4096 and 2^20 bytes (2^16 under ThreadSanitizer: see block_sizes); every root; two calls
// of one collective, with other data in the second. Every block is checked against its
// reference, bits of (call, source rank, destination rank) alone (broadcast_data::bits), so
// a block that went to the wrong place, or nowhere, shows, and data a rank only sends from
// is checked unchanged. Then misuse, before any data moves: ranks that disagree on the block
// size, the root or the collective get a mismatch_error on every rank naming the field and
// the odd rank, and a root out of range is a usage_error on every rank.
//
// Rank code records ("" or what went wrong, or the outcome) per rank; CHECKs run after H::run.
#pragma once

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include <gradsync/gradsync.hpp>

#include "../broadcast_data.hpp"
#include "../outcome.hpp"
#include "../sanitized.hpp"
#include "harness.hpp"
#include "misuse_outcomes.hpp"

namespace conformance::movement_suite {

// The block sizes with the largest at 64 KiB instead of 1 MiB: cut by an eager limit of 256
// bytes it is still 256 pieces in flight between two threads, the same paths as 4 096 pieces,
// at a sixteenth of the time. Under ThreadSanitizer every movement test takes them; under the
// sanitizers, a test whose transport cuts every message so (test_movement.cpp).
inline const std::vector<std::size_t> short_block_sizes{0, 1, 7, 4096, std::size_t(1) << 16};
inline const std::vector<std::size_t> block_sizes =
    gradsync_test::thread_sanitized ? short_block_sizes : std::vector<std::size_t>{0, 1, 7, 4096, std::size_t(1) << 20};

// The block of b bytes that rank `source` sends rank `dest` in call `call` (dest -1: to every
// rank, an allgather's).
inline std::vector<std::byte> sent(int call, int source, int dest, std::size_t b)
{
    const auto seed = (std::uint64_t(call) << 40) | (std::uint64_t(source + 1) << 20) | std::uint64_t(dest + 2);
    return broadcast_data::bits<std::byte>(b, seed);
}

// What rank r's block j holds before a call where a block is to arrive: bits no block sent has.
inline std::vector<std::byte> stale(int r, int j, std::size_t b)
{
    return broadcast_data::before<std::byte>(b, r * 64 + j);
}

// Blocks block(0) .. block(n-1), one after another.
template <class Block>
std::vector<std::byte> blocks(int n, Block&& block)
{
    std::vector<std::byte> all;
    for (int j = 0; j < n; ++j) {
        const std::vector<std::byte> b = block(j);
        all.insert(all.end(), b.begin(), b.end());
    }
    return all;
}

// "" when got holds want's bits, else which block of b bytes differs first and where.
inline std::string wrong_block(const std::vector<std::byte>& got, const std::vector<std::byte>& want, std::size_t b)
{
    if (got.size() != want.size())
        return std::to_string(got.size()) + " bytes, want " + std::to_string(want.size());
    for (std::size_t i = 0; i < got.size(); ++i)
        if (got[i] != want[i])
            return "block " + std::to_string(i / b) + " of " + std::to_string(got.size() / b) + " (" +
                std::to_string(b) + " bytes) differs at byte " + std::to_string(i % b);
    return "";
}

// "" or the first call that went wrong on this rank: for every block size of `sizes`, two
// calls of one collective built by make(b); input(call, b) is this rank's data before a call, expected(call,
// b) after it. Every call is made whatever an earlier one gave, so that the ranks stay in step.
template <class Make, class Input, class Expected>
std::string two_calls(const std::vector<std::size_t>& sizes, const char* what, Make&& make, Input&& input,
                      Expected&& expected)
{
    std::string failed;
    for (const std::size_t b : sizes) {
        auto collective = make(b);
        for (int call = 1; call <= 2; ++call) {
            std::vector<std::byte> data = input(call, b);
            collective(std::span<std::byte>(data));
            if (const std::string d = wrong_block(data, expected(call, b), b); !d.empty() && failed.empty())
                failed = std::string(what) + ", blocks of " + std::to_string(b) + " bytes, call " +
                    std::to_string(call) + ": " + d + "; ";
        }
    }
    return failed;
}

template <class Algorithm, class Comm>
std::string allgathers(Comm& comm, const std::vector<std::size_t>& sizes)
{
    const int n = comm.size(), r = comm.rank();
    return two_calls(
        sizes, Algorithm::name, [&](std::size_t b) { return gradsync::allgatherer<Comm, Algorithm>(comm, b); },
        [&](int call, std::size_t b) {
            return blocks(n, [&](int j) { return j == r ? sent(call, r, -1, b) : stale(r, j, b); });
        },
        [&](int call, std::size_t b) { return blocks(n, [&](int j) { return sent(call, j, -1, b); }); });
}

template <class Comm>
std::string gathers(Comm& comm, const std::vector<std::size_t>& sizes = block_sizes)
{
    const int n = comm.size(), r = comm.rank();
    std::string failed;
    for (int root = 0; root < n; ++root) {
        const auto mine = [&](int call, std::size_t b) {
            if (r != root)
                return sent(call, r, root, b);
            return blocks(n, [&](int j) { return j == r ? sent(call, r, root, b) : stale(r, j, b); });
        };
        const auto gathered = [&](int call, std::size_t b) {
            if (r != root)
                return sent(call, r, root, b); // only read
            return blocks(n, [&](int j) { return sent(call, j, root, b); });
        };
        failed += two_calls(
            sizes, ("gather to rank " + std::to_string(root)).c_str(),
            [&](std::size_t b) { return gradsync::gatherer<Comm>(comm, b, root); }, mine, gathered);
    }
    return failed;
}

template <class Comm>
std::string scatters(Comm& comm, const std::vector<std::size_t>& sizes = block_sizes)
{
    const int n = comm.size(), r = comm.rank();
    std::string failed;
    for (int root = 0; root < n; ++root) {
        const auto mine = [&](int call, std::size_t b) {
            if (r != root)
                return stale(r, r, b);
            return blocks(n, [&](int j) { return sent(call, root, j, b); });
        };
        const auto scattered = [&](int call, std::size_t b) {
            if (r != root)
                return sent(call, root, r, b);
            return blocks(n, [&](int j) { return sent(call, root, j, b); }); // only read
        };
        failed += two_calls(
            sizes, ("scatter from rank " + std::to_string(root)).c_str(),
            [&](std::size_t b) { return gradsync::scatterer<Comm>(comm, b, root); }, mine, scattered);
    }
    return failed;
}

template <class Comm>
std::string all_to_alls(Comm& comm, const std::vector<std::size_t>& sizes = block_sizes)
{
    const int n = comm.size(), r = comm.rank();
    return two_calls(
        sizes, "all-to-all", [&](std::size_t b) { return gradsync::exchanger<Comm>(comm, b); },
        [&](int call, std::size_t b) { return blocks(n, [&](int j) { return sent(call, r, j, b); }); },
        [&](int call, std::size_t b) { return blocks(n, [&](int j) { return sent(call, j, r, b); }); });
}

template <class Comm>
std::string every_allgather(Comm& comm, const std::vector<std::size_t>& sizes = block_sizes)
{
    return allgathers<gradsync::ring_allgather>(comm, sizes) + allgathers<gradsync::bruck_allgather>(comm, sizes) +
        allgathers<gradsync::automatic_allgather>(comm, sizes);
}

// Every collective and algorithm of this suite on this rank, blocks of `sizes`: "" or what
// went wrong.
template <class Comm>
std::string every_collective(Comm& comm, const std::vector<std::size_t>& sizes = block_sizes)
{
    return every_allgather(comm, sizes) + gathers(comm, sizes) + scatters(comm, sizes) + all_to_alls(comm, sizes);
}

// each(comm) on every rank of every N of `wanted` the harness runs; every rank's "" checked.
template <class H, class Each>
void expect_on_every_rank(const std::vector<int>& wanted, Each&& each)
{
    for (const int n : H::sizes(wanted)) {
        INFO(n << " ranks");
        std::vector<std::string> failed(static_cast<std::size_t>(n));
        const std::string escaped =
            H::run(n, [&](typename H::comm_type& comm) { failed[std::size_t(comm.rank())] = each(comm); });
        CHECK(escaped == "");
        for (const int r : H::checked_ranks(n)) {
            INFO("rank " << r);
            CHECK(failed[std::size_t(r)] == "");
        }
    }
}

enum class movement { allgather, gather, scatter, all_to_all };
inline constexpr movement movements[] = {movement::allgather, movement::gather, movement::scatter,
                                         movement::all_to_all};

inline const char* who(movement m)
{
    return m == movement::allgather ? "gradsync::allgatherer"
        : m == movement::gather     ? "gradsync::gatherer"
        : m == movement::scatter    ? "gradsync::scatterer"
                                    : "gradsync::exchanger";
}

// One call of m's one-shot function with blocks of b bytes (and root), data sized for it;
// what it ended in and whether data was left as it was.
template <class Comm>
void attempt(movement m, Comm& comm, misuse_suite::outcome& o, std::size_t b, int root)
{
    const int n = comm.size(), r = comm.rank();
    const bool all_blocks = m == movement::allgather || m == movement::all_to_all || r == root;
    std::vector<std::byte> data = blocks(all_blocks ? n : 1, [&](int j) { return stale(r, j, b); });
    const std::vector<std::byte> before = data;
    const std::span<std::byte> d(data);
    misuse_suite::record(o, false, [&] {
        switch (m) {
        case movement::allgather: gradsync::allgather(comm, d, b); break;
        case movement::gather: gradsync::gather(comm, d, b, root); break;
        case movement::scatter: gradsync::scatter(comm, d, b, root); break;
        case movement::all_to_all: gradsync::all_to_all(comm, d, b); break;
        }
    });
    o.untouched = misuse_suite::unchanged(data, before);
}

} // namespace conformance::movement_suite

TEST_CASE("allgather: every rank's block in every rank's data, every algorithm and block size", "[movement]")
{
    using namespace conformance::movement_suite;
    using H = conformance::harness;
    expect_on_every_rank<H>({1, 2, 3, 4, 5}, [](H::comm_type& comm) { return every_allgather(comm); });
}

TEST_CASE("gather: every rank's block in the root's data, every root and block size", "[movement]")
{
    using namespace conformance::movement_suite;
    using H = conformance::harness;
    expect_on_every_rank<H>({1, 2, 3, 4, 5}, [](H::comm_type& comm) { return gathers(comm); });
}

TEST_CASE("scatter: the root's block j in rank j's data, every root and block size", "[movement]")
{
    using namespace conformance::movement_suite;
    using H = conformance::harness;
    expect_on_every_rank<H>({1, 2, 3, 4, 5}, [](H::comm_type& comm) { return scatters(comm); });
}

TEST_CASE("all-to-all: block j of rank i in block i of rank j, every block size", "[movement]")
{
    using namespace conformance::movement_suite;
    using H = conformance::harness;
    expect_on_every_rank<H>({1, 2, 3, 4, 5}, [](H::comm_type& comm) { return all_to_alls(comm); });
}

TEST_CASE("the one-shot functions move the blocks as their collectives do", "[movement]")
{
    using namespace conformance::movement_suite;
    using H = conformance::harness;
    expect_on_every_rank<H>({1, 3}, [](H::comm_type& comm) {
        const int n = comm.size(), r = comm.rank(), root = n - 1;
        const std::size_t b = 1000;
        std::string failed;
        const auto check = [&](const char* what, const std::vector<std::byte>& got,
                               const std::vector<std::byte>& want) {
            if (const std::string d = wrong_block(got, want, b); !d.empty())
                failed += std::string(what) + ": " + d + "; ";
        };
        std::vector<std::byte> all = blocks(n, [&](int j) { return j == r ? sent(1, r, -1, b) : stale(r, j, b); });
        gradsync::allgather(comm, std::span<std::byte>(all), b);
        check("allgather()", all, blocks(n, [&](int j) { return sent(1, j, -1, b); }));
        std::vector<std::byte> to_root =
            r == root ? blocks(n, [&](int j) { return j == r ? sent(1, r, root, b) : stale(r, j, b); })
                      : sent(1, r, root, b);
        gradsync::gather(comm, std::span<std::byte>(to_root), b, root);
        check("gather()", to_root,
              r == root ? blocks(n, [&](int j) { return sent(1, j, root, b); }) : sent(1, r, root, b));
        std::vector<std::byte> from_root =
            r == root ? blocks(n, [&](int j) { return sent(2, root, j, b); }) : stale(r, r, b);
        gradsync::scatter(comm, std::span<std::byte>(from_root), b, root);
        check("scatter()", from_root,
              r == root ? blocks(n, [&](int j) { return sent(2, root, j, b); }) : sent(2, root, r, b));
        std::vector<std::byte> mixed = blocks(n, [&](int j) { return sent(3, r, j, b); });
        gradsync::all_to_all(comm, std::span<std::byte>(mixed), b);
        check("all_to_all()", mixed, blocks(n, [&](int j) { return sent(3, j, r, b); }));
        return failed;
    });
}

TEST_CASE("ranks that disagree on the block size get a mismatch_error on every rank, naming it", "[movement]")
{
    using namespace conformance::movement_suite;
    using namespace conformance::misuse_suite;
    using H = conformance::harness;
    for_each_size<H>({5}, [](int n, int odd) {
        for (const movement m : movements) {
            CAPTURE(who(m));
            const auto res = run_recorded<H>(n, [&](H::comm_type& comm, outcome& o) {
                attempt(m, comm, o, comm.rank() == odd ? 4097 : 4096, 0);
            });
            expect_mismatch_everywhere<H>(res, odd, {"block size"});
            for (const int r : H::checked_ranks(n)) {
                const std::string& what = res[std::size_t(r)].what;
                CHECK_THAT(what, Contains(std::string(who(m)) + " (rank " + std::to_string(r) + " of "));
                CHECK_THAT(what, Contains("ranks disagree on the block size in bytes: rank 0 has 4096, rank " +
                                          std::to_string(odd) + " has 4097"));
            }
        }
    });
}

TEST_CASE("ranks that disagree on the root get a mismatch_error on every rank, naming it", "[movement]")
{
    using namespace conformance::movement_suite;
    using namespace conformance::misuse_suite;
    using H = conformance::harness;
    for_each_size<H>({5}, [](int n, int odd) {
        for (const movement m : {movement::gather, movement::scatter}) {
            CAPTURE(who(m));
            const auto res = run_recorded<H>(n, [&](H::comm_type& comm, outcome& o) {
                attempt(m, comm, o, 64, comm.rank() == odd ? 1 : 0);
            });
            expect_mismatch_everywhere<H>(res, odd, {"root"});
            for (const int r : H::checked_ranks(n))
                CHECK_THAT(res[std::size_t(r)].what, Contains("ranks disagree on the root: rank 0 has 0, rank " +
                                                              std::to_string(odd) + " has 1"));
        }
    });
}

TEST_CASE("a root that is not a rank is a usage_error on every rank, naming the rank that gave it", "[movement]")
{
    using namespace conformance::movement_suite;
    using namespace conformance::misuse_suite;
    using H = conformance::harness;
    for_each_size<H>({5}, [](int n, int odd) {
        for (const movement m : {movement::gather, movement::scatter})
            for (const int bad : {n, -1}) {
                CAPTURE(who(m), bad);
                const auto res = run_recorded<H>(n, [&](H::comm_type& comm, outcome& o) {
                    attempt(m, comm, o, 64, comm.rank() == odd ? bad : 0);
                });
                expect_everywhere<H>(res, kind::usage, odd);
                for (const int r : H::checked_ranks(n))
                    CHECK_THAT(res[std::size_t(r)].what,
                               Contains("rank " + std::to_string(odd) + "'s root " + std::to_string(bad) +
                                        " is out of range: ranks are 0.." + std::to_string(n - 1)));
            }
    });
}

TEST_CASE("ranks that call different collectives get a mismatch_error on every rank, naming the algorithm",
          "[movement]")
{
    // The odd rank calls the next collective of the list where the others call one, with the
    // same block size and root: their algorithms tell them apart.
    using namespace conformance::movement_suite;
    using namespace conformance::misuse_suite;
    using H = conformance::harness;
    for_each_size<H>({5}, [](int n, int odd) {
        for (std::size_t k = 0; k < std::size(movements); ++k) {
            const movement mine = movements[k], other = movements[(k + 1) % std::size(movements)];
            CAPTURE(who(mine), who(other));
            const auto res = run_recorded<H>(n, [&](H::comm_type& comm, outcome& o) {
                attempt(comm.rank() == odd ? other : mine, comm, o, 64, 0);
            });
            expect_mismatch_everywhere<H>(res, odd, {"ranks disagree on the algorithm"});
        }
    });
}
