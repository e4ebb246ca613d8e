// The vote of uneven inputs: once per iteration every rank says whether it still has data,
// and every rank learns who does, so that a rank that ran out (join()) keeps answering the
// others' reductions until none has data left. One Sum allreduce of N small counts, exact in
// float; planned once.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include <gradsync/collective/allreduce.hpp>
#include <gradsync/comm/communicator.hpp>

namespace gradsync::torch_binding {

template <communicator Comm>
class active_vote {
public:
    explicit active_vote(Comm& comm)
        : comm_(&comm), votes_(std::size_t(comm.size())), active_(std::size_t(comm.size())),
          sum_(comm, votes_.size())
    {
    }

    // Which ranks voted active this time; all ranks get the same answer. Collective.
    const std::vector<char>& cast(bool active)
    {
        std::fill(votes_.begin(), votes_.end(), 0.0f);
        votes_[std::size_t(comm_->rank())] = active ? 1.0f : 0.0f;
        sum_(std::span<float>(votes_));
        for (std::size_t k = 0; k < votes_.size(); ++k)
            active_[k] = votes_[k] != 0.0f;
        return active_;
    }

private:
    Comm* comm_;
    std::vector<float> votes_;
    std::vector<char> active_;
    reducer<float, Comm, sum> sum_;
};

} // namespace gradsync::torch_binding
