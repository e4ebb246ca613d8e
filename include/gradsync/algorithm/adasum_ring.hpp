// Adasum as a chain around the ring, the Adasum plan of the ring tag (DESIGN.md section 3):
// layer j starts at rank s = j mod N and is combined along s, s+1, ..., s+N-1:
//   A(...A(A(g(s), g(s+1)), g(s+2))..., g(s+N-1)),
// then the last rank of the chain sends the result on around the ring to the others.
//
// All layers move in lockstep: at time step t (2N-2 of them) every layer makes one hop, so
// with rotating starters every rank sends and receives in every step and all links are
// busy once there are N or more layers. A rank combines a received layer as soon as it has
// arrived, while the rest of the step's messages are still in flight.
//
// Cost (M bytes per rank spread over L >= N layers, gamma' per byte of triple plus scaled
// add):  2*(N-1)*alpha + 2*(N-1)/N*M*beta + (N-1)/N*M*gamma'   (balanced layers; a
// step lasts as long as its largest layer, so one dominant layer serializes the chain).
//
// Preconditions: any N, count and layout. Each layer's result is computed by one rank and
// copied, so every rank ends with identical bits.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include <gradsync/algorithm/exchange.hpp>
#include <gradsync/communicator.hpp>
#include <gradsync/layout.hpp>
#include <gradsync/policy/adasum.hpp>
#include <gradsync/types.hpp>

namespace gradsync {

template <element T, communicator C>
class adasum_ring_plan {
public:
    template <class Tag>
    adasum_ring_plan(const C& comm, const layer_layout& layout, const Tag&, const pipeline_options&)
        : rank_(comm.rank()), size_(comm.size()), layout_(layout), cut_{eager_limit(comm), 0}
    {
        const int n = size_, steps = 2 * n - 2;
        std::vector<std::vector<event>> by_step(std::size_t(std::max(steps, 0)));
        for (std::size_t l = 0; l < layout.layers(); ++l) {
            const int p = (rank_ - int(l % std::size_t(n)) + n) % n; // position in layer l's chain
            if (p >= 1)
                by_step[std::size_t(p - 1)].push_back({l, event::combine});
            if (p <= n - 2)
                by_step[std::size_t(p)].push_back({l, event::send});
            if (p != n - 2 && n > 1)
                by_step[std::size_t(n - 1 + (p + 1) % n)].push_back({l, event::send});
            if (p <= n - 2)
                by_step[std::size_t(n - 1 + p)].push_back({l, event::receive});
        }
        std::size_t scratch = 0, requests = 0;
        for (auto& events : by_step) {
            // Receives first, then sends, each in layer order: the order the neighbours use.
            std::stable_partition(events.begin(), events.end(), [](const event& e) { return e.kind != event::send; });
            std::size_t bytes = 0, messages = 0;
            for (const event& e : events) {
                if (e.kind == event::combine)
                    bytes += layout.size(e.layer);
                messages += cut_.messages<T>(layout.size(e.layer));
            }
            scratch = std::max(scratch, bytes);
            requests = std::max(requests, messages);
            step_begin_.push_back(events_.size());
            events_.insert(events_.end(), events.begin(), events.end());
        }
        step_begin_.push_back(events_.size());
        scratch_.resize(scratch);
        requests_.resize(requests);
    }

    std::size_t count() const noexcept { return layout_.total(); }

    template <class Policy>
    void run(C& comm, std::span<T> data, int tag)
    {
        const int right = (rank_ + 1) % size_, left = (rank_ + size_ - 1) % size_;
        for (std::size_t t = 0; t + 1 < step_begin_.size(); ++t) {
            const auto first = events_.begin() + std::ptrdiff_t(step_begin_[t]);
            const auto last = events_.begin() + std::ptrdiff_t(step_begin_[t + 1]);
            std::size_t k = 0, offset = 0;
            for (auto e = first; e != last; ++e) {
                const std::span<T> target = e->kind == event::combine ? received(offset, e->layer) : layer(data, e->layer);
                if (e->kind == event::combine)
                    offset += target.size();
                k = post(comm, e->kind == event::send, target, e->kind == event::send ? right : left, tag, k);
            }
            std::size_t r = 0;
            offset = 0;
            for (auto e = first; e != last && e->kind != event::send; ++e) {
                for (std::size_t m = cut_.messages<T>(layout_.size(e->layer)); m > 0; --m)
                    comm.wait(requests_[r++]);
                if (e->kind == event::combine) {
                    const std::span<T> acc = received(offset, e->layer);
                    offset += acc.size();
                    adasum::combine_layer<T>(layer(data, e->layer), acc, layer(data, e->layer));
                }
            }
            for (; r < k; ++r)
                comm.wait(requests_[r]);
        }
    }

private:
    struct event {
        std::size_t layer;
        enum kind_t { combine, receive, send } kind; // combine: receive the chain so far, then combine
    };

    std::size_t post(C& comm, bool send, std::span<T> block, int peer, int tag, std::size_t k)
    {
        const std::size_t seg = cut_.elems<T>(block.size());
        for (std::size_t i = 0; i < block.size(); i += seg) {
            const std::span<T> piece = block.subspan(i, std::min(seg, block.size() - i));
            requests_[k++] = send ? isend(comm, std::span<const T>(piece), peer, tag) : irecv(comm, piece, peer, tag);
        }
        return k;
    }

    std::span<T> received(std::size_t offset, std::size_t l) { return std::span<T>(scratch_).subspan(offset, layout_.size(l)); }
    std::span<T> layer(std::span<T> v, std::size_t l) const { return v.subspan(layout_.offset(l), layout_.size(l)); }

    int rank_, size_;
    layer_layout layout_;
    message_cut cut_;
    std::vector<event> events_;          // per step: receives then sends, each in layer order
    std::vector<std::size_t> step_begin_; // events_ index where each step starts
    std::vector<T> scratch_;
    std::vector<typename C::request> requests_; // after scratch_: pending requests die first
};

} // namespace gradsync
