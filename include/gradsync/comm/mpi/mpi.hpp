// mpi_communicator: a non-owning wrapper of an MPI_Comm.
//
// Errors: the wrapper installs MPI_ERRORS_RETURN on the communicator for its lifetime (and
// restores the previous handler after) so every failing MPI call becomes a
// communication_error naming the call, the rank and MPI's own message.
//
// Large messages: MPI counts are int. A message of more than 2^31-1 bytes is sent as whole
// 1 GiB elements of a contiguous datatype plus one tail message, so any size works with at
// most two MPI requests per message and no allocation.
//
// eager_limit(): messages above it cost a rendezvous handshake. The default, 4000 bytes,
// keeps payload plus Open MPI's shared-memory header within its 4 KiB eager fragment.
//
// Waits (comm/mpi/detail/polling.hpp): with mpi_options::deadline, a wait longer than it throws
// deadline_error naming the rank, the peer, the size and the tag; a receive whose peer's next
// message carries another reducer's or call's stamp throws foreign_message_error; release()
// ends every wait with aborted_error. A request that is dropped, or whose wait failed, is
// cancelled if it is a receive (so nothing lands in its buffer later) and freed if it is a
// send. A cancel cannot take back a receive MPI has already matched (a large message half
// delivered when its sender's link went down), and waiting for one would be waiting for the
// lost peer: after a deadline, a cancel gets min(deadline, 1 s) to complete; one that does not
// is freed and leaves the communicator broken, so that every later post throws
// communication_error and every later abandoned receive is freed at once. After any of these
// the communicator is out of step with its peers: end the job, with gradsync::mpi_abort where
// a host may be cut off (docs/cluster.md, "When a link fails").
//
// Under SimGrid's SMPI (comm/mpi/detail/simulation.hpp) a wait without a deadline blocks in
// MPI_Wait, so it cannot name a peer at another call; deadlines count simulated time.
//
// MPI_Finalize may come first: once MPI is finalized the destructor and the requests' leave
// MPI alone.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstddef>
#include <span>
#include <string>
#include <thread>
#include <utility>

#include <gradsync/comm/communicator.hpp>
#include <gradsync/comm/detail/owned_request.hpp>
#include <gradsync/comm/shared/board.hpp>
#include <gradsync/comm/mpi/detail/polling.hpp>
#include <gradsync/comm/mpi/detail/simulation.hpp>
#include <gradsync/core/error.hpp>
#include <gradsync/core/tags.hpp>

namespace gradsync {

// Ranks per node of comm from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED). Collective. Nodes
// must hold equal numbers of consecutive ranks; otherwise every rank throws usage_error.
inline int mpi_ranks_per_node(MPI_Comm comm, const char* who)
{
    int rank = 0, size = 0, local = 0, local_rank = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    MPI_Comm shared;
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shared) != MPI_SUCCESS)
        throw communication_error(std::string(who) + ": MPI_Comm_split_type failed");
    MPI_Comm_size(shared, &local);
    MPI_Comm_rank(shared, &local_rank);
    MPI_Comm_free(&shared);
    const int mine[2] = {local_rank == rank % local ? local : -1, local_rank == rank % local ? -local : 1};
    int agreed[2] = {0, 0}; // min of local, min of -local: equal when every node agrees
    if (MPI_Allreduce(mine, agreed, 2, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS)
        throw communication_error(std::string(who) + ": MPI_Allreduce failed");
    if (agreed[0] < 1 || agreed[0] != -agreed[1])
        throw usage_error(std::string(who) + " (" + where(rank, size) +
                          "): nodes do not hold equal numbers of consecutive ranks; give "
                          "hierarchical{.ranks_per_node} explicitly");
    return agreed[0];
}

struct mpi_options {
    // Largest message sent without a rendezvous handshake (see above).
    std::size_t eager_limit = 4000;
    // Longest time one wait() may block; zero waits for ever.
    std::chrono::nanoseconds deadline{0};
};

