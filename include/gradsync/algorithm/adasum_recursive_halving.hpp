// Adasum by recursive halving (the paper's Algorithm 1), the Adasum plan of the
// recursive_halving algorithm.
//
// Step k (distance 2^k) halves the vector as recursive_halving does: the rank keeps one half
// of its range and receives its partner's copy of that half, so it holds a part of both
// logical vectors a (held by the side whose bit k is 0) and b. Per layer it forms the partial
// triple [a.b, a.a, b.b] over its part; the 2^(k+1) ranks that together hold a and b sum the
// triples by recursive doubling (k+1 exchanges of one triple per layer), then each applies
// the coefficients to its part. Layers that straddle a cut contribute partial triples on
// both sides. The allgather and the folding of non-power-of-two N (h(i) = A(g(2i), g(2i+1)),
// computed whole on rank 2i+1) are those of recursive_halving, so the tree is
// A(A(h0,h1), A(h2,h3)), ... as docs/semantics.md
// specifies (tree orders).
//
// Cost (P = largest power of two <= N, F = 1 when N is not a power of two, else 0, M bytes
// per rank, L layers, alpha per message, beta per byte sent, gamma per byte combined;
// planner::recursive_halving_adasum_cost, checked by tests/test_cost_formulas.cpp): Sum's
// recursive halving with folding, gamma counted twice (the triples, then the scaled add),
// plus the triple exchanges: s+1 of one [a.b, a.a, b.b] triple (24 bytes) per layer at
// step s = 0..log2(P)-1.
// cost: 2*log2(P)*alpha + 2*(P-1)/P*M*beta + 2*(P-1)/P*M*gamma + log2(P)*(log2(P)+1)/2*(alpha + 24*L*beta) + F*(2*alpha + 2*M*beta + 2*M*gamma)
// In a memory space (Memory, algorithm/memory.hpp) the messages are the same, gamma is the
// kernels', and each step adds a few space synchronizations (sigma) and one copy of its
// 24*L bytes of triples to the host (algorithm/layer_triples.hpp).
//
// The receive of each step is segmented and this rank's partial triples of a segment are
// formed as soon as it lands. A layer that lies wholly in this rank's part needs no other
// rank's triple, so (when the part comes in several segments or its layers are small) it is
// combined as soon as its last segment lands, while still in cache; only the layers cut by
// a halving (at most two per rank and step) wait for the group's triple sum.
//
// Preconditions: any N and count, any layout (empty and one-element layers included). Each
// element is computed by one rank and then copied, and the group's triple sums are formed
// in the same pairwise order on every member, so all ranks end with identical bits.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include <gradsync/algorithm/layer_triples.hpp>
#include <gradsync/algorithm/recursive_halving.hpp>
#include <gradsync/plan.hpp>
#include <gradsync/policy/adasum.hpp>
#include <gradsync/policy/sum.hpp>

namespace gradsync {

// The Adasum tree by recursive halving over block `range` of a layout (the whole buffer for
// the plan below; hierarchical Adasum runs it on the block a rank holds for its node). Its
// run() takes complete(triples), called with each step's group-summed triples (3 per layer
// of the layout, a Memory::span<double>) before the coefficients are formed; complete must
// leave equal values on every rank of the group (hierarchical Adasum sums them over the
// node too).
template <element T, communicator C, class Memory = host_memory>
class adasum_halving {
public:
    adasum_halving(const C& comm, const layer_layout& layout, const plan_options<recursive_halving>& options,
                   block range)
        : rank_(comm.rank()), layout_(layout),
          range_{range.begin, std::min(range.end, layout.total())}, fold_(comm.size()),
          plain_(cut_for(comm, options.pipeline)), piped_(cut_for(comm, options.pipeline, true)),
          window_(Memory::synchronous ? std::size_t(std::max(options.pipeline.window, 1)) : ~std::size_t(0))
    {
        const std::size_t count = range_.size();
        const int v = fold_.virtual_rank(rank_);
        std::size_t largest = fold_.absorbs(rank_) ? count : 0, widest = fold_.absorbs(rank_) ? widest_part({0, count}) : 0;
        std::size_t requests = 2 * plain_.messages<double>(3 * layout.layers());
        if (fold_.sits_out(rank_) || fold_.absorbs(rank_))
            requests = std::max(requests, plain_.messages<T>(count));
        if (v >= 0) {
            const std::vector<halving_step> halving = halving_schedule(fold_, v, count);
            for (std::size_t k = 0; k < halving.size(); ++k) {
                const int mask = 1 << k;
                step s{halving[k], (v & mask) == 0, peers_.size(), 0, false};
                for (int m = 1; m <= mask; m <<= 1)
                    peers_.push_back(fold_.real_rank(v ^ m));
                s.group_end = peers_.size();
                const std::size_t kept = widest_part(s.halves.keep);
                s.early = Memory::synchronous &&
                          (piped_.messages<T>(s.halves.keep.size()) > 1 || kept * sizeof(T) <= early_layer_bytes);
                steps_.push_back(s);
                largest = std::max(largest, s.halves.keep.size());
                widest = std::max(widest, kept);
                requests = std::max({requests,
                                     piped_.messages<T>(s.halves.send.size()) + piped_.messages<T>(s.halves.keep.size()),
                                     plain_.messages<T>(s.halves.send.size()) + plain_.messages<T>(s.halves.keep.size())});
            }
        }
        scratch_ = typename Memory::template buffer<T>(largest);
        triples_ = layer_triples<Memory>(layout.layers(), widest);
        received_ = typename Memory::template buffer<double>(3 * layout.layers());
        requests_.resize(requests);
    }

