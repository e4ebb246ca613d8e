// Adasum as a chain per layer, the Adasum plan of the ring algorithm
// (docs/semantics.md, tree orders):
// layer j starts at rank s = j mod N and is combined along s, s+1, ..., s+N-1:
//   A(...A(A(g(s), g(s+1)), g(s+2))..., g(s+N-1)).
//
// The chains are computed spread over the elements, not passed from rank to rank: rank r
// owns block r of the buffer (block_of, as in the ring's Sum). An all-to-all (N-1 pairwise
// exchanges, with ranks r+i and r-i at step i) brings it block r of every other rank's
// gradient. Then it runs the N-1 links of every layer's chain on its block; at link k the
// partial triples [acc.g, acc.acc, g.g] of every layer (g = g(s+k)) are summed over all
// ranks (recursive doubling of 3 doubles per layer, so every rank holds the same sums)
// before the coefficients are applied. Finally the blocks go around the ring (allgather).
// The messages depend on N and the buffer, never on the layout, so many small layers cost
// no more messages than one large one, and every rank computes 1/N of every chain.
//
// Cost (N ranks, P = largest power of two <= N, F = 1 when N is not a power of two, else 0,
// M bytes per rank, L layers, alpha per message, beta per byte sent, gamma per byte
// combined; planner::ring_adasum_cost, checked by tests/test_cost_formulas.cpp): the
// all-to-all and the allgather move what the ring's two phases do, the N-1 links combine
// (N-1)/N M twice (triples, then the scaled add), and each link sums 24 bytes per layer by
// recursive doubling, log2(P) + 2F messages.
// cost: 2*(N-1)*alpha + 2*(N-1)/N*M*beta + 2*(N-1)/N*M*gamma + (N-1)*(log2(P) + 2*F)*(alpha + 24*L*beta)
// In a memory space (Memory, algorithm/memory.hpp) the messages are the same, gamma is the
// kernels', and each link adds a few space synchronizations (sigma) and one copy of its
// 24*L bytes of triples to the host (algorithm/layer_triples.hpp).
// Scratch: the other ranks' copies of this rank's block, (N-1)/N of the buffer, the layer
// triples (layer_triples.hpp) and their sum's recursive doubling (3 doubles per layer).
//
// Preconditions: any N, count and layout (empty and one-element layers, layers across
// blocks). Each element is computed by its block's owner and then copied, and the triple
// sums are equal on every rank, so all ranks end with identical bits.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include <gradsync/algorithm/layer_triples.hpp>
#include <gradsync/algorithm/recursive_doubling.hpp>
#include <gradsync/algorithm/ring.hpp>
#include <gradsync/plan.hpp>
#include <gradsync/policy/adasum.hpp>
#include <gradsync/policy/sum.hpp>

namespace gradsync {

template <element T, communicator C, class Memory = host_memory>
class adasum_ring_plan : public plan_types<ring, C, typename Memory::template span<T>> {
public:
    adasum_ring_plan(const C& comm, const layer_layout& layout, const plan_options<ring>& options)
        : rank_(comm.rank()), size_(comm.size()), layout_(layout), cut_(cut_for(comm, options.pipeline)),
          mine_(block_at(rank_)), triples_(layout.layers(), widest_part()),
          triple_sum_(comm, layer_layout(3 * layout.layers(), {}), options_for<recursive_doubling>(options)),
          scratch_(std::size_t(size_ - 1) * mine_.size()),
          requests_(2 * cut_.messages<T>(block_at(0).size())) // block 0 is never smaller
    {
    }

    std::size_t count() const noexcept { return layout_.total(); }
    std::size_t scratch_bytes() const noexcept
    {
        return scratch_.size() * sizeof(T) + triples_.bytes() + triple_sum_.scratch_bytes();
    }

    void run(C& comm, typename Memory::template span<T> data, int tag)
    {
        const Memory memory = Memory::of(data);
        const std::span<T> d = Memory::elements(data);
        const int n = size_;
        memory.synchronize(); // the caller's queued work on data ends before the first send
        for (int i = 1; i < n; ++i) {
            const int to = (rank_ + i) % n, from = (rank_ + n - i) % n;
            exchange<T>(comm, tag, to, block_span(d, block_at(to)), from, copy_of(from), cut_, requests_);
        }
        for (int k = 1; k < n; ++k)
            link(comm, memory, d, k, tag);
        const int right = (rank_ + 1) % n, left = (rank_ + n - 1) % n;
        for (int s = 0; s + 1 < n; ++s)
            exchange<T>(comm, tag, right, block_span(d, block_at(rank_ - s)), left,
                        block_span(d, block_at(rank_ - s - 1)), cut_, requests_);
    }

private:
    // Link k of every layer's chain on this rank's block: acc = A(acc, g(s + k)). The chain
    // so far lives where its first gradient does (data when s is this rank, else the copy
    // from rank s); the last link writes into data, whose own gradient is no longer needed
    // then (or is the link's second operand, which scaled_add may overwrite).
    void link(C& comm, const Memory& memory, std::span<T> data, int k, int tag)
    {
        triples_.clear(memory);
        for_each_layer_part([&](std::size_t l, block b) {
            triples_.template add<T>(memory, l, operand(data, chain_start(l), b), operand(data, chain_start(l) + k, b));
        });
        triple_sum_.run(comm, memory.view(triples_.sums()), tag);
        triples_.fetch(memory);
        for_each_layer_part([&](std::size_t l, block b) {
            const adasum::coefficients c = triples_.coefficients(l);
            const std::span<T> acc = operand(data, chain_start(l), b);
            memory.template scaled_add<T>(k + 1 == size_ ? block_span(data, b) : acc, c.a, acc, c.b,
                                          operand(data, chain_start(l) + k, b));
        });
        memory.synchronize();
    }

    // Calls f(layer, part) for every layer that meets this rank's block, part the
    // intersection (positions in the buffer).
    template <class F>
    void for_each_layer_part(F f) const
    {
        layout_.for_each_part(mine_.begin, mine_.end, [&](std::size_t l, std::size_t b, std::size_t e) { f(l, block{b, e}); });
    }

    std::size_t widest_part() const
    {
        std::size_t widest = 0;
        for_each_layer_part([&](std::size_t, block b) { widest = std::max(widest, b.size()); });
        return widest;
    }

    int chain_start(std::size_t l) const noexcept { return int(l % std::size_t(size_)); }

    // Rank q's gradient (or chain) on part b of this rank's block.
    std::span<T> operand(std::span<T> data, int q, block b)
    {
        q %= size_;
        return q == rank_ ? block_span(data, b) : copy_of(q).subspan(b.begin - mine_.begin, b.size());
    }

    // Where rank q's copy of this rank's block is received.
    std::span<T> copy_of(int q)
    {
        const std::size_t slot = std::size_t((q - rank_ + size_) % size_ - 1);
        return std::span<T>(scratch_.data(), scratch_.size()).subspan(slot * mine_.size(), mine_.size());
    }

    block block_at(int q) const noexcept { return block_of(layout_.total(), size_, ((q % size_) + size_) % size_); }

    int rank_, size_;
    layer_layout layout_;
    message_cut cut_;
    block mine_;
    layer_triples<Memory> triples_; // [a.b, a.a, b.b] per layer, this rank's part, then summed
    recursive_doubling_plan<double, C, sum, Memory> triple_sum_;
    typename Memory::template buffer<T> scratch_;
    std::vector<typename C::request> requests_; // after scratch_: pending requests die first
};

} // namespace gradsync
