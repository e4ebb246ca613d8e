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
// In a memory space (Memory, memory/host_memory.hpp) the messages are the same, gamma is the
// kernels', and each link adds the synchronizations of its triple sum and one more (sigma),
// and D + 2 kernels besides the sum's (plan/layer_triples.hpp; D the depth of the
// triple's tree for M/N bytes), however many layers there are.
// Scratch: the other ranks' copies of this rank's block, (N-1)/N of the buffer, the layer
// triples (layer_triples.hpp) and their sum's recursive doubling (3 doubles per layer), and
// a part table per link.
//
// Preconditions: any N, count and layout (empty and one-element layers, layers across
// blocks). Each element is computed by its block's owner and then copied, and the triple
// sums are equal on every rank, so all ranks end with identical bits.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include <gradsync/algorithm/recursive_doubling.hpp>
#include <gradsync/algorithm/ring.hpp>
#include <gradsync/plan/layer_triples.hpp>
#include <gradsync/plan/plan.hpp>
#include <gradsync/policy/adasum.hpp>
#include <gradsync/policy/sum.hpp>

namespace gradsync {

template <element T, communicator C, class Memory = host_memory>
class adasum_ring_plan : public plan_types<ring, C, typename Memory::template span<T>> {
    using table = typename layer_triples<Memory>::table;

public:
    adasum_ring_plan(const C& comm, const layer_layout& layout, const plan_options<ring>& options)
        : rank_(comm.rank()), size_(comm.size()), layout_(layout), cut_(cut_for(comm, options.pipeline)),
          mine_(block_at(rank_)), links_(make_links()), triples_(layout.layers(), workspace()),
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
        const table& t = links_[std::size_t(k - 1)];
        const kernels::adasum_operands<T> x{data.data(), scratch_.data()};
        triples_.clear(memory);
        triples_.template add<T>(memory, t, 0, t.size(), x);
        triple_sum_.run(comm, memory.view(triples_.sums()), tag);
        triples_.template apply<T>(memory, t, 0, t.size(), x);
        memory.synchronize();
    }

    // Link k's parts: every layer that meets this rank's block, on the intersection.
    std::vector<table> make_links() const
    {
        std::vector<table> links;
        for (int k = 1; k < size_; ++k) {
            std::vector<kernels::adasum_part> parts;
            layout_.for_each_part(mine_.begin, mine_.end, [&](std::size_t l, std::size_t b, std::size_t e) {
                const std::pair<std::uint32_t, std::size_t> a = operand(chain_start(l), b),
                                                            g = operand(chain_start(l) + k, b);
                const std::pair<std::uint32_t, std::size_t> out = k + 1 == size_ ? operand(rank_, b) : a;
                parts.push_back({l, a.second, g.second, out.second, e - b, a.first, g.first, out.first});
            });
            links.emplace_back(parts);
        }
        return links;
    }

    std::size_t workspace() const noexcept
    {
        std::size_t w = 0;
        for (const table& t : links_)
            w = std::max(w, t.workspace());
        return w;
    }

    int chain_start(std::size_t l) const noexcept { return int(l % std::size_t(size_)); }

    // Where rank q's gradient (or chain) at position p of this rank's block lies: in data,
    // or in rank q's copy in scratch.
    std::pair<std::uint32_t, std::size_t> operand(int q, std::size_t p) const noexcept
    {
        q %= size_;
        if (q == rank_)
            return {kernels::in_data, p};
        return {kernels::in_scratch, slot_of(q) * mine_.size() + (p - mine_.begin)};
    }

    std::size_t slot_of(int q) const noexcept { return std::size_t((q - rank_ + size_) % size_ - 1); }

    // Where rank q's copy of this rank's block is received.
    std::span<T> copy_of(int q)
    {
        return std::span<T>(scratch_.data(), scratch_.size()).subspan(slot_of(q) * mine_.size(), mine_.size());
    }

    block block_at(int q) const noexcept { return block_of(layout_.total(), size_, ((q % size_) + size_) % size_); }

    int rank_, size_;
    layer_layout layout_;
    message_cut cut_;
    block mine_;
    std::vector<table> links_;
    layer_triples<Memory> triples_; // [a.b, a.a, b.b] per layer, this rank's part, then summed
    recursive_doubling_plan<double, C, sum, Memory> triple_sum_;
    typename Memory::template buffer<T> scratch_;
    std::vector<typename C::request> requests_; // after scratch_: pending requests die first
};

} // namespace gradsync
