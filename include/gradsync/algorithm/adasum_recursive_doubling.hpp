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
//
// Preconditions: any N, count and layout; scratch holds the whole vector. Both partners run
// the same kernels on the same (a, b), whose summation order depends only on the length, so
// they compute the same bits; NaNs are made canonical at the end, as their payloads may
// differ between partners.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include <gradsync/algorithm/recursive_doubling.hpp>
#include <gradsync/kernels/host_adasum.hpp>
#include <gradsync/plan.hpp>
#include <gradsync/policy/adasum.hpp>

namespace gradsync {

template <element T, communicator C>
class adasum_recursive_doubling_plan : public plan_types<recursive_doubling, C, std::span<T>> {
public:
    adasum_recursive_doubling_plan(const C& comm, const layer_layout& layout,
                                   const plan_options<recursive_doubling>& options)
        : rank_(comm.rank()), tag_(options.tag), fold_(comm.size()), layout_(layout), cut_{eager_limit(comm), 0},
          scratch_(layout.total()), requests_(2 * cut_.messages<T>(layout.total()))
    {
        const int v = fold_.virtual_rank(rank_);
        for (int mask = 1; v >= 0 && mask < fold_.pof2; mask <<= 1)
            partners_.push_back({fold_.real_rank(v ^ mask), (v & mask) == 0});
    }

    std::size_t count() const noexcept { return layout_.total(); }
    std::size_t scratch_bytes() const noexcept { return scratch_.size() * sizeof(T); }

    void run(C& comm, std::span<T> data)
    {
        const std::span<T> theirs(scratch_);
        run_folded<T>(
            comm, fold_, tag_, data, cut_, cut_, requests_,
            [&](int lower) {
                exchange<T>(comm, tag_, rank_, {}, lower, theirs, cut_, requests_);
                combine(data, theirs, data);
            },
            [&] {
                for (const partner& p : partners_) {
                    exchange<T>(comm, tag_, p.rank, data, p.rank, theirs, cut_, requests_);
                    if (p.low)
                        combine(data, data, theirs);
                    else
                        combine(data, theirs, data);
                }
                kernels::canonicalize_nan(data);
            });
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

    int rank_, tag_;
    folding fold_;
    layer_layout layout_;
    message_cut cut_;
    std::vector<partner> partners_;
    std::vector<T> scratch_;
    std::vector<typename C::request> requests_; // after scratch_: pending requests die first
};

} // namespace gradsync
