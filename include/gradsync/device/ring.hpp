// Ring allreduce on device memory (Sum, Average): the plan of algorithm/ring.hpp with every
// block in a memory space. Same schedule, same messages (the reduce-scatter cut into
// pipeline segments, the allgather whole), same operand order in every combine, so the
// results are the host ring's bits and ranks running either plan can be mixed.
//
// Cost (N ranks, M bytes per rank): 2*(N-1)*alpha + 2*(N-1)/N*M*beta + (N-1)/N*M*gamma,
// gamma now a kernel's, plus (N+1)*sigma for the space synchronizations (before the first
// send, and after each combine and the finish, so the next send reads finished data). A
// step receives its whole block before combining: no overlap of transfer and combine.
//
// Preconditions: any N >= 1 and any count. Scratch: the largest block, in the space.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include <gradsync/algorithm/exchange.hpp>
#include <gradsync/algorithm/ring.hpp>
#include <gradsync/algorithm/schedule.hpp>
#include <gradsync/communicator.hpp>
#include <gradsync/device/algorithm.hpp>
#include <gradsync/device/policy.hpp>
#include <gradsync/device/span.hpp>
#include <gradsync/layout.hpp>
#include <gradsync/types.hpp>

namespace gradsync {

template <element T, communicator C, class Space>
class device_ring_plan {
public:
    device_ring_plan(const C& comm, const layer_layout& layout, const ring&, const pipeline_options& pipe)
        : rank_(comm.rank()), size_(comm.size()), count_(layout.total()), plain_{eager_limit(comm), 0},
          piped_{eager_limit(comm), pipe.segment_bytes}, scratch_(block_of(count_, size_, 0).size())
    {
        const std::size_t largest = block_of(count_, size_, 0).size();
        requests_.resize(2 * std::max(piped_.messages<T>(largest), plain_.messages<T>(largest)));
    }

    std::size_t count() const noexcept { return count_; }

    template <class Policy>
    void run(C& comm, device_span<T, Space> data, int tag)
    {
        const Space& space = data.space();
        const std::span<T> d = data.elements();
        const int n = size_, right = (rank_ + 1) % n, left = (rank_ + n - 1) % n;
        space.synchronize();
        for (int s = 0; s + 1 < n; ++s) {
            const block into = chunk(rank_ - s - 1);
            const std::span<T> theirs(scratch_.data(), into.size());
            exchange<T>(comm, tag, right, part(d, chunk(rank_ - s)), left, theirs, piped_, requests_);
            device_combine<Policy>(space, part(d, into), std::span<const T>(theirs));
            space.synchronize();
        }
        device_finish<Policy>(space, part(d, chunk(rank_ + 1)), n);
        space.synchronize();
        for (int s = 0; s + 1 < n; ++s)
            exchange<T>(comm, tag, right, part(d, chunk(rank_ + 1 - s)), left, part(d, chunk(rank_ - s)), plain_,
                        requests_);
    }

private:
    block chunk(int c) const noexcept { return block_of(count_, size_, ((c % size_) + size_) % size_); }
    static std::span<T> part(std::span<T> data, block b) { return data.subspan(b.begin, b.size()); }

    int rank_, size_;
    std::size_t count_;
    message_cut plain_, piped_;
    typename Space::template buffer<T> scratch_;
    std::vector<typename C::request> requests_; // after scratch_: pending requests die first
};

template <device_elementwise P>
struct device_algorithm<ring, P> {
    static constexpr bool available = true;
    template <element T, communicator C, class Space>
    using plan = device_ring_plan<T, C, Space>;
};

} // namespace gradsync
