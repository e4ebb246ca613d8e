// Schedules are plain functions of (rank, size, count); these tests check their invariants
// directly: blocks partition the vector, folding is a bijection onto the virtual ranks, and
// the halving steps of partners mirror each other and end in a partition.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <string>
#include <vector>

#include <gradsync/plan/schedule.hpp>

namespace {

std::vector<std::size_t> counts() { return {0, 1, 2, 3, 5, 7, 8, 31, 100, 1000, 1001, 65537}; }

// "" when blocks (in any order) tile [begin, end) without gaps or overlaps.
std::string tiles(std::vector<gradsync::block> blocks, std::size_t begin, std::size_t end)
{
    std::sort(blocks.begin(), blocks.end(), [](const auto& a, const auto& b) {
        return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    std::size_t at = begin;
    for (const auto& b : blocks) {
        if (b.end < b.begin)
            return "block [" + std::to_string(b.begin) + "," + std::to_string(b.end) + ") is reversed";
        if (b.begin != at)
            return "gap or overlap at " + std::to_string(at) + " (next block begins at " + std::to_string(b.begin) + ")";
        at = b.end;
    }
    if (at != end)
        return "blocks end at " + std::to_string(at) + ", not at " + std::to_string(end);
    return "";
}

} // namespace

TEST_CASE("block_of: contiguous near-equal blocks partition 0..count", "[schedule]")
{
    std::string first;
    for (std::size_t count : counts())
        for (int parts = 1; parts <= 70 && first.empty(); ++parts) {
            std::size_t at = 0, smallest = count, largest = 0;
            for (int i = 0; i < parts; ++i) {
                const gradsync::block b = gradsync::block_of(count, parts, i);
                if (b.begin != at || b.end < b.begin) {
                    first = "count " + std::to_string(count) + " parts " + std::to_string(parts) + ": block " +
                        std::to_string(i) + " is not contiguous";
                    break;
                }
                at = b.end;
                smallest = std::min(smallest, b.size());
                largest = std::max(largest, b.size());
            }
            if (first.empty() && at != count)
                first = "count " + std::to_string(count) + " parts " + std::to_string(parts) + ": blocks end at " +
                    std::to_string(at);
            if (first.empty() && largest - smallest > 1)
                first = "count " + std::to_string(count) + " parts " + std::to_string(parts) + ": sizes " +
                    std::to_string(smallest) + ".." + std::to_string(largest);
            // Algorithms size their scratch by block 0, so no block may be larger.
            if (first.empty() && gradsync::block_of(count, parts, 0).size() != largest)
                first = "count " + std::to_string(count) + " parts " + std::to_string(parts) + ": block 0 is not the largest";
        }
    CHECK(first == "");
}

TEST_CASE("folding: ranks map bijectively onto virtual ranks 0..P-1", "[schedule]")
{
    for (int n = 1; n <= 70; ++n) {
        CAPTURE(n);
        const gradsync::folding f(n);
        int pof2 = 1;
        while (pof2 * 2 <= n)
            pof2 *= 2;
        REQUIRE(f.pof2 == pof2);
        REQUIRE(f.rem == n - pof2);
        std::vector<int> owner(std::size_t(pof2), -1);
        int sitting = 0;
        for (int r = 0; r < n; ++r) {
            CAPTURE(r);
            const int v = f.virtual_rank(r);
            if (f.sits_out(r)) {
                ++sitting;
                CHECK(v == -1);
                CHECK(!f.absorbs(r));
                REQUIRE(r + 1 < n); // its partner exists
                CHECK(f.absorbs(r + 1));
                continue;
            }
            REQUIRE(v >= 0);
            REQUIRE(v < pof2);
            CHECK(owner[std::size_t(v)] == -1);
            owner[std::size_t(v)] = r;
            CHECK(f.real_rank(v) == r);
        }
        CHECK(sitting == n - pof2);
        CHECK(std::count(owner.begin(), owner.end(), -1) == 0);
    }
}

TEST_CASE("halving_schedule: steps halve, partners mirror, final blocks partition", "[schedule]")
{
    std::string first;
    auto fail = [&](int n, std::size_t count, int v, std::size_t k, const std::string& what) {
        if (first.empty())
            first = "N " + std::to_string(n) + " count " + std::to_string(count) + " vrank " + std::to_string(v) +
                " step " + std::to_string(k) + ": " + what;
    };
    for (int n = 1; n <= 40; ++n)
        for (std::size_t count : counts()) {
            const gradsync::folding f(n);
            std::vector<std::vector<gradsync::halving_step>> all;
            for (int v = 0; v < f.pof2; ++v)
                all.push_back(gradsync::halving_schedule(f, v, count));
            std::vector<gradsync::block> finals;
            for (int v = 0; v < f.pof2; ++v) {
                const auto& steps = all[std::size_t(v)];
                if (steps.size() != std::size_t(std::countr_zero(unsigned(f.pof2))))
                    fail(n, count, v, 0, "has " + std::to_string(steps.size()) + " steps");
                gradsync::block range{0, count};
                for (std::size_t k = 0; k < steps.size(); ++k) {
                    const gradsync::halving_step& s = steps[k];
                    // send and keep split the previous keep block in two
                    if (!tiles({s.send, s.keep}, range.begin, range.end).empty())
                        fail(n, count, v, k, "send and keep do not partition the previous block");
                    // partner is at distance 2^k in virtual ranks, and mirrors us
                    const int pv = v ^ (1 << k);
                    if (s.peer != f.real_rank(pv)) {
                        fail(n, count, v, k, "peer " + std::to_string(s.peer) + " is not virtual rank " + std::to_string(pv));
                        continue;
                    }
                    const gradsync::halving_step& p = all[std::size_t(pv)][k];
                    if (p.peer != f.real_rank(v))
                        fail(n, count, v, k, "partner's peer is not me");
                    if (!(p.keep == s.send) || !(p.send == s.keep))
                        fail(n, count, v, k, "partner keeps something other than what I send");
                    range = s.keep;
                }
                finals.push_back(range);
            }
            if (std::string e = tiles(finals, 0, count); !e.empty())
                fail(n, count, -1, 0, "final keep blocks: " + e);
        }
    CHECK(first == "");
}