namespace detail {

inline bool mpi_finalized() noexcept
{
    int done = 0;
    MPI_Finalized(&done);
    return done != 0;
}

// How long a cancelled receive may take to complete: min(deadline, 1 s); zero (no deadline):
// as long as it takes.
inline std::chrono::nanoseconds cancel_bound(std::chrono::nanoseconds deadline) noexcept
{
    return std::min<std::chrono::nanoseconds>(deadline, std::chrono::seconds(1));
}

// Polls `test` (true once the cancelled receive completed) for at most `bound` (zero: no
// bound); true when it completed.
template <class Test>
bool cancel_completes(Test&& test, std::chrono::nanoseconds bound)
{
    const auto until = mpi_wait_clock::now() + bound;
    while (!test()) {
        if (bound.count() != 0 && mpi_wait_clock::now() >= until)
            return false;
        std::this_thread::yield();
    }
    return true;
}

} // namespace detail

class mpi_communicator {
public:
    // A request's record; requests are detail::owned_request<request_state>.
    class request_state {
        friend class mpi_communicator;

    protected:
        request_state() = default;

        bool receive() const noexcept { return expected[0] >= 0; }

        void take(request_state& o) noexcept
        {
            for (int i = 0; i < 2; ++i) {
                part[i] = std::exchange(o.part[i], MPI_REQUEST_NULL);
                type[i] = o.type[i];
                expected[i] = o.expected[i];
            }
            peer = o.peer;
            tag = o.tag;
            bytes = o.bytes;
            cancel_bound = o.cancel_bound;
            broken = o.broken;
        }