    std::size_t count() const noexcept { return range_.size(); }
    std::size_t scratch_bytes() const noexcept
    {
        return scratch_.size() * sizeof(T) + triples_.bytes() + received_.size() * sizeof(double);
    }

    template <class Complete>
    void run(C& comm, typename Memory::template span<T> data, int tag, Complete&& complete)
    {
        const Memory memory = Memory::of(data);
        const std::span<T> d = Memory::elements(data);
        memory.synchronize(); // the caller's queued work on data ends before the first send
        run_folded<T>(
            comm, fold_, tag, d, plain_, plain_, requests_,
            [&](int lower) { absorb(comm, memory, d, lower, tag, complete); },
            [&] {
                for (const step& s : steps_)
                    reduce_step(comm, memory, d, s, tag, complete);
                for (auto s = steps_.rbegin(); s != steps_.rend(); ++s)
                    exchange<T>(comm, tag, s->peer(), block_span(d, s->halves.keep), s->peer(),
                                block_span(d, s->halves.send), plain_, requests_);
            });
    }

private:
    // A layer that lies wholly in this rank's part has its triple complete once its last
    // segment has landed, and is combined then, while still in cache (`early`), when the
    // part comes in several segments or its layers are small (two operands within L1).
    // Otherwise all triples come before all combines, which measured faster for larger
    // layers (docs/results.md, "Adasum against Sum"). A memory whose kernels are queued
    // (a GPU) never combines early: that would wait for each layer's triple.
    static constexpr std::size_t early_layer_bytes = std::size_t(16) << 10;

    struct step {
        halving_step halves;
        bool low;                // this rank holds a (bit k of its virtual rank is 0)
        std::size_t group_begin; // its triple-sum partners, in peers_
        std::size_t group_end;
        bool early;              // combine whole layers as they land
        int peer() const noexcept { return halves.peer; }
    };

    // h = A(g(lower), g(rank)), the lower rank's vector first.
    template <class Complete>
    void absorb(C& comm, const Memory& memory, std::span<T> data, int lower_rank, int tag, Complete& complete)
    {
        const std::span<T> lower(scratch_.data(), data.size());
        exchange<T>(comm, tag, rank_, {}, lower_rank, lower, plain_, requests_);
        triples_.clear(memory);
        const block all{0, data.size()};
        for_each_layer_part(all, [&](std::size_t l, block b) {
            triples_.template add<T>(memory, l, block_span(lower, b), block_span(data, b));
        });
        memory.synchronize();
        complete(memory.view(triples_.sums()));
        triples_.fetch(memory);
        for_each_layer_part(all, [&](std::size_t l, block b) { apply_layer(memory, l, b, all, data, lower, false); });
        memory.synchronize();
    }

