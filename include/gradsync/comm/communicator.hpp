// The communicator concept: what an algorithm needs from a transport, and nothing more.
//
//   c.rank(), c.size()           this process's rank and the group's size
//   c.isend(bytes, peer, tag)    start sending; returns a request
//   c.irecv(bytes, peer, tag)    start receiving exactly bytes.size() bytes
//   c.wait(request)              block until the request completes; throws gradsync::error
//
// Messages between one pair of ranks with one tag are matched in the order they were
// posted (MPI's non-overtaking rule), so an algorithm can keep many messages in flight on
// one tag. A sent buffer must stay untouched until its request completes. A receive whose
// size differs from the matching send is a communication_error. A default-constructed
// request is complete. Requests are movable so they can live in preallocated arrays.
//
// Optional: c.eager_limit() -> std::size_t, the largest message the transport delivers
// without a rendezvous handshake; small-message algorithms cut their messages to fit.
//
// Optional: c.receives_first() -> bool, true where a send waits for its receiver to announce
// the receive (Gloo's unbound buffers): exchanges then post their receives before their sends,
// so that both ranks' announcements are on their way while the sends are posted. Without it
// sends go first (plan/exchange.hpp says why).
//
// Optional: c.tag_limit() -> int, the largest tag the transport carries (MPI_TAG_UB): the bits
// it leaves above 2^15 carry a reducer's identity and call number (core/tags.hpp). Without it tags
// stop at tags::base_mask (32767, the least MPI_TAG_UB MPI allows) and carry no stamp.
//
// Optional: c.release(), from any thread: every wait in progress or to come, and every later
// post, throws aborted_error, so that a thread stuck on a peer that will never come can be
// let go (the synchronizer's destructor after its deadline). The communicator stays out of
// step with its peers for good.
//
// Optional: c.deadline() -> std::chrono::nanoseconds, the longest a wait may block (zero: no
// limit), and c.released() -> bool, whether release() was called (or, in a local_group, another
// rank failed): waits outside the transport, on a shared region's flags, keep to both.
//
// Optional: c.may_share_memory() -> bool, false for a communicator whose messages stand for a
// link that sharing memory would bypass (delay_communicator): shared-memory plans refuse it
// and automatic leaves them out. Without it, true.
//
// Optional: C::clock, the std::chrono clock on which the transport's time passes (a
// simulator's clock, comm/mpi/detail/simulation.hpp): what measures it (tuned, calibration)
// reads clock_of<C>. Without it, std::chrono::steady_clock.
//
// A transport that can see the peer's next message, and finds it stamped for another reducer
// or call of the same base (tags::foreign) while it waits for a receive, throws
// foreign_message_error instead of waiting for a message that is not coming.
#pragma once

#include <chrono>
#include <concepts>
#include <cstddef>
#include <limits>
#include <span>
#include <string>

#include <gradsync/core/error.hpp>
#include <gradsync/core/tags.hpp>

namespace gradsync {

template <class C>
concept communicator = std::default_initializable<typename C::request> &&
    std::movable<typename C::request> &&
    requires(C& c, const C& cc, std::span<const std::byte> out, std::span<std::byte> in, int peer, int tag,
             typename C::request& req) {
        { cc.rank() } -> std::convertible_to<int>;
        { cc.size() } -> std::convertible_to<int>;
        { c.isend(out, peer, tag) } -> std::same_as<typename C::request>;
        { c.irecv(in, peer, tag) } -> std::same_as<typename C::request>;
        c.wait(req);
    };

template <communicator C>
std::size_t eager_limit(const C& c)
{
    if constexpr (requires { { c.eager_limit() } -> std::convertible_to<std::size_t>; })
        return c.eager_limit();
    else
        return std::numeric_limits<std::size_t>::max();
}

template <communicator C>
bool receives_first(const C& c)
{
    if constexpr (requires { { c.receives_first() } -> std::convertible_to<bool>; })
        return c.receives_first();
    else
        return false;
}

template <communicator C>
int tag_limit(const C& c)
{
    if constexpr (requires { { c.tag_limit() } -> std::convertible_to<int>; })
        return c.tag_limit();
    else
        return tags::base_mask;
}

template <communicator C>
std::chrono::nanoseconds wait_deadline(const C& c)
{
    if constexpr (requires { { c.deadline() } -> std::convertible_to<std::chrono::nanoseconds>; })
        return c.deadline();
    else
        return std::chrono::nanoseconds(0);
}

template <communicator C>
bool is_released(const C& c)
{
    if constexpr (requires { { c.released() } -> std::convertible_to<bool>; })
        return c.released();
    else
        return false;
}

template <communicator C>
bool may_share_memory(const C& c)
{
    if constexpr (requires { { c.may_share_memory() } -> std::convertible_to<bool>; })
        return c.may_share_memory();
    else
        return true;
}

template <class C>
struct transport_clock {
    using type = std::chrono::steady_clock;
};

template <class C>
    requires requires { typename C::clock; }
struct transport_clock<C> {
    using type = typename C::clock;
};

template <class C>
using clock_of = typename transport_clock<C>::type;

template <communicator C>
constexpr bool releasable = requires(C& c) { c.release(); };

template <communicator C, class T>
typename C::request isend(C& c, std::span<const T> data, int peer, int tag)
{
    return c.isend(std::as_bytes(data), peer, tag);
}

template <communicator C, class T>
typename C::request irecv(C& c, std::span<T> data, int peer, int tag)
{
    return c.irecv(std::as_writable_bytes(data), peer, tag);
}

// "rank R of N" prefix for messages, so every error says where it happened; the form with
// numbers is for code that has no communicator object yet.
inline std::string where(int rank, int size)
{
    return "rank " + std::to_string(rank) + " of " + std::to_string(size);
}

template <communicator C>
std::string where(const C& c)
{
    return where(c.rank(), c.size());
}

} // namespace gradsync
