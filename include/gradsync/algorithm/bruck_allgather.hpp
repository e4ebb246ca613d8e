// Bruck's allgather: ceil(log2 N) steps at distances d = 1, 2, 4, ...: at each, a rank sends
// the first min(d, N-d) blocks it holds to rank r-d and appends as many from rank r+d (mod
// N). It holds them in the plan's scratch, rotated so that its own comes first (scratch
// block i is rank (r+i) mod N's), and copies them into place after the last step. Recursive
// doubling's messages and bytes for any N, where recursive doubling needs a power of two (or
// a folding step, two more messages).
//
// Cost (N ranks, M = N*b bytes a rank's data holds, b bytes a block, P the largest power of
// two <= N, F = 1 when N is not a power of two, else 0, alpha per message, beta per byte
// sent; planner::bruck_allgather_cost, checked by tests/test_cost_formulas.cpp):
// ceil(log2 N) = log2(P) + F messages, N-1 blocks in all. The copies into and out of the
// scratch (2*M bytes of memory) are left out, as every formula leaves out local copies.
// cost: (log2(P) + F)*alpha + (N-1)/N*M*beta
// The latency path: the choice for small blocks (selector/automatic_allgather.hpp). Its
// messages grow to half the data and go to ranks far apart, so the ring is better for large
// ones. Blocks are cut as exchanges cut them (message_cut: eager pieces).
//
// Preconditions: any N >= 1 and any block size (0 sends nothing); the scratch holds N*b
// bytes. Every rank ends with every rank's bits: they are copied, never computed.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <gradsync/core/codes.hpp>
#include <gradsync/plan/allgather_plan.hpp>

namespace gradsync {

struct bruck_allgather {
    static constexpr std::uint32_t code = codes::bruck_allgather;
    static constexpr const char* name = "bruck_allgather";
};

template <communicator C>
class bruck_allgather_plan : public plan_types<bruck_allgather, C, std::span<std::byte>> {
public:
    bruck_allgather_plan(const C& comm, std::size_t block_bytes, const plan_options<bruck_allgather>& options)
        : rank_(comm.rank()), size_(comm.size()), block_bytes_(block_bytes), cut_(cut_for(comm, options.pipeline)),
          scratch_(std::size_t(size_) * block_bytes)
    {
        std::size_t most = 0; // a step's requests; message_cut's count need not grow with the size
        for (int d = 1; d < size_; d *= 2)
            most = std::max(most, 2 * cut_.messages<std::byte>(bytes_at(d)));
        requests_.resize(most);
    }

    std::size_t count() const noexcept { return std::size_t(size_) * block_bytes_; }
    std::size_t block_bytes() const noexcept { return block_bytes_; }

    void run(C& comm, std::span<std::byte> data, int tag)
    {
        const int n = size_, r = rank_;
        const std::span<std::byte> held(scratch_);
        const std::size_t own = std::size_t(r) * block_bytes_, after = data.size() - own - block_bytes_;
        std::ranges::copy(data.subspan(own, block_bytes_), held.begin());
        for (int d = 1; d < n; d *= 2) {
            const std::size_t bytes = bytes_at(d);
            exchange<std::byte>(comm, tag, (r - d + n) % n, held.first(bytes), (r + d) % n,
                                held.subspan(std::size_t(d) * block_bytes_, bytes), cut_, requests_);
        }
        // Back into place: scratch blocks 1 .. N-r-1 are ranks r+1 .. N-1, the rest ranks 0 .. r-1.
        std::ranges::copy(held.subspan(block_bytes_, after), data.begin() + std::ptrdiff_t(own + block_bytes_));
        std::ranges::copy(held.subspan(block_bytes_ + after, own), data.begin());
    }

private:
    // Bytes a rank sends and receives at distance d.
    std::size_t bytes_at(int d) const noexcept { return std::size_t(std::min(d, size_ - d)) * block_bytes_; }

    int rank_, size_;
    std::size_t block_bytes_;
    message_cut cut_;
    std::vector<std::byte> scratch_;
    std::vector<typename C::request> requests_; // after scratch_: pending requests die first
};

} // namespace gradsync
