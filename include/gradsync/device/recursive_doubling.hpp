// Recursive doubling on device memory (Sum, Average): the plan of
// algorithm/recursive_doubling.hpp with the vector in a memory space. Same folding, same
// messages, same operand order, and the same canonical NaN at the end, so the results are
// the host plan's bits and ranks running either plan can be mixed.
//
// Cost (P = largest power of two <= N, M bytes per rank):
//   log2(P)*(alpha + M*beta + M*gamma + sigma)
// plus 2*alpha + 2*M*beta + M*gamma of folding when N is not a power of two; gamma is a
// kernel's, sigma a space synchronization.
//
// Preconditions: any N >= 1 and any count; scratch holds the whole vector, in the space, so
// it is meant for small messages (the automatic rule's choice for them).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include <gradsync/algorithm/exchange.hpp>
#include <gradsync/algorithm/recursive_doubling.hpp>
#include <gradsync/algorithm/schedule.hpp>
#include <gradsync/communicator.hpp>
#include <gradsync/device/algorithm.hpp>
#include <gradsync/device/policy.hpp>
#include <gradsync/device/span.hpp>
#include <gradsync/kernels/thrust.hpp>
#include <gradsync/layout.hpp>
#include <gradsync/types.hpp>

namespace gradsync {

template <element T, communicator C, class Space>
class device_recursive_doubling_plan {
public:
    device_recursive_doubling_plan(const C& comm, const layer_layout& layout, const recursive_doubling&,
                                   const pipeline_options&)
        : rank_(comm.rank()), size_(comm.size()), count_(layout.total()), fold_(size_), cut_{eager_limit(comm), 0},
          scratch_(count_), requests_(2 * cut_.messages<T>(count_))
    {
        const int v = fold_.virtual_rank(rank_);
        for (int mask = 1; v >= 0 && mask < fold_.pof2; mask <<= 1)
            peers_.push_back(fold_.real_rank(v ^ mask));
    }

    std::size_t count() const noexcept { return count_; }

    template <class Policy>
    void run(C& comm, device_span<T, Space> data, int tag)
    {
        const Space& space = data.space();
        const std::span<T> d = data.elements(), none, theirs(scratch_.data(), count_);
        space.synchronize();
        if (fold_.sits_out(rank_))
            return sit_out<T>(comm, tag, d, cut_, cut_, requests_);
        if (fold_.absorbs(rank_)) {
            exchange<T>(comm, tag, rank_, none, rank_ - 1, theirs, cut_, requests_);
            device_combine<Policy>(space, d, std::span<const T>(theirs));
            space.synchronize();
        }
        for (int peer : peers_) {
            exchange<T>(comm, tag, peer, d, peer, theirs, cut_, requests_);
            device_combine<Policy>(space, d, std::span<const T>(theirs));
            space.synchronize();
        }
        device_finish<Policy>(space, d, size_);
        kernels::canonicalize_nan(space.policy(), d);
        space.synchronize();
        if (fold_.absorbs(rank_))
            exchange<T>(comm, tag, rank_ - 1, d, rank_, none, cut_, requests_);
    }

private:
    int rank_, size_;
    std::size_t count_;
    folding fold_;
    message_cut cut_;
    std::vector<int> peers_;
    typename Space::template buffer<T> scratch_;
    std::vector<typename C::request> requests_; // after scratch_: pending requests die first
};

template <device_elementwise P>
struct device_algorithm<recursive_doubling, P> {
    static constexpr bool available = true;
    template <element T, communicator C, class Space>
    using plan = device_recursive_doubling_plan<T, C, Space>;
};

} // namespace gradsync
