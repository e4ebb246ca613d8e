// Adasum over shared memory: the ring's chains (adasum_ring.hpp, docs/semantics.md) computed
// by ranks of one host from each other's data where it lies, with no message.
// Layer j's chain starts at rank s = j mod N: A(...A(A(g(s), g(s+1)), g(s+2))..., g(s+N-1)).
//
// Rank r owns block r (block_of) and runs the N-1 links of every layer's chain on it, reading
// block r of every rank's copy in place (the ring's all-to-all is not needed); a chain so far
// is kept where its first gradient lies, in that rank's copy, which nobody else reads there. At
// link k each rank writes its partial triples [acc.g, acc.acc, g.g] per layer into its
// exchange area (two, used in turn) and raises a flag; every rank then sums the N triples of
// each layer of its block in recursive doubling's order (the pairs of folding, then r XOR 1,
// r XOR 2, ...), a rank whose block the layer does not meet adding zero, and applies the
// coefficients. Only the layers of its own block are written and read: with many small
// layers the cache lines handed between cores, not the arithmetic, cost the most. Finally each rank writes its finished block into every
// peer's copy. N+1 flags per call: the data, one per link, the finished blocks.
//
// Cost (N ranks, M bytes per rank, L layers; alpha per flag handed between cores, beta per
// byte copied, gamma per byte combined; planner::shared_memory_adasum_cost, checked by
// tests/test_cost_formulas.cpp): per link one flag from each peer and 24 bytes per layer read
// from each; the links combine (N-1)/N M twice (triples, then the scaled add); the finished
// block is written into N-1 copies. A process's own buffer (not the plan's buffer(), nor in a
// shared_buffer) adds 2*(N-1)/N*M*beta, as shared_memory's Sum does.
// cost: (N+1)*(N-1)*alpha + (N-1)/N*M*beta + 2*(N-1)/N*M*gamma + (N-1)*(N-1)*24*L*beta
// Scratch: the triple sums (3 doubles per layer) and a part table per link; in the region,
// two exchange areas of 3 doubles per layer per rank.
//
// Preconditions: as shared_memory's (one host; host memory); any N, count and layout. The
// partial triples, their sums and the scaled adds are those of adasum_ring (the same kernels
// on the same parts, the sums in the same order, NaNs made canonical), so the result equals
// adasum_ring's bit for bit, and every rank ends with the same bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>
#include <vector>

#include <gradsync/algorithm/shared_memory.hpp>
#include <gradsync/comm/shared/peers.hpp>
#include <gradsync/kernels/adasum_part.hpp>
#include <gradsync/kernels/host.hpp>
#include <gradsync/plan/plan.hpp>
#include <gradsync/plan/schedule.hpp>

namespace gradsync {

template <element T, communicator C, class Memory = host_memory>
class adasum_shared_memory_plan : public plan_types<shared_memory, C, std::span<T>> {
    static_assert(std::is_same_v<Memory, host_memory>, "gradsync::adasum_shared_memory_plan runs in host memory");

    // A stretch of one layer in this rank's block, at link k: acc (the chain so far, in rank
    // a's copy) and g (rank g's gradient), the result written into rank out's copy.
    struct part {
        std::size_t layer, begin, size;
        int a, g, out;
    };

public:
    adasum_shared_memory_plan(C& comm, const layer_layout& layout, const plan_options<shared_memory>& options)
        : adasum_shared_memory_plan(comm, layout, options, sharing::required)
    {
    }
    // As shared_memory_plan's.
    adasum_shared_memory_plan(C& comm, const layer_layout& layout, const plan_options<shared_memory>& options,
                              sharing need)
        : layout_(layout), mine_(block_of(layout.total(), comm.size(), comm.rank())),
          peers_(comm, "gradsync::shared_memory (" + where(comm) + ")", layout.total() * sizeof(T),
                 2 * 3 * layout.layers() * sizeof(double), options.shared, need),
          links_(make_links()), met_(layers_met()), sums_(3 * layout.layers()),
          tree_(std::size_t(folding(comm.size()).pof2))
    {
    }

    adasum_shared_memory_plan(const adasum_shared_memory_plan&) = delete;
    adasum_shared_memory_plan& operator=(const adasum_shared_memory_plan&) = delete;

    std::size_t count() const noexcept { return layout_.total(); }
    std::size_t scratch_bytes() const noexcept
    {
        return peers_.slot_bytes() + sums_.size() * sizeof(double);
    }
    bool direct() const noexcept { return peers_.direct(); }
    bool usable() const noexcept { return peers_.usable(); }
    // This rank's slot of the region (shared_memory_plan::buffer()).
    std::span<T> buffer() const noexcept { return peers_.own_slot<T>(count()); }

