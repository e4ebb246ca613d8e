// The plan of a collective in which the root trades one block with every other rank and no
// two other ranks talk: linear_gather (blocks toward the root) and linear_scatter (from it).
// The root posts its N-1 messages at once, block j of its data (b bytes at j*b) with rank j,
// and then waits for them; each other rank's one message with the root is its data whole.
// Blocks go whole: the messages go one way, so eager pieces would gain nothing (send_down,
// plan/exchange.hpp, says why). A block of 0 bytes sends nothing. Request slots: N-1 at the
// root, one elsewhere, made when the plan is built.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include <gradsync/comm/communicator.hpp>
#include <gradsync/plan/plan.hpp>

namespace gradsync {

enum class rooted_direction { toward_root, from_root };

template <class Algorithm, communicator C, rooted_direction Direction>
class rooted_plan : public plan_types<Algorithm, C, std::span<std::byte>> {
public:
    rooted_plan(const C& comm, std::size_t block_bytes, int root)
        : rank_(comm.rank()), size_(comm.size()), root_(root), block_bytes_(block_bytes),
          requests_(rank_ == root ? std::size_t(size_ - 1) : 1)
    {
    }

    // The root's data holds every rank's block, the others' their own.
    std::size_t count() const noexcept { return rank_ == root_ ? std::size_t(size_) * block_bytes_ : block_bytes_; }
    std::size_t block_bytes() const noexcept { return block_bytes_; }
    int root() const noexcept { return root_; }

    void run(C& comm, std::span<std::byte> data, int tag)
    {
        if (block_bytes_ == 0)
            return;
        const bool receives = (Direction == rooted_direction::toward_root) == (rank_ == root_);
        const auto one = [&](std::span<std::byte> block, int peer) {
            return receives ? irecv(comm, block, peer, tag) : isend(comm, std::span<const std::byte>(block), peer, tag);
        };
        std::size_t posted = 0;
        if (rank_ != root_)
            requests_[posted++] = one(data, root_);
        else
            for (int j = 0; j < size_; ++j)
                if (j != root_)
                    requests_[posted++] = one(data.subspan(std::size_t(j) * block_bytes_, block_bytes_), j);
        for (typename C::request& request : std::span(requests_).first(posted))
            comm.wait(request);
    }

private:
    int rank_, size_, root_;
    std::size_t block_bytes_;
    std::vector<typename C::request> requests_;
};

} // namespace gradsync
