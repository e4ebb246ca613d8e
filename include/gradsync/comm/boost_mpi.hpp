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
#pragma once

#include <boost/mpi/communicator.hpp>
#include <boost/mpi/exception.hpp>
#include <boost/mpi/request.hpp>
#include <mpi.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include <gradsync/comm/mpi.hpp>
#include <gradsync/communicator.hpp>
#include <gradsync/error.hpp>

namespace gradsync {

class boost_mpi_communicator {
public:
    struct request {
        std::array<boost::mpi::request, 2> first;
        std::vector<boost::mpi::request> more;
        std::size_t parts = 0;
        std::size_t bytes = 0;
        bool receive = false;
        int peer = 0;
    };

    static constexpr std::size_t default_eager_limit = 4000;

    explicit boost_mpi_communicator(const boost::mpi::communicator& comm, std::size_t eager = default_eager_limit)
        : comm_(comm), eager_(eager)
    {
        MPI_Comm raw = comm_;
        MPI_Comm_get_errhandler(raw, &previous_);
        MPI_Comm_set_errhandler(raw, MPI_ERRORS_RETURN);
    }

    boost_mpi_communicator(const boost_mpi_communicator&) = delete;
    boost_mpi_communicator& operator=(const boost_mpi_communicator&) = delete;

    ~boost_mpi_communicator()
    {
        MPI_Comm raw = comm_;
        MPI_Comm_set_errhandler(raw, previous_);
        MPI_Errhandler_free(&previous_);
    }

    int rank() const { return comm_.rank(); }
    int size() const { return comm_.size(); }
    const boost::mpi::communicator& native() const noexcept { return comm_; }
    std::size_t eager_limit() const noexcept { return eager_; }
    // Ranks per node (hierarchical{.ranks_per_node = 0}); collective.
    int ranks_per_node() const { return mpi_ranks_per_node(MPI_Comm(comm_), "gradsync::boost_mpi_communicator"); }

    request isend(std::span<const std::byte> data, int peer, int tag)
    {
        return post(data.size(), peer, false, [&](std::size_t offset, int n) {
            return comm_.isend(peer, tag, reinterpret_cast<const char*>(data.data() + offset), n);
        });
    }

    request irecv(std::span<std::byte> data, int peer, int tag)
    {
        return post(data.size(), peer, true, [&](std::size_t offset, int n) {
            return comm_.irecv(peer, tag, reinterpret_cast<char*>(data.data() + offset), n);
        });
    }

    void wait(request& r)
    {
        std::size_t got = 0;
        try {
            for (std::size_t i = 0; i < r.parts; ++i) {
                const boost::mpi::status s = (i < 2 ? r.first[i] : r.more[i - 2]).wait();
                if (r.receive)
                    got += std::size_t(s.count<char>().value_or(0));
            }
        } catch (const boost::mpi::exception& e) {
            throw communication_error(prefix("wait") + e.what());
        }
        r.parts = 0;
        if (r.receive && got != r.bytes)
            throw communication_error(prefix("wait") + "a message from rank " + std::to_string(r.peer) + " has " +
                                      std::to_string(got) + " bytes, the receive expects " + std::to_string(r.bytes));
    }

private:
    static constexpr std::size_t part_bytes = std::size_t(1) << 30;

    template <class Start>
    request post(std::size_t n, int peer, bool receive, Start start)
    {
        if (peer < 0 || peer >= size())
            throw usage_error(prefix(receive ? "irecv" : "isend") + "peer " + std::to_string(peer) +
                              " is out of range");
        request r;
        r.bytes = n;
        r.receive = receive;
        r.peer = peer;
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

    std::string prefix(const char* what) const
    {
        return "gradsync::boost_mpi_communicator (" + where(*this) + "): " + what + " failed: ";
    }

    boost::mpi::communicator comm_;
    std::size_t eager_;
    MPI_Errhandler previous_ = MPI_ERRHANDLER_NULL;
};

} // namespace gradsync
