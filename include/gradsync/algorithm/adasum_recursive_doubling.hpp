// Adasum by recursive doubling, the Adasum plan of the recursive_doubling tag: the latency
// path for small vectors. Partners r and r XOR 2^k swap whole vectors and both compute
// A(a, b) per layer from whole-layer triples, a being the vector of the partner whose bit k
// is 0, so no triple exchange is needed. Folding as in recursive_doubling, so the tree is
// the one recursive_halving computes.
//
// Cost (P = largest power of two <= N, M bytes per rank, gamma' per byte of triple plus
// scaled add):  log2(P)*(alpha + M*beta + M*gamma')
// plus 2*alpha + 2*M*beta + M*gamma' of folding when N is not a power of two.
//
// Preconditions: any N, count and layout; scratch holds the whole vector. Both partners run
// the same kernels on the same (a, b), whose summation order depends only on the length, so
// they compute the same bits; NaNs are made canonical at the end, as their payloads may
// differ between partners.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include <gradsync/algorithm/exchange.hpp>
#include <gradsync/algorithm/schedule.hpp>
#include <gradsync/communicator.hpp>
#include <gradsync/kernels/host_adasum.hpp>
#include <gradsync/layout.hpp>
#include <gradsync/policy/adasum.hpp>
#include <gradsync/types.hpp>

namespace gradsync {

template <element T, communicator C>
class adasum_recursive_doubling_plan {
public:
    template <class Tag>
    adasum_recursive_doubling_plan(const C& comm, const layer_layout& layout, const Tag&, const pipeline_options&)
        : rank_(comm.rank()), fold_(comm.size()), layout_(layout), cut_{eager_limit(comm), 0},
          scratch_(layout.total()), requests_(2 * cut_.messages<T>(layout.total()))
    {
        const int v = fold_.virtual_rank(rank_);
        for (int mask = 1; v >= 0 && mask < fold_.pof2; mask <<= 1)
            partners_.push_back({fold_.real_rank(v ^ mask), (v & mask) == 0});
    }

    std::size_t count() const noexcept { return layout_.total(); }

    template <class Policy>
    void run(C& comm, std::span<T> data, int tag)
    {
        const std::span<T> none, theirs(scratch_);
        if (fold_.sits_out(rank_))
            return sit_out<T>(comm, tag, data, cut_, cut_, requests_);
        if (fold_.absorbs(rank_)) {
            exchange<T>(comm, tag, rank_, none, rank_ - 1, theirs, cut_, requests_);
            combine(data, theirs, data);
        }
        for (const partner& p : partners_) {
            exchange<T>(comm, tag, p.rank, data, p.rank, theirs, cut_, requests_);
            if (p.low)
                combine(data, data, theirs);
            else
                combine(data, theirs, data);
        }
        kernels::canonicalize_nan(data);
        if (fold_.absorbs(rank_))
            exchange<T>(comm, tag, rank_ - 1, data, rank_, none, cut_, requests_);
    }

private:
    struct partner {
        int rank;
        bool low; // this rank's vector is a
    };

    void combine(std::span<T> out, std::span<const T> a, std::span<const T> b) const
    {
        for (std::size_t l = 0; l < layout_.layers(); ++l) {
            const std::size_t o = layout_.offset(l), n = layout_.size(l);
            adasum::combine_layer<T>(out.subspan(o, n), a.subspan(o, n), b.subspan(o, n));
        }
    }

    int rank_;
    folding fold_;
    layer_layout layout_;
    message_cut cut_;
    std::vector<partner> partners_;
    std::vector<T> scratch_;
    std::vector<typename C::request> requests_; // after scratch_: pending requests die first
};

} // namespace gradsync
