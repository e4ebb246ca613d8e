// Recursive doubling: log2(P) rounds in which partners r and r XOR 2^k swap whole vectors
// and both combine. The latency path for small messages.
//
// Cost (P = largest power of two <= N, M bytes per rank):
//   log2(P)*(alpha + M*beta + M*gamma)
// plus 2*alpha + 2*M*beta + M*gamma of folding when N is not a power of two. Messages are cut
// to the transport's eager limit (a block of up to 16 eager messages goes as equal pieces),
// since one rendezvous costs several eager sends on shared memory. In a memory space
// (Memory, algorithm/memory.hpp) the same messages carry the same bits, gamma is a kernel's,
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
#include <type_traits>
#include <vector>

#include <gradsync/algorithm/adasum_recursive_doubling.hpp>
#include <gradsync/algorithm/exchange.hpp>
#include <gradsync/algorithm/memory.hpp>
#include <gradsync/algorithm/schedule.hpp>
#include <gradsync/communicator.hpp>
#include <gradsync/layout.hpp>
#include <gradsync/policy/adasum.hpp>
#include <gradsync/types.hpp>

namespace gradsync {

template <element T, communicator C, class Memory = host_memory>
class recursive_doubling_plan;

struct recursive_doubling {
    static constexpr std::uint32_t code = 3;
    static constexpr const char* name = "recursive_doubling";
    // The plan for element type T over communicator C with policy P, the vector in Memory
    // (Adasum's plan: host memory only).
    template <element T, communicator C, class P, class Memory = host_memory>
    using plan = std::conditional_t<is_adasum<P>, adasum_recursive_doubling_plan<T, C>,
                                    recursive_doubling_plan<T, C, Memory>>;
};

template <element T, communicator C, class Memory>
class recursive_doubling_plan {
public:
    recursive_doubling_plan(const C& comm, const layer_layout& layout, const recursive_doubling&, const pipeline_options&)
        : rank_(comm.rank()), size_(comm.size()), count_(layout.total()), fold_(size_), cut_{eager_limit(comm), 0},
          scratch_(count_), requests_(2 * cut_.messages<T>(count_))
    {
        const int v = fold_.virtual_rank(rank_);
        for (int mask = 1; v >= 0 && mask < fold_.pof2; mask <<= 1)
            peers_.push_back(fold_.real_rank(v ^ mask));
    }

    std::size_t count() const noexcept { return count_; }

    template <class Policy>
    void run(C& comm, typename Memory::template span<T> data, int tag)
    {
        const Memory memory = Memory::of(data);
        const std::span<T> d = Memory::elements(data), none, theirs(scratch_.data(), count_);
        memory.synchronize(); // the caller's queued work on data ends before the first send
        if (fold_.sits_out(rank_))
            return sit_out<T>(comm, tag, d, cut_, cut_, requests_);
        if (fold_.absorbs(rank_)) {
            exchange<T>(comm, tag, rank_, none, rank_ - 1, theirs, cut_, requests_);
            memory.template combine<Policy>(d, std::span<const T>(theirs));
            memory.synchronize();
        }
        for (int peer : peers_) {
            exchange<T>(comm, tag, peer, d, peer, theirs, cut_, requests_);
            memory.template combine<Policy>(d, std::span<const T>(theirs));
            memory.synchronize();
        }
        memory.template finish<Policy>(d, size_);
        memory.canonicalize_nan(d);
        memory.synchronize();
        if (fold_.absorbs(rank_))
            exchange<T>(comm, tag, rank_ - 1, d, rank_, none, cut_, requests_);
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
