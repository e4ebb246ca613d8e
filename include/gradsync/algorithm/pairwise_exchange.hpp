// Pairwise exchange all-to-all: N-1 steps; at step k rank r sends its block for rank
// t = (r+k) mod N to t and receives, from f = (r-k) mod N, f's block for r, whose place in
// r's data is block f. That place is free once block f has gone to f, at step N-k: the
// blocks of the steps k > N/2 are received there directly, those of k <= N/2 into the plan's
// scratch and copied into place after the last step. The own block stays where it is.
//
// Cost (N ranks, M = N*b bytes a rank's data holds, b bytes a block, alpha per message, beta
// per byte sent; planner::block_per_peer_cost, checked by tests/test_cost_formulas.cpp): N-1
// steps, each sending one block and receiving one. The copies out of the scratch (at most
// M/2 bytes of memory) are left out, as every formula leaves out local copies.
// cost: (N-1)*alpha + (N-1)/N*M*beta
// Blocks are cut as exchanges cut a block (message_cut: eager pieces).
//
// Preconditions: any N >= 1 and any block size (0 sends nothing); the scratch holds
// floor(N/2) blocks. Every rank ends with the bits each rank had for it; nothing is computed.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <gradsync/core/codes.hpp>
#include <gradsync/plan/plan.hpp>

namespace gradsync {

struct pairwise_exchange {
    static constexpr std::uint32_t code = codes::pairwise_exchange;
    static constexpr const char* name = "pairwise_exchange";
};

template <communicator C>
class pairwise_exchange_plan : public plan_types<pairwise_exchange, C, std::span<std::byte>> {
public:
    pairwise_exchange_plan(const C& comm, std::size_t block_bytes, const plan_options<pairwise_exchange>& options)
        : rank_(comm.rank()), size_(comm.size()), block_bytes_(block_bytes), cut_(cut_for(comm, options.pipeline)),
          scratch_(std::size_t(size_ / 2) * block_bytes), requests_(2 * cut_.messages<std::byte>(block_bytes))
    {
    }

    std::size_t count() const noexcept { return std::size_t(size_) * block_bytes_; }
    std::size_t block_bytes() const noexcept { return block_bytes_; }

    void run(C& comm, std::span<std::byte> data, int tag)
    {
        const int n = size_, r = rank_;
        const std::span<std::byte> early(scratch_);
        for (int k = 1; k < n; ++k) {
            const int to = (r + k) % n, from = (r - k + n) % n;
            const std::span<std::byte> in = 2 * k <= n ? early.subspan(std::size_t(k - 1) * block_bytes_, block_bytes_)
                                                       : block_of_rank(data, from);
            exchange<std::byte>(comm, tag, to, block_of_rank(data, to), from, in, cut_, requests_);
        }
        for (int k = 1; 2 * k <= n; ++k)
            std::ranges::copy(early.subspan(std::size_t(k - 1) * block_bytes_, block_bytes_),
                              block_of_rank(data, (r - k + n) % n).begin());
    }

private:
    std::span<std::byte> block_of_rank(std::span<std::byte> data, int j) const noexcept
    {
        return data.subspan(std::size_t(j) * block_bytes_, block_bytes_);
    }

    int rank_, size_;
    std::size_t block_bytes_;
    message_cut cut_;
    std::vector<std::byte> scratch_;
    std::vector<typename C::request> requests_; // after scratch_: pending requests die first
};

} // namespace gradsync
