// Where the scheduling study's threads run. Each rank has a compute thread (its trainer)
// and the synchronizer's communication thread. On a cluster the communication runs beside
// the compute (a NIC, a GPU's copy engine) and never waits for it; emulated with threads on
// a machine with fewer cores than threads, a communication thread that wakes up while every
// core computes waits for the scheduler to give it one, about a time slice (milliseconds),
// and every overlapped allreduce ends late. So when the cores are fewer than twice the
// ranks, the communication threads get a core of their own (the last one this process may
// use) and the compute threads share the others.
//
// A thread inherits its creator's CPU affinity (pthread_create), so the synchronizer's
// thread is placed by creating the synchronizer from a thread placed on the communication
// core; the creating thread then moves to the compute cores. Linux only; elsewhere, or with
// a single core, nothing is placed. The guard restores the calling thread's affinity.
#pragma once

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

namespace trainer {

class core_placement {
public:
    // ranks: the ranks computing on this machine (threads here, or processes of one host).
    explicit core_placement(int ranks)
    {
#if defined(__linux__)
        active_ = pthread_getaffinity_np(pthread_self(), sizeof saved_, &saved_) == 0 && CPU_COUNT(&saved_) >= 2 &&
            CPU_COUNT(&saved_) < 2 * ranks;
        if (!active_)
            return;
        CPU_ZERO(&compute_);
        CPU_ZERO(&communicate_);
        int last = -1;
        for (int c = 0; c < CPU_SETSIZE; ++c)
            if (CPU_ISSET(c, &saved_)) {
                CPU_SET(c, &compute_);
                last = c;
            }
        CPU_CLR(last, &compute_);
        CPU_SET(last, &communicate_);
#else
        (void)ranks;
#endif
    }

    core_placement(const core_placement&) = delete;
    core_placement& operator=(const core_placement&) = delete;

    ~core_placement()
    {
#if defined(__linux__)
        if (active_)
            pthread_setaffinity_np(pthread_self(), sizeof saved_, &saved_);
#endif
    }

    bool active() const noexcept { return active_; }

    // Moves the calling thread to the compute cores.
    void compute() noexcept { place(true); }
    // Moves the calling thread to the communication core; threads it creates start there.
    void communicate() noexcept { place(false); }

private:
    void place([[maybe_unused]] bool computing) noexcept
    {
#if defined(__linux__)
        if (active_)
            pthread_setaffinity_np(pthread_self(), sizeof(cpu_set_t), computing ? &compute_ : &communicate_);
#endif
    }

    bool active_ = false;
#if defined(__linux__)
    cpu_set_t saved_{}, compute_{}, communicate_{};
#endif
};

} // namespace trainer
