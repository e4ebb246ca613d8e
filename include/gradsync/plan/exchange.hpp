// Point-to-point building blocks shared by every algorithm: a pairwise exchange of blocks
// (exchange), the same with the received block handled segment by segment as it lands
// (exchange_segments; exchange_combine combines each segment), the allgather around a
// ring (allgather_around_ring), a transfer down a tree (send_down, for the broadcasts), and
// the folding of a non-power-of-two rank count around a power-of-two phase (run_folded).
// Messages are cut by one rule (message_cut):
//  - a block within the transport's eager limit goes as one message;
//  - a block of up to 16 eager messages goes as equal pieces that each fit, since one
//    rendezvous costs several eager sends on shared memory;
//  - with segmenting on, a block of more than two segments is cut into segments;
//  - anything else goes whole (one handshake; a single-copy transport copies into place).
// The cut also carries the posting order (post_in_order): the transport's, or the one the
// pipeline options ask for, settled with the plan by cut_for().
// exchange_combine segments (the plan's scratch holds `window` segments): it keeps that
// many receives in flight and combines each segment as soon as it lands, so the combine of
// one segment overlaps the transfer of the next and the data is combined while still in
// cache. Plain exchanges send blocks whole. The defaults (256 KiB segments, window 2) are
// bench_allreduce_mpi's best on 2 ranks (docs/results.md). In a memory whose combines are
// queued (Memory::synchronous false, memory/host_memory.hpp) a kernel may still read a segment
// after combine() returns, so there the scratch holds the whole block, no slot is reused,
// and the step ends with one synchronization, before its data is sent on.
//
// Preconditions: the sent and received blocks do not overlap; both peers cut a block with
// the same message_cut (schedules pair the calls; the reducer's agreement check makes the
// options equal), so message sizes agree.
#pragma once

#include <algorithm>
#include <cstddef>
#include <limits>
#include <span>
#include <utility>

#include <gradsync/comm/communicator.hpp>
#include <gradsync/memory/host_memory.hpp>
#include <gradsync/plan/schedule.hpp>

namespace gradsync {

// Which an exchange posts first. transport: receives where the communicator's
// receives_first() says so, else sends. The order is local (it changes no message), so
// ranks need not agree on it.
enum class posting_order { transport, sends_first, receives_first };

struct pipeline_options {
    std::size_t segment_bytes = std::size_t(256) << 10; // must be positive
    int window = 2;                                      // must be positive
    posting_order order = posting_order::transport;
};

struct message_cut {
    std::size_t eager = std::numeric_limits<std::size_t>::max();
    std::size_t segment_bytes = 0; // 0: no segmenting
    bool receives_first = false;   // posting order: receives before sends

    // Elements per message for a block of n elements.
    template <class T>
    std::size_t elems(std::size_t n) const noexcept
    {
        if (n == 0)
            return 1;
        const std::size_t segment = std::max<std::size_t>(1, segment_bytes / sizeof(T));
        if (segment_bytes && n > 2 * segment)
            return segment;
        const std::size_t eager_elems = std::max<std::size_t>(1, eager / sizeof(T));
        if (n <= eager_elems || (eager_elems <= std::numeric_limits<std::size_t>::max() / 16 && n > 16 * eager_elems))
            return n;
        const std::size_t pieces = (n + eager_elems - 1) / eager_elems;
        return (n + pieces - 1) / pieces;
    }