    void run(C& comm, std::span<T> data, int tag)
    {
        const int n = peers_.size();
        if (n == 1 || count() == 0)
            return;
        const std::uint32_t steps = std::uint32_t(n) + 1, base = steps * (peers_.begin_call() - 1);
        T* const own = data.data();
        try {
            const bool copied = peers_.share(own, count(), mine_.begin, mine_.end);
            peers_.raise(base + 1);
            peers_.wait_all(comm, base + 1, "the data", tag);
            peers_.reading_all([&] {
                for (int k = 1; k < n; ++k)
                    link(comm, own, k, base + 1 + std::uint32_t(k), tag);
                for (int q = 1; q < n; ++q)
                    std::memcpy(peers_.copy_of((peers_.rank() + q) % n, own) + mine_.begin, own + mine_.begin,
                                mine_.size() * sizeof(T));
            });
            peers_.raise(base + steps);
            peers_.wait_all(comm, base + steps, "the finished block", tag);
            peers_.end_call();
            if (copied)
                peers_.take_back(own, count(), mine_.begin, mine_.end);
        } catch (...) {
            peers_.depart();
            throw;
        }
    }

private:
    // Link k of every chain on this rank's block: this rank's triples out, everyone's summed,
    // then acc = A(acc, g).
    void link(C& comm, T* own, int k, std::uint32_t step, int tag)
    {
        const std::size_t area = 3 * layout_.layers() * (step % 2);
        double* const mine = peers_.exchange_area<double>(peers_.rank()) + area;
        const layers met = met_[std::size_t(peers_.rank())];
        std::fill(mine + 3 * met.first, mine + 3 * met.end, 0.0);
        for (const part& p : links_[std::size_t(k - 1)]) {
            const kernels::dot_triple t = kernels::triple<T>(operand(p.a, own, p), operand(p.g, own, p));
            double* s = mine + 3 * p.layer;
            s[0] += t.ab;
            s[1] += t.aa;
            s[2] += t.bb;
        }
        peers_.raise(step);
        peers_.wait_all(comm, step, "the triples", tag);
        sum_triples(area);
        for (const part& p : links_[std::size_t(k - 1)]) {
            const double* s = sums_.data() + 3 * p.layer;
            const kernels::coefficient_pair c = kernels::adasum_coefficients({s[0], s[1], s[2]});
            kernels::scaled_add<T>(std::span<T>(peers_.copy_of(p.out, own) + p.begin, p.size), c.a,
                                   operand(p.a, own, p), c.b, operand(p.g, own, p));
        }
    }

    std::span<const T> operand(int q, T* own, const part& p) const noexcept
    {
        return {peers_.copy_of(q, own) + p.begin, p.size};
    }

    // sums_ of this rank's layers = every rank's triples at `area`, added as recursive doubling
    // adds them (adasum_ring's triple sum, whose ranks send zeros for the layers their blocks do
    // not meet): virtual rank v < rem holds ranks 2v and 2v+1, the others rank v + rem, then
    // pairs at distance 1, 2, ... Addition commutes, so the pairwise tree is that order's.
    void sum_triples(std::size_t area) noexcept
    {
        const folding f(peers_.size());
        const layers met = met_[std::size_t(peers_.rank())];
        for (std::size_t i = 3 * met.first; i < 3 * met.end; ++i) {
            auto at = [&](int r) {
                const layers theirs = met_[std::size_t(r)];
                return i >= 3 * theirs.first && i < 3 * theirs.end ? peers_.exchange_area<const double>(r)[area + i]
                                                                   : 0.0;
            };
            for (int v = 0; v < f.pof2; ++v)
                tree_[std::size_t(v)] = v < f.rem ? at(2 * v + 1) + at(2 * v) : at(v + f.rem);
            for (int width = 1; width < f.pof2; width *= 2)
                for (int v = 0; v < f.pof2; v += 2 * width)
                    tree_[std::size_t(v)] += tree_[std::size_t(v + width)];
            sums_[i] = tree_[0];
        }
        kernels::canonicalize_nan(std::span<double>(sums_).subspan(3 * met.first, 3 * (met.end - met.first)));
    }

    // The layers that meet each rank's block, [first, end) (empty where none does).
    struct layers {
        std::size_t first = 0, end = 0;
    };
    std::vector<layers> layers_met() const
    {
        const int n = peers_.size();
        std::vector<layers> met(static_cast<std::size_t>(n));
        for (int r = 0; r < n; ++r) {
            const block b = block_of(layout_.total(), n, r);
            layers& m = met[std::size_t(r)];
            layout_.for_each_part(b.begin, b.end, [&](std::size_t l, std::size_t, std::size_t) {
                if (m.end == 0)
                    m.first = l;
                m.end = l + 1;
            });
        }
        return met;
    }

    // Link k's parts: every layer that meets this rank's block, on the intersection.
    std::vector<std::vector<part>> make_links() const
    {
        const int n = peers_.size(), r = peers_.rank();
        std::vector<std::vector<part>> links;
        for (int k = 1; k < n; ++k) {
            std::vector<part> parts;
            layout_.for_each_part(mine_.begin, mine_.end, [&](std::size_t l, std::size_t b, std::size_t e) {
                const int s = int(l % std::size_t(n));
                parts.push_back({l, b, e - b, s, (s + k) % n, k + 1 == n ? r : s});
            });
            links.push_back(std::move(parts));
        }
        return links;
    }

    layer_layout layout_;
    block mine_;
    shared_peers peers_;
    std::vector<std::vector<part>> links_;
    std::vector<layers> met_;
    std::vector<double> sums_;
    std::vector<double> tree_;
};

} // namespace gradsync
