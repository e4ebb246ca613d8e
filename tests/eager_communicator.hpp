// A local_communicator whose eager limit is 256 bytes, as if it had a rendezvous protocol:
// blocks of up to 16 * 256 bytes are then cut into eager pieces (plan/exchange.hpp), as MPI's
// and Gloo's are, so that the threaded tests run the plans' cut paths too.
#pragma once

#include <cstddef>
#include <span>

#include <gradsync/comm/local/local.hpp>

namespace gradsync_test {

class eager_communicator {
public:
    using request = gradsync::local_communicator::request;
    explicit eager_communicator(gradsync::local_communicator& inner) : inner_(&inner) {}
    int rank() const noexcept { return inner_->rank(); }
    int size() const noexcept { return inner_->size(); }
    int tag_limit() const noexcept { return inner_->tag_limit(); }
    std::size_t eager_limit() const noexcept { return 256; }
    request isend(std::span<const std::byte> d, int peer, int tag) { return inner_->isend(d, peer, tag); }
    request irecv(std::span<std::byte> d, int peer, int tag) { return inner_->irecv(d, peer, tag); }
    void wait(request& r) { inner_->wait(r); }

private:
    gradsync::local_communicator* inner_;
};

} // namespace gradsync_test
