// Recursive halving (Rabenseifner): reduce-scatter by vector halving with distance
// doubling, then allgather by vector doubling with distance halving.
//
// Cost (P = largest power of two <= N, M bytes per rank, alpha per message, beta per byte,
// gamma per byte combined):
//   2*log2(P)*alpha + 2*(P-1)/P*M*beta + (P-1)/P*M*gamma
// plus, when N is not a power of two, 2*alpha + 2*M*beta + M*gamma for the folding
// (MPICH's: rank 2i hands its vector to rank 2i+1 and gets the result back).
//
// Preconditions: any N >= 1 and any count (odd, zero, smaller than N); blocks may be empty.
// Each element is combined and finished (e.g. averaged) by exactly one rank and then
// copied, so every rank ends with bitwise identical data.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include <gradsync/algorithm/adasum_recursive_halving.hpp>
#include <gradsync/algorithm/exchange.hpp>
#include <gradsync/algorithm/schedule.hpp>
#include <gradsync/communicator.hpp>
#include <gradsync/layout.hpp>
#include <gradsync/policy/adasum.hpp>
#include <gradsync/types.hpp>

namespace gradsync {

template <element T, communicator C>
class recursive_halving_plan;

struct recursive_halving {
    static constexpr std::uint32_t code = 2;
    static constexpr const char* name = "recursive_halving";
    // The plan for element type T over communicator C with policy P.
    template <element T, communicator C, class P>
    using plan = std::conditional_t<is_adasum<P>, adasum_recursive_halving_plan<T, C>, recursive_halving_plan<T, C>>;
};

template <element T, communicator C>
class recursive_halving_plan {
public:
    recursive_halving_plan(const C& comm, const layer_layout& layout, const recursive_halving&, const pipeline_options& pipe)
        : rank_(comm.rank()), size_(comm.size()), count_(layout.total()), fold_(size_), plain_{eager_limit(comm), 0},
          piped_{eager_limit(comm), pipe.segment_bytes}
    {
        const int v = fold_.virtual_rank(rank_);
        if (v >= 0)
            steps_ = halving_schedule(fold_, v, count_);
        std::size_t largest = fold_.absorbs(rank_) ? count_ : 0;
        std::size_t requests = 0;
        if (fold_.sits_out(rank_) || fold_.absorbs(rank_))
            requests = std::max(piped_.messages<T>(count_), plain_.messages<T>(count_));
        for (const halving_step& s : steps_) {
            largest = std::max(largest, s.keep.size());
            requests = std::max({requests, piped_.messages<T>(s.send.size()) + piped_.messages<T>(s.keep.size()),
                                 plain_.messages<T>(s.send.size()) + plain_.messages<T>(s.keep.size())});
        }
        scratch_.resize(scratch_elems<T>(largest, pipe));
        requests_.resize(requests);
    }

    std::size_t count() const noexcept { return count_; }

    template <class Policy>
    void run(C& comm, std::span<T> data, int tag)
    {
        const std::span<T> none;
        if (fold_.sits_out(rank_))
            return sit_out<T>(comm, tag, data, piped_, plain_, requests_);
        if (fold_.absorbs(rank_))
            exchange_combine<Policy, T>(comm, tag, rank_, none, rank_ - 1, data, scratch_, piped_, requests_);
        for (const halving_step& s : steps_)
            exchange_combine<Policy, T>(comm, tag, s.peer, part(data, s.send), s.peer, part(data, s.keep), scratch_,
                                        piped_, requests_);
        Policy::template finish<T>(steps_.empty() ? data : part(data, steps_.back().keep), size_);
        for (auto s = steps_.rbegin(); s != steps_.rend(); ++s)
            exchange<T>(comm, tag, s->peer, part(data, s->keep), s->peer, part(data, s->send), plain_, requests_);
        if (fold_.absorbs(rank_))
            exchange<T>(comm, tag, rank_ - 1, data, rank_, none, plain_, requests_);
    }

private:
    static std::span<T> part(std::span<T> data, block b) { return data.subspan(b.begin, b.size()); }

    int rank_, size_;
    std::size_t count_;
    folding fold_;
    message_cut plain_, piped_;
    std::vector<halving_step> steps_;
    std::vector<T> scratch_;
    std::vector<typename C::request> requests_; // after scratch_: pending requests die first
};

} // namespace gradsync
