// boost_mpi_communicator: a wrapper of boost::mpi::communicator.
//
// Messages travel through Boost.MPI's own isend/irecv of char arrays. Boost.MPI counts are
// int, so a message of more than 1 GiB is cut into 1 GiB parts (the first two requests live
// in the request itself; only messages over 2 GiB use a small vector). A receive must get
// exactly the bytes it asked for; a shorter message is a communication_error.
// Boost.MPI reports MPI failures as boost::mpi::exception; they are rethrown as
// communication_error naming the call and the rank. MPI_ERRORS_RETURN is installed on the
// underlying communicator for the wrapper's lifetime so that failures reach Boost.MPI as
// return codes instead of aborting.
//
// Options, waits, release() and dropped requests are as for mpi_communicator (comm/mpi/mpi.hpp):
// mpi_options, deadlines, foreign stamps, cancelled receives, and nothing asked of MPI once
// it is finalized.
#pragma once

#include <boost/mpi/communicator.hpp>
#include <boost/mpi/environment.hpp>
#include <boost/mpi/exception.hpp>
#include <boost/mpi/request.hpp>
#include <mpi.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include <gradsync/comm/communicator.hpp>
#include <gradsync/comm/detail/owned_request.hpp>
#include <gradsync/comm/shared/board.hpp>
#include <gradsync/comm/mpi/detail/polling.hpp>
#include <gradsync/comm/mpi/mpi.hpp>
#include <gradsync/core/error.hpp>
#include <gradsync/core/tags.hpp>

namespace gradsync {

class boost_mpi_communicator {
public:
    // A request's record; requests are detail::owned_request<request_state>.
    class request_state {
        friend class boost_mpi_communicator;

    protected:
        request_state() = default;

        boost::mpi::request& part(std::size_t i) { return i < 2 ? first[i] : more[i - 2]; }

        void take(request_state& o) noexcept
        {
            first = o.first;
            more = std::move(o.more);
            parts = std::exchange(o.parts, 0);
            done = std::exchange(o.done, 0);
            bytes = o.bytes;
            receive = o.receive;
            peer = o.peer;
            tag = o.tag;
            cancel_bound = o.cancel_bound;
            broken = o.broken;
        }

        // Receives not waited for are cancelled, so that nothing lands in their buffer later;
        // the cancel's wait is bounded as mpi_communicator's.
        void abandon() noexcept
        {
            if (done == parts || !receive || detail::mpi_finalized()) {
                parts = done = 0;
                return;
            }
            try {
                for (std::size_t i = done; i < parts && !broken->load(std::memory_order_relaxed); ++i) {
                    part(i).cancel();
                    if (!detail::cancel_completes([&] { return bool(part(i).test()); }, cancel_bound))
                        broken->store(true, std::memory_order_relaxed);
                }
            } catch (const boost::mpi::exception&) {
            }
            parts = done = 0;
        }

        std::array<boost::mpi::request, 2> first;
        std::vector<boost::mpi::request> more;
        std::size_t parts = 0;
        std::size_t done = 0; // parts waited for
        std::size_t bytes = 0;
        bool receive = false;
        int peer = 0;
        int tag = 0;
        std::chrono::nanoseconds cancel_bound{0};
        std::atomic<bool>* broken = nullptr; // the communicator's: a cancel did not complete
    };
    using request = detail::owned_request<request_state>;

    static constexpr std::size_t default_eager_limit = mpi_options{}.eager_limit;

    explicit boost_mpi_communicator(const boost::mpi::communicator& comm, mpi_options options = {})
        : comm_(comm), options_(options)
    {
        if (options_.deadline.count() < 0)
            throw usage_error("gradsync::boost_mpi_communicator: the deadline must not be negative");
        MPI_Comm raw = comm_;
        MPI_Comm_get_errhandler(raw, &previous_);
        MPI_Comm_set_errhandler(raw, MPI_ERRORS_RETURN);
        tag_limit_ = boost::mpi::environment::max_tag();
    }

    boost_mpi_communicator(const boost_mpi_communicator&) = delete;
    boost_mpi_communicator& operator=(const boost_mpi_communicator&) = delete;

    ~boost_mpi_communicator()
    {
        if (detail::mpi_finalized())
            return;
        MPI_Comm raw = comm_;
        MPI_Comm_set_errhandler(raw, previous_);
        MPI_Errhandler_free(&previous_);
    }

    int rank() const { return comm_.rank(); }
    int size() const { return comm_.size(); }
    const boost::mpi::communicator& native() const noexcept { return comm_; }
    std::size_t eager_limit() const noexcept { return options_.eager_limit; }
    int tag_limit() const noexcept { return tag_limit_; }
    const mpi_options& options() const noexcept { return options_; }
    // Ends every wait, now and later, with aborted_error (comm/communicator.hpp); any thread.
    void release() noexcept { released_.store(true, std::memory_order_relaxed); }
    bool released() const noexcept { return released_.load(std::memory_order_relaxed); }
    // Where the collectives built on this communicator keep their position board
    // (comm/shared/board.hpp).
    board_holder& board() noexcept { return board_; }
    std::chrono::nanoseconds deadline() const noexcept { return options_.deadline; }
    // Ranks per node (hierarchical{.ranks_per_node = 0}); collective.
    int ranks_per_node() const { return mpi_ranks_per_node(MPI_Comm(comm_), "gradsync::boost_mpi_communicator"); }

