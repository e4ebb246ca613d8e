// subgroup: a communicator over some of another communicator's ranks (the ranks of one
// node, or one rank of every node), for algorithms composed of smaller ones. Ranks and
// peers are positions in `members`; messages go through the parent unchanged (same tag),
// so it costs nothing and allocates nothing; its tag limit and release() are the parent's.
// It does not own the member list.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <span>

#include <gradsync/comm/communicator.hpp>
#include <gradsync/core/error.hpp>

namespace gradsync {

template <communicator C>
class subgroup {
public:
    using request = typename C::request;

    // members: parent ranks in subgroup order; the parent's own rank must be among them.
    subgroup(C& parent, std::span<const int> members) : parent_(&parent), members_(members)
    {
        const auto me = std::find(members.begin(), members.end(), parent.rank());
        if (me == members.end())
            throw usage_error("gradsync::subgroup (" + where(parent) + "): this rank is not a member");
        rank_ = int(me - members.begin());
    }

    int rank() const noexcept { return rank_; }
    int size() const noexcept { return int(members_.size()); }
    // The communicator this is a part of, and the rank there of this one's `peer`.
    const C& parent() const noexcept { return *parent_; }
    int parent_rank(int peer) const noexcept { return members_[std::size_t(peer)]; }
    std::size_t eager_limit() const { return gradsync::eager_limit(*parent_); }
    int tag_limit() const { return gradsync::tag_limit(*parent_); }
    bool receives_first() const { return gradsync::receives_first(*parent_); }
    void release()
        requires releasable<C>
    {
        parent_->release();
    }
    bool released() const { return gradsync::is_released(*parent_); }
    std::chrono::nanoseconds deadline() const { return gradsync::wait_deadline(*parent_); }
    bool may_share_memory() const { return gradsync::may_share_memory(*parent_); }

    request isend(std::span<const std::byte> data, int peer, int tag)
    {
        return parent_->isend(data, members_[std::size_t(peer)], tag);
    }
    request irecv(std::span<std::byte> data, int peer, int tag)
    {
        return parent_->irecv(data, members_[std::size_t(peer)], tag);
    }
    void wait(request& r) { parent_->wait(r); }

private:
    C* parent_;
    std::span<const int> members_;
    int rank_ = 0;
};

} // namespace gradsync
