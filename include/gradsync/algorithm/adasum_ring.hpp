// Adasum as a chain per layer, the Adasum plan of the ring tag (DESIGN.md section 3):
// layer j starts at rank s = j mod N and is combined along s, s+1, ..., s+N-1:
//   A(...A(A(g(s), g(s+1)), g(s+2))..., g(s+N-1)).
//
// The chains are computed spread over the elements, not passed from rank to rank: rank r
// owns slice r of the buffer (block_of, as in the ring's Sum). An all-to-all (N-1 pairwise
// exchanges, with ranks r+i and r-i at step i) brings it slice r of every other rank's
// gradient. Then it runs the N-1 links of every layer's chain on its slice; at link k the
// partial triples [acc.g, acc.acc, g.g] of every layer (g = g(s+k)) are summed over all
// ranks (recursive doubling of 3 doubles per layer, so every rank holds the same sums)
// before the coefficients are applied. Finally the slices go around the ring (allgather).
// The messages depend on N and the buffer, never on the layout, so many small layers cost
// no more messages than one large one, and every rank computes 1/N of every chain.
//
// Cost (N ranks, M bytes per rank, L layers, gamma' per byte of triple plus scaled add,
// R = the recursive-doubling steps for N):
//   2*(N-1)*alpha + 2*(N-1)/N*M*beta + (N-1)/N*M*gamma' + (N-1)*R*(alpha + 24*L*beta)
// Scratch: the other ranks' copies of this rank's slice, (N-1)/N of the buffer.
//
// Preconditions: any N, count and layout (empty and one-element layers, layers across
// slices). Each element is computed by its slice's owner and then copied, and the triple
// sums are equal on every rank, so all ranks end with identical bits.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include <gradsync/algorithm/exchange.hpp>
#include <gradsync/algorithm/recursive_doubling.hpp>
#include <gradsync/algorithm/schedule.hpp>
#include <gradsync/communicator.hpp>
#include <gradsync/kernels/host_adasum.hpp>
#include <gradsync/layout.hpp>
#include <gradsync/policy/adasum.hpp>
#include <gradsync/policy/sum.hpp>
#include <gradsync/types.hpp>

namespace gradsync {

template <element T, communicator C>
class adasum_ring_plan {
public:
    template <class Tag>
    adasum_ring_plan(const C& comm, const layer_layout& layout, const Tag&, const pipeline_options& pipe)
        : rank_(comm.rank()), size_(comm.size()), layout_(layout), cut_{eager_limit(comm), 0},
          mine_(slice(rank_)), triples_(3 * layout.layers()),
          triple_sum_(comm, layer_layout(triples_.size(), {}), recursive_doubling{}, pipe),
          scratch_(std::size_t(size_ - 1) * mine_.size()),
          requests_(2 * cut_.messages<T>(slice(0).size())) // slice 0 is never smaller
    {
    }

    std::size_t count() const noexcept { return layout_.total(); }

    template <class Policy>
    void run(C& comm, std::span<T> data, int tag)
    {
        const int n = size_;
        for (int i = 1; i < n; ++i) {
            const int to = (rank_ + i) % n, from = (rank_ + n - i) % n;
            exchange<T>(comm, tag, to, part(data, slice(to)), from, copy_of(from), cut_, requests_);
        }
        for (int k = 1; k < n; ++k)
            link(comm, data, tag, k);
        const int right = (rank_ + 1) % n, left = (rank_ + n - 1) % n;
        for (int s = 0; s + 1 < n; ++s)
            exchange<T>(comm, tag, right, part(data, slice(rank_ - s)), left, part(data, slice(rank_ - s - 1)), cut_,
                        requests_);
    }

private:
    // Link k of every layer's chain on this rank's slice: acc = A(acc, g(s + k)). The chain
    // so far lives where its first gradient does (data when s is this rank, else the copy
    // from rank s); the last link writes into data, whose own gradient is no longer needed
    // then (or is the link's second operand, which scaled_add may overwrite).
    void link(C& comm, std::span<T> data, int tag, int k)
    {
        std::fill(triples_.begin(), triples_.end(), 0.0);
        for_each_layer_part([&](std::size_t l, block b) {
            const kernels::dot_triple t = kernels::triple<T>(operand(data, chain_start(l), b),
                                                             operand(data, chain_start(l) + k, b));
            triples_[3 * l] = t.ab;
            triples_[3 * l + 1] = t.aa;
            triples_[3 * l + 2] = t.bb;
        });
        triple_sum_.template run<sum>(comm, std::span<double>(triples_), tag);
        for_each_layer_part([&](std::size_t l, block b) {
            const adasum::coefficients c = adasum::from({triples_[3 * l], triples_[3 * l + 1], triples_[3 * l + 2]});
            const std::span<T> acc = operand(data, chain_start(l), b);
            kernels::scaled_add<T>(k + 1 == size_ ? part(data, b) : acc, c.a, acc, c.b,
                                   operand(data, chain_start(l) + k, b));
        });
    }

    // Calls f(layer, part) for every layer that meets this rank's slice, part the
    // intersection (positions in the buffer).
    template <class F>
    void for_each_layer_part(F f) const
    {
        layout_.for_each_part(mine_.begin, mine_.end, [&](std::size_t l, std::size_t b, std::size_t e) { f(l, block{b, e}); });
    }

    int chain_start(std::size_t l) const noexcept { return int(l % std::size_t(size_)); }

    // Rank q's gradient (or chain) on part b of this rank's slice.
    std::span<T> operand(std::span<T> data, int q, block b)
    {
        q %= size_;
        return q == rank_ ? part(data, b) : copy_of(q).subspan(b.begin - mine_.begin, b.size());
    }

    // Where rank q's copy of this rank's slice is received.
    std::span<T> copy_of(int q)
    {
        const std::size_t slot = std::size_t((q - rank_ + size_) % size_ - 1);
        return std::span<T>(scratch_).subspan(slot * mine_.size(), mine_.size());
    }

    block slice(int q) const noexcept { return block_of(layout_.total(), size_, ((q % size_) + size_) % size_); }
    static std::span<T> part(std::span<T> data, block b) { return data.subspan(b.begin, b.size()); }

    int rank_, size_;
    layer_layout layout_;
    message_cut cut_;
    block mine_;
    std::vector<double> triples_; // [a.b, a.a, b.b] per layer, this rank's part, then summed
    recursive_doubling_plan<double, C> triple_sum_;
    std::vector<T> scratch_;
    std::vector<typename C::request> requests_; // after scratch_: pending requests die first
};

} // namespace gradsync