    request isend(std::span<const std::byte> data, int peer, int tag)
    {
        return post(data.size(), peer, tag, false, [&](std::size_t offset, int n) {
            return comm_.isend(peer, tag, reinterpret_cast<const char*>(data.data() + offset), n);
        });
    }

    request irecv(std::span<std::byte> data, int peer, int tag)
    {
        return post(data.size(), peer, tag, true, [&](std::size_t offset, int n) {
            return comm_.irecv(peer, tag, reinterpret_cast<char*>(data.data() + offset), n);
        });
    }

    void wait(request& r)
    {
        std::size_t got = 0;
        try {
            for (; r.done < r.parts; ++r.done) {
                boost::mpi::request& part = r.part(r.done);
                boost::optional<boost::mpi::status> s;
                detail::poll_until_done(
                    [&] { return bool(s = part.test()); }, [&] { return r.receive ? foreign_tag(r) : -1; },
                    [&] { return stray_tag(*this, r.peer, r.tag); }, {options_.deadline, &released_},
                    [&](detail::wait_end end, int found, std::chrono::nanoseconds waited) {
                        fail(r, end, found, waited);
                    });
                if (r.receive)
                    got += std::size_t(s->count<char>().value_or(0));
            }
        } catch (const boost::mpi::exception& e) {
            r.abandon();
            throw communication_error(prefix("wait") + e.what());
        }
        r.parts = r.done = 0;
        if (r.receive && got != r.bytes)
            throw communication_error(prefix("wait") + "a message from rank " + std::to_string(r.peer) + " has " +
                                      std::to_string(got) + " bytes, the receive expects " + std::to_string(r.bytes));
    }

private:
    static constexpr std::size_t part_bytes = std::size_t(1) << 30;

    template <class Start>
    request post(std::size_t n, int peer, int tag, bool receive, Start start)
    {
        if (peer < 0 || peer >= size())
            throw usage_error(prefix(receive ? "irecv" : "isend") + "peer " + std::to_string(peer) +
                              " is out of range");
        if (released_.load(std::memory_order_relaxed))
            throw aborted_error("gradsync::boost_mpi_communicator (" + where(*this) + "): " +
                                (receive ? "irecv" : "isend") + " refused: the communicator was released");
        if (broken_.load(std::memory_order_relaxed))
            throw communication_error(prefix(receive ? "irecv" : "isend") +
                                      "a receive abandoned after a failure could not be cancelled, so MPI "
                                      "may still write its buffer; end the job (gradsync::mpi_abort)");
        request r;
        r.cancel_bound = detail::cancel_bound(options_.deadline);
        r.broken = &broken_;
        r.bytes = n;
        r.receive = receive;
        r.peer = peer;
        r.tag = tag;
        try {
            for (std::size_t offset = 0; offset < n || (n == 0 && r.parts == 0); offset += part_bytes) {
                const int len = int(std::min(part_bytes, n - offset));
                boost::mpi::request q = start(offset, len);
                if (r.parts < 2)
                    r.first[r.parts] = q;
                else
                    r.more.push_back(q);
                ++r.parts;
                if (n == 0)
                    break;
            }
        } catch (const boost::mpi::exception& e) {
            throw communication_error(prefix(receive ? "irecv" : "isend") + e.what());
        }
        return r;
    }

    // The tag of the peer's next unmatched message if another reducer or call stamped it.
    int foreign_tag(const request& r) const
    {
        try {
            const boost::optional<boost::mpi::status> s = comm_.iprobe(r.peer, boost::mpi::any_tag);
            return s && tags::foreign(s->tag(), r.tag) ? s->tag() : -1;
        } catch (const boost::mpi::exception&) {
            return -1;
        }
    }

    [[noreturn]] void fail(request& r, detail::wait_end end, int found, std::chrono::nanoseconds waited)
    {
        const bool receive = r.receive;
        const int peer = r.peer, tag = r.tag;
        const std::size_t bytes = r.bytes;
        r.abandon();
        detail::throw_wait_end("gradsync::boost_mpi_communicator (" + where(*this) + "): ", receive, bytes, peer, tag, end, found,
                               waited, options_.deadline);
    }

    std::string prefix(const char* what) const
    {
        return "gradsync::boost_mpi_communicator (" + where(*this) + "): " + what + " failed: ";
    }

    boost::mpi::communicator comm_;
    mpi_options options_;
    int tag_limit_ = tags::base_mask;
    MPI_Errhandler previous_ = MPI_ERRHANDLER_NULL;
    std::atomic<bool> released_{false};
    std::atomic<bool> broken_{false};
    board_holder board_;
};

} // namespace gradsync