    template <class Complete>
    void reduce_step(C& comm, const Memory& memory, std::span<T> data, const step& s, int tag, Complete& complete)
    {
        const block keep = s.halves.keep;
        const std::span<T> theirs(scratch_.data(), keep.size());

        // Receive their half segment by segment, forming this rank's partial triples of
        // each segment as it lands (still in cache).
        triples_.clear(memory);
        exchange_segments<T>(comm, tag, s.peer(), std::span<const T>(block_span(data, s.halves.send)), s.peer(),
                             keep.size(), theirs, window_, piped_, requests_,
                             [&](std::size_t begin, std::span<T> landed) {
                                 const block seg{keep.begin + begin, keep.begin + begin + landed.size()};
                                 for_each_layer_part(seg, [&](std::size_t l, block b) {
                                     const std::span<const T> mine = block_span(data, b),
                                                              other = block_span(theirs, shift(b, keep.begin));
                                     if (s.low)
                                         triples_.template add<T>(memory, l, mine, other);
                                     else
                                         triples_.template add<T>(memory, l, other, mine);
                                     if (s.early && inside(l, keep) && b.end == layer_block(l).end) {
                                         triples_.fetch(memory, l);
                                         apply_layer(memory, l, layer_block(l), keep, data, theirs, s.low);
                                     }
                                 });
                             });
        memory.synchronize();
        for (std::size_t g = s.group_begin; g < s.group_end; ++g) {
            const std::span<double> received(received_.data(), received_.size());
            exchange<double>(comm, tag, peers_[g], triples_.sums(), peers_[g], received, plain_, requests_);
            memory.template combine<sum>(triples_.sums(), std::span<const double>(received));
            memory.synchronize();
        }
        complete(memory.view(triples_.sums()));
        triples_.fetch(memory);
        for_each_layer_part(keep, [&](std::size_t l, block b) {
            if (!s.early || !inside(l, keep))
                apply_layer(memory, l, b, keep, data, theirs, s.low);
        });
        memory.synchronize();
    }

    // Layer l's positions within this plan's range (for a layer that lies in it).
    block layer_block(std::size_t l) const noexcept
    {
        return {layout_.offset(l) - range_.begin, layout_.offset(l) + layout_.size(l) - range_.begin};
    }

    // Whether layer l lies wholly in r (positions within this plan's range).
    bool inside(std::size_t l, block r) const noexcept
    {
        return layout_.offset(l) >= range_.begin + r.begin && layout_.offset(l) + layout_.size(l) <= range_.begin + r.end;
    }

    // data = A(a, b) on p, a part of layer l within r, with layer l's fetched coefficients;
    // a is data when `mine_is_a`; theirs holds the partner's copy of r.
    void apply_layer(const Memory& memory, std::size_t l, block p, block r, std::span<T> data, std::span<T> theirs,
                     bool mine_is_a)
    {
        const adasum::coefficients c = triples_.coefficients(l);
        const std::span<T> mine = block_span(data, p);
        const std::span<const T> other = block_span(theirs, shift(p, r.begin));
        if (mine_is_a)
            memory.template scaled_add<T>(mine, c.a, mine, c.b, other);
        else
            memory.template scaled_add<T>(mine, c.a, other, c.b, mine);
    }

    // The largest part of a layer within r (positions within this plan's range).
    std::size_t widest_part(block r) const
    {
        std::size_t widest = 0;
        for_each_layer_part(r, [&](std::size_t, block b) { widest = std::max(widest, b.size()); });
        return widest;
    }

    // Calls f(layer, part) for every layer that meets r (positions within this plan's
    // range), in layer order, with part the intersection.
    template <class F>
    void for_each_layer_part(block r, F f) const
    {
        const std::size_t base = range_.begin;
        layout_.for_each_part(base + r.begin, base + r.end,
                              [&](std::size_t l, std::size_t b, std::size_t e) { f(l, block{b - base, e - base}); });
    }

    static block shift(block b, std::size_t by) noexcept { return {b.begin - by, b.end - by}; }

    int rank_;
    layer_layout layout_;
    block range_;
    folding fold_;
    message_cut plain_, piped_;
    std::size_t window_;
    std::vector<step> steps_;
    std::vector<int> peers_;
    layer_triples<Memory> triples_;
    typename Memory::template buffer<double> received_; // a partner's triples
    typename Memory::template buffer<T> scratch_;
    std::vector<typename C::request> requests_; // after the buffers: pending requests die first
};

// The Adasum plan of recursive_halving: the tree over the whole buffer.
template <element T, communicator C, class Memory = host_memory>
class adasum_recursive_halving_plan
    : public plan_types<recursive_halving, C, typename Memory::template span<T>> {
public:
    adasum_recursive_halving_plan(const C& comm, const layer_layout& layout,
                                  const plan_options<recursive_halving>& options)
        : tree_(comm, layout, options, {0, layout.total()})
    {
    }

    std::size_t count() const noexcept { return tree_.count(); }
    std::size_t scratch_bytes() const noexcept { return tree_.scratch_bytes(); }
    void run(C& comm, typename Memory::template span<T> data, int tag)
    {
        tree_.run(comm, data, tag, [](auto) {});
    }

private:
    adasum_halving<T, C, Memory> tree_;
};

} // namespace gradsync
