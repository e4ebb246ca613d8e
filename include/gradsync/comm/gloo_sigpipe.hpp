// sigpipe_blocked: SIGPIPE held off the calling thread for a scope.
//
// Why: Gloo's TCP transport writes with writev(), which cannot ask for MSG_NOSIGNAL, and a
// write to a peer that is gone raises SIGPIPE, whose default action ends the process; the
// failure should be the communication_error Gloo's EPIPE becomes. Gloo writes from two kinds
// of thread:
//  - its network thread, which a tcp device starts when it is made and which inherits its
//    maker's signal mask: gloo_connect makes the device inside one of these scopes, so that
//    thread never takes SIGPIPE;
//  - the thread that posts (announcements, and the data of a send whose receive was already
//    announced): gloo_communicator posts inside one of these scopes.
// Cost: two system calls where the thread had SIGPIPE unblocked (block, then restore), one
// more to take a SIGPIPE raised meanwhile; none where it was blocked already.
#pragma once

#include <cerrno>
#include <csignal>
#include <ctime>

#include <pthread.h>

namespace gradsync::detail {

class sigpipe_blocked {
public:
    sigpipe_blocked() noexcept
    {
        sigemptyset(&pipe_);
        sigaddset(&pipe_, SIGPIPE);
        sigset_t old;
        if (pthread_sigmask(SIG_BLOCK, &pipe_, &old) == 0 && sigismember(&old, SIGPIPE) == 0) {
            old_ = old;
            restore_ = true;
        }
    }
    sigpipe_blocked(const sigpipe_blocked&) = delete;
    sigpipe_blocked& operator=(const sigpipe_blocked&) = delete;
    ~sigpipe_blocked()
    {
        if (!restore_)
            return;
        // Unblocked until now, so a SIGPIPE pending here was raised inside the scope.
        sigset_t pending;
        if (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1) {
            const timespec now{0, 0};
            while (sigtimedwait(&pipe_, nullptr, &now) < 0 && errno == EINTR) {
            }
        }
        pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    }

private:
    sigset_t pipe_{}, old_{};
    bool restore_ = false;
};

} // namespace gradsync::detail
