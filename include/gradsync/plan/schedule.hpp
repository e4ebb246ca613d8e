// Schedules: plain functions of (rank, size, count) that every algorithm plans with.
//
// block_of(count, parts, i): the i-th of `parts` contiguous, near-equal blocks; the first
// count % parts blocks hold one extra element. Empty blocks are fine (count < parts).
//
// folding (MPICH's non-power-of-two step): with P the largest power of two <= N and
// rem = N - P, rank 2i (i < rem) hands its vector to rank 2i+1 and sits out; the P
// remaining ranks take virtual ranks 0..P-1 (odd r < 2rem -> r/2, r >= 2rem -> r - rem),
// and the sitting-out ranks get the result back from their partner at the end.
//
// halving_schedule: vector halving with distance doubling over the P virtual ranks. At step
// k (distance 2^k) the rank whose bit k is 0 keeps the lower half of its current range and
// sends the upper half; its partner keeps the upper half. The allgather replays the steps
// backwards with the roles of "send" and "keep" swapped.
//
// binomial_node_of (broadcasts, scatter): a rank's links in the binomial tree over n ranks
// numbered from the root, v = (rank - root) mod n. v's parent is v minus its lowest set bit;
// its children are v + 2^j below n for every 2^j below that bit (below the top bit of n at
// the root), largest subtree first; its subtree is the ranks v .. subtree_end(n, v) - 1.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <span>
#include <vector>

namespace gradsync {

struct block {
    std::size_t begin = 0;
    std::size_t end = 0;
    std::size_t size() const noexcept { return end - begin; }
    bool operator==(const block&) const = default;
};

// The elements of block b of data.
template <class T>
constexpr std::span<T> block_span(std::span<T> data, block b) noexcept
{
    return data.subspan(b.begin, b.size());
}

constexpr block block_of(std::size_t count, int parts, int i) noexcept
{
    const std::size_t p = std::size_t(parts), k = std::size_t(i);
    const std::size_t base = count / p, extra = count % p;
    const std::size_t begin = k * base + (k < extra ? k : extra);
    return {begin, begin + base + (k < extra ? 1 : 0)};
}

struct folding {
    int size = 1;
    int pof2 = 1;
    int rem = 0;

    constexpr explicit folding(int n) noexcept
        : size(n), pof2(int(std::bit_floor(unsigned(n)))), rem(n - int(std::bit_floor(unsigned(n))))
    {
    }

    // Even rank below 2*rem: gives its vector away and receives the result.
    constexpr bool sits_out(int rank) const noexcept { return rank < 2 * rem && rank % 2 == 0; }
    // Odd rank below 2*rem: absorbs its even neighbour before the power-of-two phase.
    constexpr bool absorbs(int rank) const noexcept { return rank < 2 * rem && rank % 2 == 1; }
    constexpr int virtual_rank(int rank) const noexcept
    {
        return sits_out(rank) ? -1 : rank < 2 * rem ? rank / 2 : rank - rem;
    }
    constexpr int real_rank(int vrank) const noexcept { return vrank < rem ? 2 * vrank + 1 : vrank + rem; }
};

struct halving_step {
    int peer = 0;     // real rank of the partner
    block send;       // the half given away in the reduce-scatter
    block keep;       // the half reduced here
};

inline std::vector<halving_step> halving_schedule(const folding& f, int vrank, std::size_t count)
{
    std::vector<halving_step> steps;
    block range{0, count};
    for (int mask = 1; mask < f.pof2; mask <<= 1) {
        const std::size_t mid = range.begin + range.size() / 2;
        const block lower{range.begin, mid}, upper{mid, range.end};
        const bool low = (vrank & mask) == 0;
        steps.push_back({f.real_rank(vrank ^ mask), low ? upper : lower, low ? lower : upper});
        range = steps.back().keep;
    }
    return steps;
}

// A rank's links in the binomial tree, in real ranks: the peer and, as relative ranks
// first .. last - 1, the subtree whose data travels over the link.
struct tree_link {
    int peer = -1;
    int first = 0, last = 0;
};

struct binomial_node {
    tree_link parent; // peer -1 at the root
    std::vector<tree_link> children;
};

constexpr int subtree_end(int n, int v) noexcept { return v == 0 ? n : std::min(n, v + (v & -v)); }

inline binomial_node binomial_node_of(int n, int rank, int root)
{
    const int v = (rank - root + n) % n;
    const int top = v == 0 ? int(std::bit_ceil(unsigned(n))) : v & -v;
    binomial_node node;
    if (v != 0)
        node.parent = {(v - top + root) % n, v, subtree_end(n, v)};
    for (int m = top / 2; m >= 1; m /= 2)
        if (v + m < n)
            node.children.push_back({(v + m + root) % n, v + m, subtree_end(n, v + m)});
    return node;
}

} // namespace gradsync
