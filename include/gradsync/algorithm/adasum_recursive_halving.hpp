// Adasum by recursive halving (the paper's Algorithm 1), the Adasum plan of the
// recursive_halving tag.
//
// Step k (distance 2^k) halves the vector as recursive_halving does: the rank keeps one half
// of its range and receives its partner's copy of that half, so it holds a part of both
// logical vectors a (held by the side whose bit k is 0) and b. Per layer it forms the partial
// triple [a.b, a.a, b.b] over its part; the 2^(k+1) ranks that together hold a and b sum the
// triples by recursive doubling (k+1 exchanges of one triple per layer), then each applies
// the coefficients to its part. Layers that straddle a cut contribute partial triples on
// both sides. The allgather and the folding of non-power-of-two N (h(i) = A(g(2i), g(2i+1)),
// computed whole on rank 2i+1) are those of recursive_halving, so the tree is
// A(A(h0,h1), A(h2,h3)), ... as DESIGN.md specifies.
//
// Cost (P = largest power of two <= N, M bytes per rank, L layers, gamma' per byte of the
// triple plus scaled add):
//   2*log2(P)*alpha + 2*(P-1)/P*M*beta + (P-1)/P*M*gamma'
//   + log2(P)*(log2(P)+1)/2 * (alpha + 24*L*beta)          (triple exchanges)
// plus 2*alpha + 2*M*beta + M*gamma' of folding when N is not a power of two.
//
// Preconditions: any N and count, any layout (empty and one-element layers included). Each
// element is computed by one rank and then copied, and the group's triple sums are formed
// in the same pairwise order on every member, so all ranks end with identical bits.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include <gradsync/algorithm/exchange.hpp>
#include <gradsync/algorithm/schedule.hpp>
#include <gradsync/communicator.hpp>
#include <gradsync/kernels/host.hpp>
#include <gradsync/layout.hpp>
#include <gradsync/policy/adasum.hpp>
#include <gradsync/types.hpp>

namespace gradsync {

template <element T, communicator C>
class adasum_recursive_halving_plan {
public:
    template <class Tag>
    adasum_recursive_halving_plan(const C& comm, const layer_layout& layout, const Tag&, const pipeline_options&)
        : rank_(comm.rank()), size_(comm.size()), layout_(layout), fold_(size_), cut_{eager_limit(comm), 0},
          triples_(layout.layers()), received_(layout.layers())
    {
        const std::size_t count = layout.total();
        const int v = fold_.virtual_rank(rank_);
        std::size_t largest = fold_.absorbs(rank_) ? count : 0;
        std::size_t requests = 2 * cut_.messages<kernels::dot_triple>(layout.layers());
        if (fold_.sits_out(rank_) || fold_.absorbs(rank_))
            requests = std::max(requests, cut_.messages<T>(count));
        if (v >= 0) {
            const std::vector<halving_step> halving = halving_schedule(fold_, v, count);
            for (std::size_t k = 0; k < halving.size(); ++k) {
                const int mask = 1 << k;
                step s{halving[k], (v & mask) == 0, peers_.size(), 0};
                for (int m = 1; m <= mask; m <<= 1)
                    peers_.push_back(fold_.real_rank(v ^ m));
                s.group_end = peers_.size();
                steps_.push_back(s);
                largest = std::max(largest, s.halves.keep.size());
                requests = std::max(requests, cut_.messages<T>(s.halves.send.size()) +
                                                  cut_.messages<T>(s.halves.keep.size()));
            }
        }
        scratch_.resize(largest);
        requests_.resize(requests);
    }

    std::size_t count() const noexcept { return layout_.total(); }

