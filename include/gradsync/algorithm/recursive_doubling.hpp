// Recursive doubling: log2(P) rounds in which partners r and r XOR 2^k swap whole vectors
// and both combine. The latency path for small messages.
//
// Cost (P = largest power of two <= N, F = 1 when N is not a power of two, else 0, M bytes
// per rank, alpha per message, beta per byte sent, gamma per byte combined;
// planner::recursive_doubling_cost, checked by tests/test_cost_formulas.cpp): log2(P)
// whole-vector swaps and combines, plus F times the folding of recursive_halving.
// cost: log2(P)*(alpha + M*beta + M*gamma) + F*(2*alpha + 2*M*beta + M*gamma)
// Messages are cut to the transport's eager limit (a block of up to 16 eager messages goes as equal pieces),
// since one rendezvous costs several eager sends on shared memory. In a memory space
// (Memory, memory/host_memory.hpp) the same messages carry the same bits, gamma is a kernel's,
// and each round adds sigma, a space synchronization.
//
// Preconditions: any N >= 1 and any count; scratch holds the whole vector (in the plan's
// memory), so use it for small messages (automatic does). Partners compute mine+theirs and
// theirs+mine, equal for commutative policies except in NaN payloads, so NaNs are made
// canonical at the end and every rank ends with bitwise identical data, whatever memory
// each rank's plan uses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <gradsync/core/codes.hpp>
#include <gradsync/plan/plan.hpp>

namespace gradsync {

struct recursive_doubling {
    static constexpr std::uint32_t code = codes::recursive_doubling;
    static constexpr const char* name = "recursive_doubling";
};

// Policy: an elementwise policy that Memory combines.
template <element T, communicator C, class Policy, class Memory = host_memory>
class recursive_doubling_plan : public plan_types<recursive_doubling, C, typename Memory::template span<T>> {
public:
    recursive_doubling_plan(const C& comm, const layer_layout& layout, const plan_options<recursive_doubling>& options)
        : rank_(comm.rank()), size_(comm.size()), count_(layout.total()), fold_(size_),
          cut_(cut_for(comm, options.pipeline)), scratch_(count_), requests_(2 * cut_.messages<T>(count_))
    {
        const int v = fold_.virtual_rank(rank_);
        for (int mask = 1; v >= 0 && mask < fold_.pof2; mask <<= 1)
            peers_.push_back(fold_.real_rank(v ^ mask));
    }

    std::size_t count() const noexcept { return count_; }
    std::size_t scratch_bytes() const noexcept { return scratch_.size() * sizeof(T); }

    void run(C& comm, typename Memory::template span<T> data, int tag)
    {
        const Memory memory = Memory::of(data);
        const std::span<T> d = Memory::elements(data), theirs(scratch_.data(), count_);
        auto combine_from = [&](int peer, std::span<const T> out) {
            exchange<T>(comm, tag, peer, out, peer, theirs, cut_, requests_);
            memory.template combine<Policy>(d, std::span<const T>(theirs));
            memory.synchronize();
        };
        memory.synchronize(); // the caller's queued work on data ends before the first send
        run_folded<T>(
            comm, fold_, tag, d, cut_, cut_, requests_, [&](int lower) { combine_from(lower, {}); },
            [&] {
                for (int peer : peers_)
                    combine_from(peer, d);
                memory.template finish<Policy>(d, size_);
                memory.canonicalize_nan(d);
                memory.synchronize();
            });
    }

private:
    int rank_, size_;
    std::size_t count_;
    folding fold_;
    message_cut cut_;
    std::vector<int> peers_;
    typename Memory::template buffer<T> scratch_;
    std::vector<typename C::request> requests_; // after scratch_: pending requests die first
};

} // namespace gradsync