        // A receive is cancelled, so that its buffer is never written once dropped; a send,
        // which only reads, is left to MPI. The cancel's wait is bounded (see above).
        void abandon() noexcept
        {
            if (part[0] == MPI_REQUEST_NULL && part[1] == MPI_REQUEST_NULL)
                return;
            if (detail::mpi_finalized())
                return;
            for (MPI_Request& p : part) {
                if (p == MPI_REQUEST_NULL)
                    continue;
                if (!receive() || broken->load(std::memory_order_relaxed)) {
                    MPI_Request_free(&p);
                    continue;
                }
                MPI_Cancel(&p);
                const bool done = detail::cancel_completes(
                    [&] {
                        int flag = 0;
                        return MPI_Test(&p, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || flag != 0;
                    },
                    cancel_bound);
                if (!done) {
                    MPI_Request_free(&p);
                    broken->store(true, std::memory_order_relaxed);
                }
            }
        }

        MPI_Request part[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
        MPI_Datatype type[2] = {MPI_BYTE, MPI_BYTE};
        int expected[2] = {-1, -1}; // receives: the count that must arrive; -1 for sends
        int peer = 0;
        int tag = 0;
        std::size_t bytes = 0;
        std::chrono::nanoseconds cancel_bound{0}; // zero: wait for the cancel
        std::atomic<bool>* broken = nullptr;     // the communicator's: a cancel did not complete
    };
    using request = detail::owned_request<request_state>;
    using clock = detail::mpi_wait_clock; // simulated seconds under SMPI

    static constexpr std::size_t default_eager_limit = mpi_options{}.eager_limit;

    explicit mpi_communicator(MPI_Comm comm, mpi_options options = {}) : comm_(comm), options_(options)
    {
        if (options_.deadline.count() < 0)
            throw usage_error("gradsync::mpi_communicator: the deadline must not be negative");
        check(MPI_Comm_get_errhandler(comm_, &previous_), "MPI_Comm_get_errhandler");
        check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
        check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
        check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
        int* upper = nullptr;
        int found = 0;
        check(MPI_Comm_get_attr(comm_, MPI_TAG_UB, &upper, &found), "MPI_Comm_get_attr(MPI_TAG_UB)");
        tag_limit_ = found && upper ? *upper : tags::base_mask;
        check(MPI_Type_contiguous(1 << 30, MPI_BYTE, &gib_), "MPI_Type_contiguous");
        check(MPI_Type_commit(&gib_), "MPI_Type_commit");
    }

    mpi_communicator(const mpi_communicator&) = delete;
    mpi_communicator& operator=(const mpi_communicator&) = delete;

    ~mpi_communicator()
    {
        if (detail::mpi_finalized())
            return; // MPI freed everything; calling it now would abort the job
        MPI_Type_free(&gib_);
        if (previous_ == MPI_ERRHANDLER_NULL)
            return; // SMPI reports the default handler as null, and setting null is an error
        MPI_Comm_set_errhandler(comm_, previous_);
        MPI_Errhandler_free(&previous_);
    }

    int rank() const noexcept { return rank_; }
    int size() const noexcept { return size_; }
    MPI_Comm native() const noexcept { return comm_; }
    std::size_t eager_limit() const noexcept { return options_.eager_limit; }
    int tag_limit() const noexcept { return tag_limit_; }
    const mpi_options& options() const noexcept { return options_; }
    // Simulated ranks (SMPI) are threads on simulated time: memory shared between them would
    // be waited on where the simulator cannot see it.
    bool may_share_memory() const noexcept { return !detail::simulated_mpi; }

    // Ranks per node (hierarchical{.ranks_per_node = 0}); collective. See mpi_ranks_per_node.
    int ranks_per_node() const { return mpi_ranks_per_node(comm_, "gradsync::mpi_communicator"); }

    // For callers that drive this communicator from a second thread (gradsync::synchronizer):
    // refuses, with a usage_error naming `who`, an MPI initialised below MPI_THREAD_SERIALIZED.
    void check_thread_support(const char* who) const
    {
        int provided = MPI_THREAD_SINGLE;
        check(MPI_Query_thread(&provided), "MPI_Query_thread");
        if (provided < MPI_THREAD_SERIALIZED)
            throw usage_error(std::string(who) + " (" + where(*this) + "): MPI provides " +
                              (provided == MPI_THREAD_SINGLE ? "MPI_THREAD_SINGLE" : "MPI_THREAD_FUNNELED") +
                              ", but a communication thread needs MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE: "
                              "initialise with MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided)");
    }

    // Ends every wait, now and later, with aborted_error (comm/communicator.hpp); any thread.
    void release() noexcept { released_.store(true, std::memory_order_relaxed); }
    bool released() const noexcept { return released_.load(std::memory_order_relaxed); }
    // Where the collectives built on this communicator keep their position board
    // (comm/shared/board.hpp).
    board_holder& board() noexcept { return board_; }
    std::chrono::nanoseconds deadline() const noexcept { return options_.deadline; }

    request isend(std::span<const std::byte> data, int peer, int tag)
    {
        request r;
        post(const_cast<std::byte*>(data.data()), data.size(), peer, tag, r, isend_adapter, "MPI_Isend");
        r.expected[0] = r.expected[1] = -1;
        return r;
    }

    request irecv(std::span<std::byte> data, int peer, int tag)
    {
        request r;
        post(data.data(), data.size(), peer, tag, r, irecv_adapter, "MPI_Irecv");
        return r;
    }

    // A receive must get exactly the bytes it asked for: MPI reports a longer message as
    // truncation, and a shorter one is caught here from the status.
    void wait(request& r)
    {
        for (int i = 0; i < 2; ++i) {
            if (r.part[i] == MPI_REQUEST_NULL)
                continue;
            MPI_Status status;
            int rc = MPI_SUCCESS;
            const bool blocking = detail::simulated_mpi && options_.deadline.count() == 0;
            if (blocking)
                rc = MPI_Wait(&r.part[i], &status);
            else
                detail::poll_until_done<detail::mpi_wait_clock>(
                    [&] {
                        int done = 0;
                        rc = MPI_Test(&r.part[i], &done, &status);
                        return done || rc != MPI_SUCCESS;
                    },
                    [&] { return r.receive() ? foreign_tag(r) : -1; }, [&] { return stray_tag(*this, r.peer, r.tag); },
                    {options_.deadline, &released_},
                    [&](detail::wait_end end, int found, std::chrono::nanoseconds waited) {
                        fail(r, end, found, waited);
                    });
            check(rc, blocking ? "MPI_Wait" : "MPI_Test");
            if (r.expected[i] < 0)
                continue;
            int got = 0;
            check(MPI_Get_count(&status, r.type[i], &got), "MPI_Get_count");
            if (got != r.expected[i])
                throw communication_error("gradsync::mpi_communicator (" + where(*this) + "): a message from rank " +
                                          std::to_string(r.peer) + " is shorter than the receive posted for it");
        }
    }

private:
    using start_fn = int (*)(void*, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request*);

    static int irecv_adapter(void* buf, int n, MPI_Datatype t, int peer, int tag, MPI_Comm c, MPI_Request* r)
    {
        return MPI_Irecv(buf, n, t, peer, tag, c, r);
    }
    static int isend_adapter(void* buf, int n, MPI_Datatype t, int peer, int tag, MPI_Comm c, MPI_Request* r)
    {
        return MPI_Isend(buf, n, t, peer, tag, c, r);
    }

    void post(std::byte* p, std::size_t n, int peer, int tag, request& r, start_fn start, const char* what)
    {
        if (peer < 0 || peer >= size_)
            throw usage_error("gradsync::mpi_communicator (" + where(*this) + "): " + what + " to peer " +
                              std::to_string(peer) + ", which is out of range");
        if (released_.load(std::memory_order_relaxed))
            throw aborted_error("gradsync::mpi_communicator (" + where(*this) + "): " + what +
                                " refused: the communicator was released");
        if (broken_.load(std::memory_order_relaxed))
            throw communication_error("gradsync::mpi_communicator (" + where(*this) + "): " + what +
                                      " refused: a receive abandoned after a failure could not be cancelled, "
                                      "so MPI may still write its buffer; end the job (gradsync::mpi_abort)");
        r.peer = peer;
        r.cancel_bound = detail::cancel_bound(options_.deadline);
        r.broken = &broken_;
        r.tag = tag;
        r.bytes = n;
        if (n <= std::size_t(INT_MAX)) {
            r.expected[0] = int(n);
            check(start(p, int(n), MPI_BYTE, peer, tag, comm_, &r.part[0]), what);
            return;
        }
        const std::size_t whole = n >> 30, tail = n & ((std::size_t(1) << 30) - 1);
        r.type[0] = gib_;
        r.expected[0] = int(whole);
        check(start(p, int(whole), gib_, peer, tag, comm_, &r.part[0]), what);
        if (tail) {
            r.expected[1] = int(tail);
            check(start(p + (whole << 30), int(tail), MPI_BYTE, peer, tag, comm_, &r.part[1]), what);
        }
    }

    // The tag of the peer's next unmatched message if another reducer or call stamped it.
    int foreign_tag(const request& r) const
    {
        int flag = 0;
        MPI_Status status;
        if (MPI_Iprobe(r.peer, MPI_ANY_TAG, comm_, &flag, &status) != MPI_SUCCESS || !flag)
            return -1;
        return tags::foreign(status.MPI_TAG, r.tag) ? status.MPI_TAG : -1;
    }

    [[noreturn]] void fail(request& r, detail::wait_end end, int found, std::chrono::nanoseconds waited)
    {
        const bool receive = r.receive();
        const int peer = r.peer, tag = r.tag;
        const std::size_t bytes = r.bytes;
        r.abandon();
        detail::throw_wait_end("gradsync::mpi_communicator (" + where(*this) + "): ", receive, bytes, peer, tag, end, found,
                               waited, options_.deadline);
    }

    void check(int rc, const char* what) const
    {
        if (rc == MPI_SUCCESS)
            return;
        char text[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, text, &len);
        throw communication_error("gradsync::mpi_communicator (" + where(*this) + "): " + what +
                                  " failed: " + std::string(text, std::size_t(len)));
    }

    MPI_Comm comm_;
    mpi_options options_;
    int rank_ = -1, size_ = 0, tag_limit_ = tags::base_mask;
    MPI_Errhandler previous_ = MPI_ERRHANDLER_NULL;
    MPI_Datatype gib_ = MPI_DATATYPE_NULL;
    std::atomic<bool> released_{false};
    std::atomic<bool> broken_{false};
    board_holder board_;
};

} // namespace gradsync