    template <class T>
    std::size_t messages(std::size_t n) const noexcept
    {
        const std::size_t e = elems<T>(n);
        return (n + e - 1) / e;
    }
};

// The cut for comm's transport: its eager limit, the posting order p asks for, and
// segments of p.segment_bytes where `segmented` (else none).
template <communicator C>
message_cut cut_for(const C& comm, const pipeline_options& p, bool segmented = false)
{
    const bool receives = p.order == posting_order::transport ? receives_first(comm)
                                                               : p.order == posting_order::receives_first;
    return {eager_limit(comm), segmented ? p.segment_bytes : 0, receives};
}

// Calls sends() then receives(), or the other way round where cut.receives_first: sends go
// first by default because under Open MPI's shared memory transport, receives posted before
// the partner's sends had arrived sometimes made an exchange take twice as long
// (docs/results.md, "Sum against MPI_Allreduce"); where a send waits for its receiver's
// announcement, both ranks' announcements are better on their way first.
template <class Sends, class Receives>
void post_in_order(const message_cut& cut, Sends&& sends, Receives&& receives)
{
    if (cut.receives_first) {
        receives();
        sends();
    } else {
        sends();
        receives();
    }
}

// Scratch for exchange_combine on blocks of at most max_block elements: `window` segments,
// and at least two, as a block of up to two segments goes whole; the whole block where
// combines are queued.
template <class T, class Memory = host_memory>
std::size_t scratch_elems(std::size_t max_block, const pipeline_options& p) noexcept
{
    if constexpr (!Memory::synchronous)
        return max_block;
    const std::size_t segments = std::size_t(std::max(p.window, 2));
    return std::min(max_block, segments * std::max<std::size_t>(p.segment_bytes / sizeof(T), 1));
}

// Sends `out` to `to` while receiving `in` from `from`, posted in post_in_order(). Needs
// cut.messages(in.size()) + cut.messages(out.size()) requests, waited in the order they
// were posted.
template <class T, communicator C>
void exchange(C& comm, int tag, int to, std::span<const T> out, int from, std::span<T> in, const message_cut& cut,
              std::span<typename C::request> reqs)
{
    const std::size_t seg_in = cut.elems<T>(in.size()), seg_out = cut.elems<T>(out.size());
    std::size_t k = 0;
    const auto sends = [&] {
        for (std::size_t i = 0; i < out.size(); i += seg_out)
            reqs[k++] = isend(comm, out.subspan(i, std::min(seg_out, out.size() - i)), to, tag);
    };
    const auto receives = [&] {
        for (std::size_t i = 0; i < in.size(); i += seg_in)
            reqs[k++] = irecv(comm, in.subspan(i, std::min(seg_in, in.size() - i)), from, tag);
    };
    post_in_order(cut, sends, receives);
    for (std::size_t i = 0; i < k; ++i)
        comm.wait(reqs[i]);
}

// Sends `out` to `to` while receiving n elements from `from` segment by segment (the first
// window of receives posted in post_in_order()), and calls landed(begin, segment) as each
// segment lands (begin: its position in the block). `in` holds all n elements (segment j at
// j * segment size), or is a ring of in.size() / segment size slots reused in turn. At most
// `window` receives are in flight; with a ring, a slot is received into again only after
// landed() returns. Requests as for exchange().
template <class T, communicator C, class Landed>
void exchange_segments(C& comm, int tag, int to, std::span<const T> out, int from, std::size_t n, std::span<T> in,
                       std::size_t window, const message_cut& cut, std::span<typename C::request> reqs,
                       Landed&& landed)
{
    const std::size_t seg_in = cut.elems<T>(n), seg_out = cut.elems<T>(out.size());
    const std::size_t n_in = (n + seg_in - 1) / seg_in;
    const std::size_t slots = in.size() >= n ? n_in : std::max<std::size_t>(1, in.size() / seg_in);
    window = std::min(window, slots);
    auto piece = [&](std::size_t j) { return std::min(seg_in, n - j * seg_in); };
    auto slot = [&](std::size_t j) { return in.subspan((j % slots) * seg_in, piece(j)); };

    std::size_t k = window;
    post_in_order(
        cut,
        [&] {
            for (std::size_t i = 0; i < out.size(); i += seg_out)
                reqs[k++] = isend(comm, out.subspan(i, std::min(seg_out, out.size() - i)), to, tag);
        },
        [&] {
            for (std::size_t j = 0; j < window; ++j)
                reqs[j] = irecv(comm, slot(j), from, tag);
        });
    for (std::size_t j = 0; j < n_in; ++j) {
        comm.wait(reqs[j % window]);
        const bool more = j + window < n_in, reused = window == slots && slots < n_in;
        if (more && !reused)
            reqs[j % window] = irecv(comm, slot(j + window), from, tag);
        landed(j * seg_in, slot(j));
        if (more && reused)
            reqs[j % window] = irecv(comm, slot(j + window), from, tag);
    }
    for (std::size_t i = window; i < k; ++i)
        comm.wait(reqs[i]);
}

// Sends `out` to `to` while receiving a block of acc.size() elements from `from` and
// combining it into acc segment by segment (memory.combine<Policy>(acc_piece,
// received_piece)). scratch: scratch_elems<T, Memory>() of the largest block; requests as
// for exchange().
template <class Policy, class T, communicator C, class Memory>
void exchange_combine(C& comm, int tag, int to, std::span<const T> out, int from, std::span<T> acc,
                      std::span<T> scratch, const message_cut& cut, std::span<typename C::request> reqs,
                      const Memory& memory)
{
    exchange_segments<T>(comm, tag, to, out, from, acc.size(), scratch, std::numeric_limits<std::size_t>::max(), cut,
                         reqs, [&](std::size_t begin, std::span<T> landed) {
                             memory.template combine<Policy>(acc.subspan(begin, landed.size()),
                                                             std::span<const T>(landed));
                         });
    memory.synchronize();
}

// The allgather around the ring r -> r+1 (mod N), N-1 steps: a rank starts with block
// block_at(first) and at step s sends block_at(first - s) to its right while receiving
// block_at(first - s - 1) from its left (block_at takes any int and reduces it mod N).
// Every block is cut by `cut`. Requests as for exchange() of the largest block.
template <class T, communicator C, class BlockAt>
void allgather_around_ring(C& comm, int tag, std::span<T> data, int first, BlockAt&& block_at, const message_cut& cut,
                           std::span<typename C::request> reqs)
{
    const int n = comm.size(), r = comm.rank(), right = (r + 1) % n, left = (r + n - 1) % n;
    for (int s = 0; s + 1 < n; ++s)
        exchange<T>(comm, tag, right, block_span(data, block_at(first - s)), left,
                    block_span(data, block_at(first - s - 1)), cut, reqs);
}

// One rank's part of a transfer down a tree (binomial_node_of, schedule.hpp): receives
// `from_parent` from `parent` (none where it is -1), then sends each child its block, one
// after another. Each block goes whole, whatever the cut's eager limit: a tree's messages
// go one way, so pieces gain nothing from running both ways at once, and on Open MPI's
// shared memory 16 KiB in five eager pieces took twice one message's time
// (docs/results.md, "Broadcast against MPI_Bcast"). Needs one request.
template <class T, communicator C>
void send_down(C& comm, int tag, std::span<T> data, int parent, block from_parent,
               std::span<const std::pair<int, block>> children, message_cut cut,
               std::span<typename C::request> reqs)
{
    cut.eager = std::numeric_limits<std::size_t>::max();
    cut.segment_bytes = 0;
    if (parent >= 0)
        exchange<T>(comm, tag, parent, {}, parent, block_span(data, from_parent), cut, reqs);
    for (const auto& [child, b] : children)
        exchange<T>(comm, tag, child, block_span(data, b), child, {}, cut, reqs);
}

// Folding (schedule.hpp) around a power-of-two phase, body(). A rank that sits out hands
// its vector to rank + 1, cut by `in` as that rank receives it, and takes the result back,
// cut by `out`; the rank that absorbs it calls absorb(rank - 1) before body() and sends the
// result back after; every other rank runs body() alone. Requests as for exchange() of the
// whole vector.
template <class T, communicator C, class Absorb, class Body>
void run_folded(C& comm, const folding& fold, int tag, std::span<T> data, const message_cut& in,
                const message_cut& out, std::span<typename C::request> reqs, Absorb&& absorb, Body&& body)
{
    const int r = comm.rank();
    if (fold.sits_out(r)) {
        exchange<T>(comm, tag, r + 1, data, r, {}, in, reqs);
        exchange<T>(comm, tag, r, {}, r + 1, data, out, reqs);
        return;
    }
    if (fold.absorbs(r))
        absorb(r - 1);
    body();
    if (fold.absorbs(r))
        exchange<T>(comm, tag, r - 1, data, r, {}, out, reqs);
}

} // namespace gradsync
