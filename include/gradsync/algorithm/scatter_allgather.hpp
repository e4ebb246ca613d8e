// Scatter then allgather broadcast (van de Geijn's): the vector is cut into N near-equal
// blocks, block j (block_of(count, N, j)) belonging to rank root + j (mod N); the root
// scatters them down the binomial tree (binomial_node_of, plan/schedule.hpp), each rank
// receiving its subtree's blocks, which are contiguous, in one range from its parent and
// handing each child that child's subtree; a ring allgather (ring.hpp's) then copies every
// block to every rank.
//
// Cost (N ranks, M bytes, alpha per message, beta per byte sent; planner::
// scatter_allgather_cost, checked by tests/test_cost_formulas.cpp): the scatter takes
// ceil(log2 N) = log2(P) + F sends on the longest path, and the root, which sends one after
// another every block but its own, (N-1)/N*M bytes; the ring, N-1 steps of one block.
// cost: (log2(P) + F + N - 1)*alpha + 2*(N-1)/N*M*beta
// With count not a multiple of N the blocks differ by one element, so the beta term is that
// of the largest block, at most one element per step more. Bandwidth-bound: for N > 2 it
// moves 2*(N-1)/N*M bytes per rank instead of the binomial tree's ceil(log2 N)*M; for N = 2
// it moves the same M for one more message (selector/automatic_broadcast.hpp). The
// scatter's messages go whole (send_down, exchange.hpp); the ring's are cut as exchanges
// cut a block (message_cut), never into pipeline segments. In a memory space the space is
// synchronized once before the first send.
//
// Preconditions: any N >= 1, any root 0..N-1, any count; with count < N some blocks are
// empty and their messages are skipped on both sides. Every rank ends with the root's bits:
// they are copied, never computed.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include <gradsync/core/codes.hpp>
#include <gradsync/plan/broadcast_plan.hpp>

namespace gradsync {

struct scatter_allgather {
    static constexpr std::uint32_t code = codes::scatter_allgather;
    static constexpr const char* name = "scatter_allgather";
};

template <broadcast_element T, communicator C, class Memory = host_memory>
class scatter_allgather_plan : public plan_types<scatter_allgather, C, typename Memory::template span<T>> {
public:
    scatter_allgather_plan(const C& comm, std::size_t count, int root, const plan_options<scatter_allgather>& options)
        : rank_(comm.rank()), size_(comm.size()), root_(root), count_(count), cut_(cut_for(comm, options.pipeline))
    {
        const binomial_node node = binomial_node_of(size_, rank_, root);
        parent_ = node.parent.peer;
        mine_ = blocks(node.parent.first, node.parent.last);
        for (const tree_link& child : node.children)
            children_.emplace_back(child.peer, blocks(child.first, child.last));
        // Ring blocks hold one of two sizes, and the cut need not grow with the size; the
        // scatter's messages go whole, one request each.
        const std::size_t ring = std::max(cut_.messages<T>(block_of(count, size_, 0).size()),
                                          cut_.messages<T>(block_of(count, size_, size_ - 1).size()));
        requests_.resize(std::max<std::size_t>(1, 2 * ring));
    }

    std::size_t count() const noexcept { return count_; }
    int root() const noexcept { return root_; }

    void run(C& comm, typename Memory::template span<T> data, int tag)
    {
        Memory::of(data).synchronize();
        const std::span<T> d = Memory::elements(data);
        send_down<T>(comm, tag, d, parent_, mine_, children_, cut_, requests_);
        allgather_around_ring<T>(comm, tag, d, relative(rank_), [this](int j) { return blocks(j, j + 1); }, cut_,
                                 requests_);
    }

private:
    int relative(int rank) const noexcept { return (rank - root_ + size_) % size_; }
    // The elements of the blocks of relative ranks first .. last - 1 (taken mod N, first <= last;
    // none where first == last).
    block blocks(int first, int last) const noexcept
    {
        if (first == last)
            return {};
        const int f = ((first % size_) + size_) % size_;
        return {block_of(count_, size_, f).begin, block_of(count_, size_, f + last - first - 1).end};
    }

    int rank_, size_, root_;
    std::size_t count_;
    message_cut cut_;
    int parent_;  // -1 at the root
    block mine_;  // the blocks of this rank's subtree, received from its parent
    std::vector<std::pair<int, block>> children_;
    std::vector<typename C::request> requests_;
};

} // namespace gradsync
