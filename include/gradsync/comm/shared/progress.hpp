// progress_line: one rank's progress through a plan's calls, in a cache line of its own in a
// shared region (comm/shared/region.hpp), and how a peer waits for it.
//
// The owner raises `step` with a release store; a peer waits until it reaches a value. The
// fast path is the store and the peer's loads of one cache line: no system call on either
// side. A waiter spins briefly (yielding now and then, for ranks that outnumber the cores),
// then sleeps on the line with a futex, counted in `sleepers` so that the owner wakes it
// (one system call, only when someone sleeps). Asleep, it wakes every millisecond to look at
// what ends a wait: the peer left the call with an error (`gone`), the peer's process exited,
// the communicator was released, or the deadline passed. Steps compare modulo 2^32, so a
// counter may wrap.
//
// A peer reads the owner's memory by address (threads of one process) only between enter()
// and leave(); an owner that leaves a call with an error first sets `gone` and waits for its
// readers, so its buffer is never read after it is gone.
#pragma once

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <thread>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>


namespace gradsync {

struct alignas(128) progress_line { // 128: the adjacent-line prefetcher pairs 64-byte lines
    std::atomic<std::uint32_t> step{0};
    std::atomic<std::uint32_t> sleepers{0};
    std::atomic<std::uint32_t> readers{0};
    std::atomic<std::uint32_t> gone{0};
    std::atomic<std::uintptr_t> address{0}; // where the owner's data lies this call (same process)

    static_assert(std::atomic<std::uint32_t>::is_always_lock_free && sizeof(std::atomic<std::uint32_t>) == 4,
                  "a futex needs a plain 32-bit word");

    bool reached(std::uint32_t target) const noexcept
    {
        return std::int32_t(step.load(std::memory_order_acquire) - target) >= 0;
    }

    void raise(std::uint32_t value) noexcept
    {
        step.store(value, std::memory_order_seq_cst);
        if (sleepers.load(std::memory_order_seq_cst) != 0)
            ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&step), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
    }

    // Whether this rank may read the owner's memory; false once the owner is gone.
    bool enter() noexcept
    {
        readers.fetch_add(1, std::memory_order_seq_cst);
        if (gone.load(std::memory_order_seq_cst) == 0)
            return true;
        leave();
        return false;
    }
    void leave() noexcept { readers.fetch_sub(1, std::memory_order_release); }

    // The owner leaves a call with an error: no peer reads its memory after this returns.
    void depart() noexcept
    {
        gone.store(1, std::memory_order_seq_cst);
        while (readers.load(std::memory_order_acquire) != 0)
            std::this_thread::yield();
    }
};

inline void cpu_relax() noexcept
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

// How a wait ended.
enum class progress_wait { reached, gone, released, exited, deadline };

// Waits until line reaches target, or for what else ends a wait: stop() is true when the
// communicator was released, exited() when the owner's process has exited. No allocation and,
// on the fast path, no system call; the caller names the error.
template <class Stop, class Exited>
progress_wait wait_for(progress_line& line, std::uint32_t target, std::chrono::nanoseconds deadline, Stop&& stop,
                       Exited&& exited)
{
    using clock = std::chrono::steady_clock;
    for (int spin = 0; spin < 4096; ++spin) {
        if (line.reached(target))
            return progress_wait::reached;
        if (spin % 64 == 63)
            std::this_thread::yield();
        else
            cpu_relax();
    }
    const clock::time_point start = clock::now();
    while (!line.reached(target)) {
        const std::uint32_t seen = line.step.load(std::memory_order_seq_cst);
        line.sleepers.fetch_add(1, std::memory_order_seq_cst);
        if (std::int32_t(line.step.load(std::memory_order_seq_cst) - target) < 0) {
            const timespec tick{0, 1'000'000};
            ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&line.step), FUTEX_WAIT, seen, &tick, nullptr, 0);
        }
        line.sleepers.fetch_sub(1, std::memory_order_seq_cst);
        if (line.reached(target))
            break;
        if (line.gone.load(std::memory_order_acquire) != 0)
            return progress_wait::gone;
        if (stop())
            return progress_wait::released;
        if (exited())
            return progress_wait::exited;
        if (deadline.count() && clock::now() - start >= deadline)
            return progress_wait::deadline;
    }
    return progress_wait::reached;
}

} // namespace gradsync
