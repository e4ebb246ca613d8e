// Adasum by recursive doubling, the Adasum plan of the recursive_doubling algorithm: the latency
// path for small vectors. Partners r and r XOR 2^k swap whole vectors and both compute
// A(a, b) per layer from whole-layer triples, a being the vector of the partner whose bit k
// is 0, so no triple exchange is needed. Folding as in recursive_doubling, so the tree is
// the one recursive_halving computes.
//
// Cost (P = largest power of two <= N, F = 1 when N is not a power of two, else 0, M bytes
// per rank, alpha per message, beta per byte sent, gamma per byte combined;
// planner::recursive_doubling_adasum_cost, checked by tests/test_cost_formulas.cpp): Sum's
// recursive doubling with folding, gamma counted twice (the triples, then the scaled add).
// cost: log2(P)*(alpha + M*beta + 2*M*gamma) + F*(2*alpha + 2*M*beta + 2*M*gamma)
// In a memory space (Memory, memory/host_memory.hpp) the messages are the same, gamma is the
// kernels', and each exchange adds one space synchronization (sigma) and D + 2 kernels
// (plan/layer_triples.hpp; D the depth of the triple's tree for M bytes), however many
// layers there are.
//
// Preconditions: any N, count and layout; scratch holds the whole vector and the layer
// triples (layer_triples.hpp). Both partners run the same kernels on the same (a, b), whose
// summation order depends only on the length (and the memory: the agreement check makes it
// the same on every rank), so they compute the same bits; NaNs are made canonical at the
// end, as their payloads may differ between partners.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <gradsync/algorithm/recursive_doubling.hpp>
#include <gradsync/plan/layer_triples.hpp>
#include <gradsync/plan/plan.hpp>
#include <gradsync/policy/adasum.hpp>

namespace gradsync {

template <element T, communicator C, class Memory = host_memory>
class adasum_recursive_doubling_plan
    : public plan_types<recursive_doubling, C, typename Memory::template span<T>> {
    using table = typename layer_triples<Memory>::table;

public:
    adasum_recursive_doubling_plan(const C& comm, const layer_layout& layout,
                                   const plan_options<recursive_doubling>& options)
        : rank_(comm.rank()), fold_(comm.size()), layout_(layout), cut_(cut_for(comm, options.pipeline)),
          low_(parts(layout, true)), high_(parts(layout, false)),
          triples_(layout.layers(), std::max(low_.workspace(), high_.workspace())), scratch_(layout.total()),
          requests_(2 * cut_.messages<T>(layout.total()))
    {
        const int v = fold_.virtual_rank(rank_);
        for (int mask = 1; v >= 0 && mask < fold_.pof2; mask <<= 1)
            partners_.push_back({fold_.real_rank(v ^ mask), (v & mask) == 0});
    }

    std::size_t count() const noexcept { return layout_.total(); }
    std::size_t scratch_bytes() const noexcept { return scratch_.size() * sizeof(T) + triples_.bytes(); }

    void run(C& comm, typename Memory::template span<T> data, int tag)
    {
        const Memory memory = Memory::of(data);
        const std::span<T> d = Memory::elements(data), theirs(scratch_.data(), scratch_.size());
        memory.synchronize(); // the caller's queued work on data ends before the first send
        run_folded<T>(
            comm, fold_, tag, d, cut_, cut_, requests_,
            [&](int lower) {
                exchange<T>(comm, tag, rank_, {}, lower, theirs, cut_, requests_);
                combine(memory, high_, d, theirs);
            },
            [&] {
                for (const partner& p : partners_) {
                    exchange<T>(comm, tag, p.rank, d, p.rank, theirs, cut_, requests_);
                    combine(memory, p.low ? low_ : high_, d, theirs);
                }
                memory.canonicalize_nan(d);
                memory.synchronize();
            });
    }

private:
    struct partner {
        int rank;
        bool low; // this rank's vector is a
    };

    // data = A(a, b) per layer, a and b data and theirs in t's order: every layer's triple,
    // then every scaled add, each over the whole table at once.
    void combine(const Memory& memory, const table& t, std::span<T> data, std::span<T> theirs)
    {
        const kernels::adasum_operands<T> x{data.data(), theirs.data()};
        triples_.clear(memory);
        triples_.template add<T>(memory, t, 0, t.size(), x);
        triples_.template apply<T>(memory, t, 0, t.size(), x);
        memory.synchronize();
    }

    // Every layer whole, written to data; a is data (low) or the partner's copy.
    static table parts(const layer_layout& layout, bool low)
    {
        std::vector<kernels::adasum_part> p;
        const std::uint32_t a = low ? kernels::in_data : kernels::in_scratch;
        for (std::size_t l = 0; l < layout.layers(); ++l)
            if (layout.size(l))
                p.push_back({l, layout.offset(l), layout.offset(l), layout.offset(l), layout.size(l), a,
                             a ^ 1u, kernels::in_data});
        return table(p);
    }

    int rank_;
    folding fold_;
    layer_layout layout_;
    message_cut cut_;
    std::vector<partner> partners_;
    table low_, high_; // the partner's copy as b (this rank holds a), and as a
    layer_triples<Memory> triples_;
    typename Memory::template buffer<T> scratch_;
    std::vector<typename C::request> requests_; // after scratch_: pending requests die first
};

} // namespace gradsync
