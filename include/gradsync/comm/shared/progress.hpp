// progress_line: one rank's progress through a plan's calls, in a cache line of its own in a
// shared region (comm/shared/region.hpp), and how a peer sleeps on it.
//
// The owner raises `step` with a store; a peer waits until it reaches a value. The fast path
// is the store and the peer's loads of one cache line: no system call on either side. A
// waiter that has spun long enough sleeps on the line with a futex, counted in `sleepers` so
// that the owner wakes it (one system call, only when someone sleeps); asleep, it wakes every
// millisecond to look at what else ends a wait (comm/shared/peers.hpp). Steps compare modulo
// 2^32, so a counter may wrap.
//
// A peer reads the owner's memory by address (threads of one process) only between enter()
// and leave(); an owner that leaves a call with an error first sets `gone` and waits for its
// readers, so its buffer is never read after it is gone. Both sides store one word and then
// load the other's (a store-buffering pattern): every one of those four accesses is
// sequentially consistent, which is what makes at least one side see the other's store.
// raise() and sleep() pair `step` and `sleepers` the same way.
#pragma once

#include <atomic>
#include <climits>
#include <cstdint>
#include <ctime>
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

    // Sleeps until the owner raises the line, at most `tick`, unless it reached target already.
    void await_step(std::uint32_t target, const timespec& tick) noexcept
    {
        const std::uint32_t seen = step.load(std::memory_order_seq_cst);
        sleepers.fetch_add(1, std::memory_order_seq_cst);
        if (std::int32_t(step.load(std::memory_order_seq_cst) - target) < 0)
            ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&step), FUTEX_WAIT, seen, &tick, nullptr, 0);
        sleepers.fetch_sub(1, std::memory_order_seq_cst);
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
        while (readers.load(std::memory_order_seq_cst) != 0)
            std::this_thread::yield();
    }
    bool departed() const noexcept { return gone.load(std::memory_order_acquire) != 0; }
};

inline void cpu_relax() noexcept
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

} // namespace gradsync
