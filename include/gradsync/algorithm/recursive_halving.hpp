// Recursive halving (Rabenseifner): reduce-scatter by vector halving with distance
// doubling, then allgather by vector doubling with distance halving.
//
// Cost (P = largest power of two <= N, F = 1 when N is not a power of two, else 0, M bytes
// per rank, alpha per message, beta per byte sent, gamma per byte combined;
// planner::recursive_halving_cost, checked by tests/test_cost_formulas.cpp): log2(P) steps
// each way over the P ranks, plus F times the folding (MPICH's: rank 2i hands its vector
// to rank 2i+1 and gets the result back).
// cost: 2*log2(P)*alpha + 2*(P-1)/P*M*beta + (P-1)/P*M*gamma + F*(2*alpha + 2*M*beta + M*gamma)
// In a memory space (Memory, memory/host_memory.hpp) the same messages carry the same bits, gamma is a
// kernel's, and (log2(P)+2)*sigma is added for the space synchronizations (before the first
// send, after each step's combines and after the finish); scratch is then half the vector
// (the whole vector on a rank that absorbs a folded neighbour).
//
// Preconditions: any N >= 1 and any count (odd, zero, smaller than N); blocks may be empty.
// Each element is combined and finished (e.g. averaged) by exactly one rank and then
// copied, so every rank ends with bitwise identical data, whatever memory each rank's plan
// uses.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <gradsync/core/codes.hpp>
#include <gradsync/plan/plan.hpp>

namespace gradsync {

struct recursive_halving {
    static constexpr std::uint32_t code = codes::recursive_halving;
    static constexpr const char* name = "recursive_halving";
};

// Policy: an elementwise policy that Memory combines.
template <element T, communicator C, class Policy, class Memory = host_memory>
class recursive_halving_plan : public plan_types<recursive_halving, C, typename Memory::template span<T>> {
public:
    recursive_halving_plan(const C& comm, const layer_layout& layout, const plan_options<recursive_halving>& options)
        : rank_(comm.rank()), size_(comm.size()), count_(layout.total()), fold_(size_),
          plain_(cut_for(comm, options.pipeline)), piped_(cut_for(comm, options.pipeline, true)),
          steps_(fold_.sits_out(rank_) ? std::vector<halving_step>()
                                       : halving_schedule(fold_, fold_.virtual_rank(rank_), count_)),
          scratch_(scratch_elems<T, Memory>(largest_combined(), options.pipeline))
    {
        std::size_t requests = 0;
        if (fold_.sits_out(rank_) || fold_.absorbs(rank_))
            requests = std::max(piped_.messages<T>(count_), plain_.messages<T>(count_));
        for (const halving_step& s : steps_)
            requests = std::max({requests, piped_.messages<T>(s.send.size()) + piped_.messages<T>(s.keep.size()),
                                 plain_.messages<T>(s.send.size()) + plain_.messages<T>(s.keep.size())});
        requests_.resize(requests);
    }

    std::size_t count() const noexcept { return count_; }
    std::size_t scratch_bytes() const noexcept { return scratch_.size() * sizeof(T); }

    void run(C& comm, typename Memory::template span<T> data, int tag)
    {
        const Memory memory = Memory::of(data);
        const std::span<T> d = Memory::elements(data), scratch(scratch_.data(), scratch_.size());
        memory.synchronize(); // the caller's queued work on data ends before the first send
        run_folded<T>(
            comm, fold_, tag, d, piped_, plain_, requests_,
            [&](int lower) {
                exchange_combine<Policy, T>(comm, tag, rank_, {}, lower, d, scratch, piped_, requests_, memory);
            },
            [&] {
                for (const halving_step& s : steps_)
                    exchange_combine<Policy, T>(comm, tag, s.peer, block_span(d, s.send), s.peer,
                                                block_span(d, s.keep), scratch, piped_, requests_, memory);
                memory.template finish<Policy>(steps_.empty() ? d : block_span(d, steps_.back().keep), size_);
                memory.synchronize();
                for (auto s = steps_.rbegin(); s != steps_.rend(); ++s)
                    exchange<T>(comm, tag, s->peer, block_span(d, s->keep), s->peer, block_span(d, s->send), plain_,
                                requests_);
            });
    }

private:
    // The largest block this rank combines into: the whole vector where it absorbs a neighbour.
    std::size_t largest_combined() const noexcept
    {
        std::size_t largest = fold_.absorbs(rank_) ? count_ : 0;
        for (const halving_step& s : steps_)
            largest = std::max(largest, s.keep.size());
        return largest;
    }

    int rank_, size_;
    std::size_t count_;
    folding fold_;
    message_cut plain_, piped_;
    std::vector<halving_step> steps_;
    typename Memory::template buffer<T> scratch_;
    std::vector<typename C::request> requests_; // after scratch_: pending requests die first
};

} // namespace gradsync
