// How the MPI transports wait: the request is tested until it completes, and every so often
// the wait also reads the clock (its deadline), whether the communicator was released, for a
// receive the tag of the peer's next message (a foreign stamp, core/tags.hpp), and where the
// peer is on the host's position board (comm/shared/board.hpp). MPI_Wait spins on the progress
// engine too, so testing costs a wait nothing it did not pay already; the clock is read once
// per clock_every tests and the peer probed once per probe_every.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include <gradsync/core/error.hpp>

namespace gradsync::detail {

enum class wait_end { deadline, released, foreign, stray };

struct wait_watch {
    std::chrono::nanoseconds deadline{0}; // zero: none
    const std::atomic<bool>* released = nullptr;
};

// test() -> bool: whether the request completed. probe() -> int: the tag of a foreign message
// at the head of the peer's queue, or -1. stray() -> int: the tag of the call the peer is at
// instead of this one (stray_tag), or -1. fail(wait_end, found tag, elapsed) must throw.
// Clock: what the deadline counts (mpi.hpp's under a simulator: comm/mpi/detail/simulation.hpp).
template <class Clock = std::chrono::steady_clock, class Test, class Probe, class Stray, class Fail>
void poll_until_done(Test&& test, Probe&& probe, Stray&& stray, const wait_watch& watch, Fail&& fail)
{
    using time_point = typename Clock::time_point;
    constexpr unsigned clock_every = 64;
    constexpr auto probe_every = std::chrono::milliseconds(1);
    if (test())
        return;
    const time_point start = Clock::now();
    time_point next_probe = start + probe_every;
    for (std::uint64_t spin = 1;; ++spin) {
        if (test())
            return;
        if (spin % clock_every)
            continue;
        const time_point now = Clock::now();
        if (watch.released && watch.released->load(std::memory_order_relaxed))
            fail(wait_end::released, -1, now - start);
        if (now >= next_probe) {
            // A foreign head is final only if the request is still open after the probe: it
            // may have completed, and the peer moved on to its next call, since the last test.
            if (const int found = probe(); found >= 0) {
                if (test())
                    return;
                fail(wait_end::foreign, found, now - start);
            }
            if (const int found = stray(); found >= 0) {
                if (test())
                    return;
                fail(wait_end::stray, found, now - start);
            }
            next_probe = now + probe_every;
        }
        if (watch.deadline.count() && now - start >= watch.deadline)
            fail(wait_end::deadline, -1, now - start);
    }
}

// The error that ends a failed wait: who is "gradsync::<transport> (rank R of N): ".
[[noreturn]] inline void throw_wait_end(const std::string& who, bool receive, std::size_t bytes, int peer, int tag,
                                        wait_end end, int found, std::chrono::nanoseconds waited,
                                        std::chrono::nanoseconds deadline)
{
    const auto seconds = [](std::chrono::nanoseconds t) { return std::to_string(std::chrono::duration<double>(t).count()); };
    const std::string what = std::string(receive ? "a receive of " : "a send of ") + std::to_string(bytes) +
        " bytes " + (receive ? "from" : "to") + " rank " + std::to_string(peer) + " (tag " + std::to_string(tag) + ")";
    switch (end) {
    case wait_end::foreign:
        throw foreign_message_error(who + "waiting for " + what + ", rank " + std::to_string(peer) +
                                        "'s next message has tag " + std::to_string(found),
                                    peer, tag, found);
    case wait_end::stray:
        throw foreign_message_error(who + "waiting for " + what + ", rank " + std::to_string(peer) +
                                        " is at the call with tag " + std::to_string(found),
                                    peer, tag, found);
    case wait_end::released:
        throw aborted_error(who + what + " was released after " + seconds(waited) + " s");
    case wait_end::deadline:
        break;
    }
    throw deadline_error(who + what + " did not complete within the deadline of " + seconds(deadline) + " s");
}

} // namespace gradsync::detail
