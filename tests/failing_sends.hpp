// A communicator around another whose rank 0 fails its sends to the other node (ranks 2 and 3
// of 4, hierarchical{2}) once `armed` is set: hierarchical's cross-node stage then fails
// between its node stage's two halves. Deadline and release are the inner communicator's, so
// the shared-memory waits keep to them.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <span>
#include <string>

#include <gradsync/core/error.hpp>

namespace gradsync_test {

template <class Inner>
class failing_sends {
public:
    using request = typename Inner::request;
    failing_sends(Inner& inner, const std::atomic<bool>& armed) : inner_(&inner), armed_(&armed) {}
    int rank() const noexcept { return inner_->rank(); }
    int size() const noexcept { return inner_->size(); }
    int tag_limit() const noexcept { return inner_->tag_limit(); }
    std::chrono::nanoseconds deadline() const { return inner_->deadline(); }
    bool released() const noexcept { return inner_->released(); }
    request isend(std::span<const std::byte> d, int peer, int tag)
    {
        if (armed_->load() && rank() == 0 && peer / 2 != 0)
            throw gradsync::communication_error("rank 0's planted failure of its send to rank " + std::to_string(peer));
        return inner_->isend(d, peer, tag);
    }
    request irecv(std::span<std::byte> d, int peer, int tag) { return inner_->irecv(d, peer, tag); }
    void wait(request& r) { inner_->wait(r); }

private:
    Inner* inner_;
    const std::atomic<bool>* armed_;
};

} // namespace gradsync_test
