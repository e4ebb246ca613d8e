// Recursive halving on device memory (Sum, Average): the plan of
// algorithm/recursive_halving.hpp with every block in a memory space. Same folding, same
// halving schedule, same messages (reduce phase cut into pipeline segments, allgather
// whole), same operand order in every combine, so the results are the host plan's bits and
// ranks running either plan can be mixed.
//
// Cost (P = largest power of two <= N, M bytes per rank):
//   2*log2(P)*alpha + 2*(P-1)/P*M*beta + (P-1)/P*M*gamma + (log2(P)+2)*sigma
// plus 2*alpha + 2*M*beta + M*gamma of folding when N is not a power of two; gamma is a
// kernel's, sigma a space synchronization (before the first send and after each combine).
//
// Preconditions: any N >= 1 and any count. Scratch: half the vector (the whole vector on a
// rank that absorbs a folded neighbour), in the space.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include <gradsync/algorithm/exchange.hpp>
#include <gradsync/algorithm/recursive_halving.hpp>
#include <gradsync/algorithm/schedule.hpp>
#include <gradsync/communicator.hpp>
#include <gradsync/device/algorithm.hpp>
#include <gradsync/device/policy.hpp>
#include <gradsync/device/span.hpp>
#include <gradsync/layout.hpp>
#include <gradsync/types.hpp>

namespace gradsync {

template <element T, communicator C, class Space>
class device_recursive_halving_plan {
public:
    device_recursive_halving_plan(const C& comm, const layer_layout& layout, const recursive_halving&,
                                  const pipeline_options& pipe)
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
        scratch_ = typename Space::template buffer<T>(largest);
        requests_.resize(requests);
    }

    std::size_t count() const noexcept { return count_; }

    template <class Policy>
    void run(C& comm, device_span<T, Space> data, int tag)
    {
        const Space& space = data.space();
        const std::span<T> d = data.elements(), none;
        space.synchronize();
        if (fold_.sits_out(rank_))
            return sit_out<T>(comm, tag, d, piped_, plain_, requests_);
        if (fold_.absorbs(rank_))
            receive_combine<Policy>(comm, tag, space, rank_, none, rank_ - 1, d);
        for (const halving_step& s : steps_)
            receive_combine<Policy>(comm, tag, space, s.peer, part(d, s.send), s.peer, part(d, s.keep));
        device_finish<Policy>(space, steps_.empty() ? d : part(d, steps_.back().keep), size_);
        space.synchronize();
        for (auto s = steps_.rbegin(); s != steps_.rend(); ++s)
            exchange<T>(comm, tag, s->peer, part(d, s->keep), s->peer, part(d, s->send), plain_, requests_);
        if (fold_.absorbs(rank_))
            exchange<T>(comm, tag, rank_ - 1, d, rank_, none, plain_, requests_);
    }

private:
    // Sends `out` to `to` while receiving acc.size() elements from `from`, then acc += them.
    template <class Policy>
    void receive_combine(C& comm, int tag, const Space& space, int to, std::span<T> out, int from, std::span<T> acc)
    {
        const std::span<T> theirs(scratch_.data(), acc.size());
        exchange<T>(comm, tag, to, out, from, theirs, piped_, requests_);
        device_combine<Policy>(space, acc, std::span<const T>(theirs));
        space.synchronize();
    }

    static std::span<T> part(std::span<T> data, block b) { return data.subspan(b.begin, b.size()); }

    int rank_, size_;
    std::size_t count_;
    folding fold_;
    message_cut plain_, piped_;
    std::vector<halving_step> steps_;
    typename Space::template buffer<T> scratch_;
    std::vector<typename C::request> requests_; // after scratch_: pending requests die first
};

template <device_elementwise P>
struct device_algorithm<recursive_halving, P> {
    static constexpr bool available = true;
    template <element T, communicator C, class Space>
    using plan = device_recursive_halving_plan<T, C, Space>;
};

} // namespace gradsync
