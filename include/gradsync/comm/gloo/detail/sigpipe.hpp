// block_sigpipe: SIGPIPE blocked on the calling thread, from its first call on.
//
// Why: Gloo's TCP transport writes with writev(), which cannot ask for MSG_NOSIGNAL, and a
// write to a peer that is gone raises SIGPIPE, whose default action ends the process; the
// failure should be the communication_error Gloo's EPIPE becomes. Gloo writes from two kinds
// of thread:
//  - its network thread, which a tcp device starts when it is made and which inherits its
//    maker's signal mask: gloo_connect blocks SIGPIPE before it makes the device, so that
//    thread never takes SIGPIPE;
//  - the thread that posts (announcements, and the data of a send whose receive was already
//    announced): gloo_communicator blocks SIGPIPE on it before it posts.
// The mask is left blocked rather than restored after each post: blocking and restoring
// costs two or three system calls, a few microseconds each where system calls are slow,
// on every message. A SIGPIPE raised on a blocked thread stays pending, harmlessly, and
// take_sigpipe() takes it where a failure is reported, so that a thread that unblocks
// SIGPIPE later does not receive it then.
// Cost: one system call per thread, the first time; none after it.
#pragma once

#include <cerrno>
#include <csignal>
#include <ctime>

#include <pthread.h>

namespace gradsync::detail {

inline sigset_t sigpipe_set() noexcept
{
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    return pipe;
}

inline void block_sigpipe() noexcept
{
    thread_local bool blocked = false;
    if (blocked)
        return;
    const sigset_t pipe = sigpipe_set();
    blocked = pthread_sigmask(SIG_BLOCK, &pipe, nullptr) == 0;
}

// Takes a SIGPIPE pending on the calling thread (or on the process), if there is one.
inline void take_sigpipe() noexcept
{
    sigset_t pending;
    if (sigpending(&pending) != 0 || sigismember(&pending, SIGPIPE) != 1)
        return;
    const sigset_t pipe = sigpipe_set();
    const timespec now{0, 0};
    while (sigtimedwait(&pipe, nullptr, &now) < 0 && errno == EINTR) {
    }
}

} // namespace gradsync::detail