    template <class Policy>
    void run(C& comm, std::span<T> data, int tag)
    {
        const std::span<T> none;
        if (fold_.sits_out(rank_)) {
            exchange<T>(comm, tag, rank_ + 1, data, rank_, none, cut_, requests_);
            exchange<T>(comm, tag, rank_, none, rank_ + 1, data, cut_, requests_);
            return;
        }
        if (fold_.absorbs(rank_)) {
            const std::span<T> lower(scratch_.data(), data.size());
            exchange<T>(comm, tag, rank_, none, rank_ - 1, lower, cut_, requests_);
            for (std::size_t l = 0; l < layout_.layers(); ++l)
                adasum::combine_layer<T>(layer(data, l), layer(lower, l), layer(data, l));
        }
        for (const step& s : steps_)
            reduce_step(comm, data, tag, s);
        for (auto s = steps_.rbegin(); s != steps_.rend(); ++s)
            exchange<T>(comm, tag, s->peer(), part(data, s->halves.keep), s->peer(), part(data, s->halves.send), cut_,
                        requests_);
        if (fold_.absorbs(rank_))
            exchange<T>(comm, tag, rank_ - 1, data, rank_, none, cut_, requests_);
    }

private:
    struct step {
        halving_step halves;
        bool low;                // this rank holds a (bit k of its virtual rank is 0)
        std::size_t group_begin; // its triple-sum partners, in peers_
        std::size_t group_end;
        int peer() const noexcept { return halves.peer; }
    };

    void reduce_step(C& comm, std::span<T> data, int tag, const step& s)
    {
        const block keep = s.halves.keep;
        const std::span<T> theirs(scratch_.data(), keep.size());
        exchange<T>(comm, tag, s.peer(), part(data, s.halves.send), s.peer(), theirs, cut_, requests_);

        // Partial triples over this rank's part of every layer (zero for layers outside it).
        std::fill(triples_.begin(), triples_.end(), kernels::dot_triple{});
        for_each_layer_part(keep, [&](std::size_t l, block b) {
            const std::span<const T> mine = part(data, b), other = theirs.subspan(b.begin - keep.begin, b.size());
            triples_[l] = s.low ? kernels::triple(mine, other) : kernels::triple(other, mine);
        });
        for (std::size_t g = s.group_begin; g < s.group_end; ++g) {
            exchange<kernels::dot_triple>(comm, tag, peers_[g], triples_, peers_[g], received_, cut_, requests_);
            for (std::size_t l = 0; l < triples_.size(); ++l)
                triples_[l] += received_[l];
        }
        for_each_layer_part(keep, [&](std::size_t l, block b) {
            const adasum::coefficients c = adasum::from(triples_[l]);
            const std::span<T> mine = part(data, b);
            const std::span<const T> other = theirs.subspan(b.begin - keep.begin, b.size());
            if (s.low)
                kernels::scaled_add<T>(mine, c.a, mine, c.b, other);
            else
                kernels::scaled_add<T>(mine, c.a, other, c.b, mine);
        });
    }

    // Calls f(layer, its intersection with r) for every layer that meets r, in order.
    template <class F>
    void for_each_layer_part(block r, F f) const
    {
        const auto sizes = layout_.sizes();
        std::size_t l = 0;
        while (l < sizes.size() && layout_.offset(l) + sizes[l] <= r.begin)
            ++l;
        for (; l < sizes.size() && layout_.offset(l) < r.end; ++l) {
            const std::size_t b = std::max(layout_.offset(l), r.begin), e = std::min(layout_.offset(l) + sizes[l], r.end);
            if (b < e)
                f(l, block{b, e});
        }
    }

    std::span<T> layer(std::span<T> v, std::size_t l) const { return v.subspan(layout_.offset(l), layout_.size(l)); }
    static std::span<T> part(std::span<T> data, block b) { return data.subspan(b.begin, b.size()); }

    int rank_, size_;
    layer_layout layout_;
    folding fold_;
    message_cut cut_;
    std::vector<step> steps_;
    std::vector<int> peers_;
    std::vector<kernels::dot_triple> triples_, received_;
    std::vector<T> scratch_;
    std::vector<typename C::request> requests_; // after the buffers: pending requests die first
};

} // namespace gradsync
