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
// In a memory space (Memory, memory/host_memory.hpp) the messages are the same, gamma is the
// kernels', and step s adds s + 3 space synchronizations (sigma: before each send of the
// triples, and before the data moves on) and D + s + 3 kernels (plan/layer_triples.hpp;
// D the depth of the triple's tree for the step's block), however many layers there are.
//
// Each step's work is a part table made with the plan: the layers' stretches within the
// kept half, cut where the receive's segments end. In host memory this rank's partial
// triples of a segment are formed as soon as it lands. A layer that lies wholly in this
// rank's part needs no other rank's triple, so (when the part comes in several segments or
// its layers are small) it is combined as soon as its last segment lands, while still in
// cache; only the layers cut by a halving (at most two per rank and step) wait for the
// group's triple sum. A memory that queues its kernels forms all the step's triples at once
// when the half has landed, and combines every layer after the group's sum.
//
// Preconditions: any N and count, any layout (empty and one-element layers included). Each
// element is computed by one rank and then copied, and the group's triple sums are formed
// in the same pairwise order on every member, so all ranks end with identical bits.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include <gradsync/algorithm/recursive_halving.hpp>
#include <gradsync/plan/layer_triples.hpp>
#include <gradsync/plan/plan.hpp>
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
    using table = typename layer_triples<Memory>::table;

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
        std::size_t largest = fold_.absorbs(rank_) ? count : 0, workspace = 0;
        std::size_t requests = 2 * plain_.messages<double>(3 * layout.layers());
        if (fold_.sits_out(rank_) || fold_.absorbs(rank_))
            requests = std::max(requests, plain_.messages<T>(count));
        if (fold_.absorbs(rank_)) {
            std::vector<kernels::adasum_part> parts;
            for_each_layer_part({0, count}, [&](std::size_t l, block b) {
                parts.push_back({l, b.begin, b.begin, b.begin, b.size(), kernels::in_scratch, kernels::in_data,
                                 kernels::in_data});
            });
            absorbed_ = table(parts);
            workspace = absorbed_.workspace();
        }
        if (v >= 0) {
            const std::vector<halving_step> halving = halving_schedule(fold_, v, count);
            for (std::size_t k = 0; k < halving.size(); ++k) {
                const int mask = 1 << k;
                step s;
                s.halves = halving[k];
                s.low = (v & mask) == 0;
                s.group_begin = peers_.size();
                for (int m = 1; m <= mask; m <<= 1)
                    peers_.push_back(fold_.real_rank(v ^ m));
                s.group_end = peers_.size();
                const block keep = s.halves.keep;
                s.segment = piped_.elems<T>(keep.size());
                const bool early =
                    Memory::synchronous &&
                    (piped_.messages<T>(keep.size()) > 1 || widest_part(keep) * sizeof(T) <= early_layer_bytes);
                plan_parts(s, early);
                workspace = std::max(workspace, s.parts.workspace());
                steps_.push_back(std::move(s));
                largest = std::max(largest, keep.size());
                requests = std::max({requests,
                                     piped_.messages<T>(halving[k].send.size()) + piped_.messages<T>(keep.size()),
                                     plain_.messages<T>(halving[k].send.size()) + plain_.messages<T>(keep.size())});
            }
        }
        scratch_ = typename Memory::template buffer<T>(largest);
        triples_ = layer_triples<Memory>(layout.layers(), workspace);
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

    // Parts of a step's table applied as soon as the receive's segment `after` has landed.
    struct early_run {
        block parts;
        std::size_t after;
    };

    struct step {
        halving_step halves{};
        bool low = false;            // this rank holds a (bit k of its virtual rank is 0)
        std::size_t group_begin = 0; // its triple-sum partners, in peers_
        std::size_t group_end = 0;
        std::size_t segment = 0; // elements per segment of the receive
        table parts;             // the layers' stretches within keep, cut at the segments
        std::vector<std::size_t> segment_end; // parts of segment j end at segment_end[j]
        std::vector<early_run> early;         // by segment
        std::vector<block> late;              // parts applied after the group's sum
        int peer() const noexcept { return halves.peer; }
    };

    // Step s's part table and when its parts are applied: with `early`, each layer that
    // lies wholly in keep once its last segment has landed, the rest together at the end.
    void plan_parts(step& s, bool early) const
    {
        const block keep = s.halves.keep;
        std::vector<kernels::adasum_part> parts;
        for (std::size_t begin = keep.begin; begin < keep.end; begin += s.segment) {
            for_each_layer_part({begin, std::min(keep.end, begin + s.segment)}, [&](std::size_t l, block b) {
                const std::size_t at = b.begin - keep.begin; // in the partner's half, in scratch
                if (s.low)
                    parts.push_back({l, b.begin, at, b.begin, b.size(), kernels::in_data, kernels::in_scratch,
                                     kernels::in_data});
                else
                    parts.push_back({l, at, b.begin, b.begin, b.size(), kernels::in_scratch, kernels::in_data,
                                     kernels::in_data});
            });
            s.segment_end.push_back(parts.size());
        }
        for (std::size_t first = 0, j = 0; first < parts.size();) {
            std::size_t last = first + 1;
            while (last < parts.size() && parts[last].layer == parts[first].layer)
                ++last;
            while (s.segment_end[j] < last)
                ++j;
            if (early && inside(parts[first].layer, keep))
                s.early.push_back({{first, last}, j});
            else if (!s.late.empty() && s.late.back().end == first)
                s.late.back().end = last;
            else
                s.late.push_back({first, last});
            first = last;
        }
        s.parts = table(parts);
    }

    // h = A(g(lower), g(rank)), the lower rank's vector first.
    template <class Complete>
    void absorb(C& comm, const Memory& memory, std::span<T> data, int lower_rank, int tag, Complete& complete)
    {
        exchange<T>(comm, tag, rank_, {}, lower_rank, std::span<T>(scratch_.data(), data.size()), plain_, requests_);
        const kernels::adasum_operands<T> x{data.data(), scratch_.data()};
        triples_.clear(memory);
        triples_.template add<T>(memory, absorbed_, 0, absorbed_.size(), x);
        memory.synchronize();
        complete(memory.view(triples_.sums()));
        triples_.template apply<T>(memory, absorbed_, 0, absorbed_.size(), x);
        memory.synchronize();
    }

    template <class Complete>
    void reduce_step(C& comm, const Memory& memory, std::span<T> data, const step& s, int tag, Complete& complete)
    {
        const block keep = s.halves.keep;
        const kernels::adasum_operands<T> x{data.data(), scratch_.data()};
        triples_.clear(memory);
        std::size_t next_early = 0;
        exchange_segments<T>(comm, tag, s.peer(), std::span<const T>(block_span(data, s.halves.send)), s.peer(),
                             keep.size(), std::span<T>(scratch_.data(), keep.size()), window_, piped_, requests_,
                             [&](std::size_t begin, std::span<T>) {
                                 if constexpr (Memory::synchronous) {
                                     const std::size_t j = begin / s.segment;
                                     triples_.template add<T>(memory, s.parts, j ? s.segment_end[j - 1] : 0,
                                                              s.segment_end[j], x);
                                     for (; next_early < s.early.size() && s.early[next_early].after == j; ++next_early)
                                         triples_.template apply<T>(memory, s.parts, s.early[next_early].parts.begin,
                                                                    s.early[next_early].parts.end, x);
                                 }
                             });
        if constexpr (!Memory::synchronous)
            triples_.template add<T>(memory, s.parts, 0, s.parts.size(), x);
        memory.synchronize();
        for (std::size_t g = s.group_begin; g < s.group_end; ++g) {
            const std::span<double> received(received_.data(), received_.size());
            exchange<double>(comm, tag, peers_[g], triples_.sums(), peers_[g], received, plain_, requests_);
            memory.template combine<sum>(triples_.sums(), std::span<const double>(received));
            memory.synchronize();
        }
        complete(memory.view(triples_.sums()));
        for (const block& r : s.late)
            triples_.template apply<T>(memory, s.parts, r.begin, r.end, x);
        memory.synchronize();
    }

    // Whether layer l lies wholly in r (positions within this plan's range).
    bool inside(std::size_t l, block r) const noexcept
    {
        return layout_.offset(l) >= range_.begin + r.begin && layout_.offset(l) + layout_.size(l) <= range_.begin + r.end;
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

    int rank_;
    layer_layout layout_;
    block range_;
    folding fold_;
    message_cut plain_, piped_;
    std::size_t window_;
    std::vector<step> steps_;
    std::vector<int> peers_;
    table absorbed_; // the lower rank's vector (in scratch) as a, when this rank absorbs one
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
