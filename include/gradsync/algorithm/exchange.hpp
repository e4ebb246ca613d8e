// Point-to-point building blocks shared by every algorithm: a pairwise exchange of blocks,
// plain or combining, cut into messages by one rule (message_cut):
//  - a block within the transport's eager limit goes as one message;
//  - a block of up to 16 eager messages goes as equal pieces that each fit, since one
//    rendezvous costs several eager sends on shared memory;
//  - with segmenting on, a block of more than two segments is cut into segments;
//  - anything else goes whole (one handshake; a single-copy transport copies into place).
// exchange_combine segments (the plan's scratch holds `window` segments): it keeps that
// many receives in flight and combines each segment as soon as it lands, so the combine of
// one segment overlaps the transfer of the next and the data is combined while still in
// cache. Plain exchanges send blocks whole. Defaults (256 KiB segments, window 2) were
// chosen with bench_allreduce_mpi on 2 ranks. In a memory whose combines are queued
// (Memory::synchronous false, algorithm/memory.hpp) a kernel may still read a segment
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

#include <gradsync/algorithm/memory.hpp>
#include <gradsync/communicator.hpp>

namespace gradsync {

struct pipeline_options {
    std::size_t segment_bytes = std::size_t(256) << 10; // must be positive
    int window = 2;                                      // must be positive
};

struct message_cut {
    std::size_t eager = std::numeric_limits<std::size_t>::max();
    std::size_t segment_bytes = 0; // 0: no segmenting

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

// Sends `out` to `to` while receiving `in` from `from`. Needs cut.messages(in.size()) +
// cut.messages(out.size()) requests. The sends are posted first: under Open MPI's shared
// memory transport, receives posted before the partner's sends had arrived now and then
// made an exchange take twice as long, as if one core made both directions' copies (a
// 2-rank allgather of 4 MiB halves took 920 µs instead of 470).
template <class T, communicator C>
void exchange(C& comm, int tag, int to, std::span<const T> out, int from, std::span<T> in, const message_cut& cut,
              std::span<typename C::request> reqs)
{
    const std::size_t seg_in = cut.elems<T>(in.size()), seg_out = cut.elems<T>(out.size());
    std::size_t k = 0;
    for (std::size_t i = 0; i < out.size(); i += seg_out)
        reqs[k++] = isend(comm, out.subspan(i, std::min(seg_out, out.size() - i)), to, tag);
    for (std::size_t i = 0; i < in.size(); i += seg_in)
        reqs[k++] = irecv(comm, in.subspan(i, std::min(seg_in, in.size() - i)), from, tag);
    for (std::size_t i = 0; i < k; ++i)
        comm.wait(reqs[i]);
}

// Folding (schedule.hpp) on a rank that sits out: hand the whole vector to rank + 1, cut as
// that rank receives it, then take the result back.
template <class T, communicator C>
void sit_out(C& comm, int tag, std::span<T> data, const message_cut& out, const message_cut& back,
             std::span<typename C::request> reqs)
{
    exchange<T>(comm, tag, comm.rank() + 1, data, comm.rank(), {}, out, reqs);
    exchange<T>(comm, tag, comm.rank(), {}, comm.rank() + 1, data, back, reqs);
}

// Sends `out` to `to` (sends first, as exchange() says why) while receiving a block of
// acc.size() elements from `from` and combining it into acc message by message
// (memory.combine<Policy>(acc_piece, received_piece)). scratch: scratch_elems<T, Memory>()
// of the largest block; requests as for exchange().
template <class Policy, class T, communicator C, class Memory = host_memory>
void exchange_combine(C& comm, int tag, int to, std::span<const T> out, int from, std::span<T> acc,
                      std::span<T> scratch, const message_cut& cut, std::span<typename C::request> reqs,
                      const Memory& memory = {})
{
    const std::size_t seg_in = cut.elems<T>(acc.size()), seg_out = cut.elems<T>(out.size());
    const std::size_t n_in = (acc.size() + seg_in - 1) / seg_in;
    const std::size_t slots =
        Memory::synchronous ? std::min(n_in, std::max<std::size_t>(1, scratch.size() / seg_in)) : n_in;
    auto piece = [&](std::size_t j) { return std::min(seg_in, acc.size() - j * seg_in); };
    auto slot = [&](std::size_t j) { return scratch.subspan((j % slots) * seg_in, piece(j)); };

    std::size_t k = slots;
    for (std::size_t i = 0; i < out.size(); i += seg_out)
        reqs[k++] = isend(comm, out.subspan(i, std::min(seg_out, out.size() - i)), to, tag);
    for (std::size_t j = 0; j < slots; ++j)
        reqs[j] = irecv(comm, slot(j), from, tag);
    for (std::size_t j = 0; j < n_in; ++j) {
        comm.wait(reqs[j % slots]);
        memory.template combine<Policy>(acc.subspan(j * seg_in, piece(j)), std::span<const T>(slot(j)));
        if (j + slots < n_in)
            reqs[j % slots] = irecv(comm, slot(j + slots), from, tag);
    }
    for (std::size_t i = slots; i < k; ++i)
        comm.wait(reqs[i]);
    memory.synchronize();
}

} // namespace gradsync
