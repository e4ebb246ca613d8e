// automatic_allgather: picks an allgather algorithm once, when the allgatherer is planned,
// from the bytes a rank's data holds (M = N*b) and the rank count (N):
//   N >= 3 and M < bruck_bytes -> bruck_allgather (ceil(log2 N) messages)
//   otherwise                   -> ring_allgather  (N-1 messages, to a neighbour)
// For N <= 2 both send one message of one block, and the ring copies nothing. The default
// threshold is MPICH's between the same two allgathers (MPIR_CVAR_ALLGATHER_SHORT_MSG_SIZE,
// 80 KiB of the whole data); it is not measured here (docs/algorithms.md, "Allgather").
// Every rank computes the same choice from the same (M, N), so no agreement is needed beyond
// the allgatherer's usual check, which compares the threshold.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <variant>

#include <gradsync/algorithm/bruck_allgather.hpp>
#include <gradsync/algorithm/ring_allgather.hpp>
#include <gradsync/core/codes.hpp>
#include <gradsync/plan/allgather_plan.hpp>

namespace gradsync {

struct automatic_allgather {
    static constexpr std::uint32_t code = codes::automatic_allgather;
    static constexpr const char* name = "automatic_allgather";
    std::size_t bruck_bytes = 80 << 10;

    // The threshold, which every rank must share (checked by the allgatherer).
    std::uint64_t parameter() const noexcept { return bruck_bytes; }

    // Code of the algorithm chosen for blocks of block_bytes over `ranks` ranks.
    std::uint32_t choose(std::size_t block_bytes, int ranks) const noexcept
    {
        // N*b < bruck_bytes, without the product (which may overflow).
        if (ranks >= 3 && bruck_bytes > 0 && block_bytes <= (bruck_bytes - 1) / std::size_t(ranks))
            return bruck_allgather::code;
        return ring_allgather::code;
    }
};

// The candidates' plans come from the table (selector/plan_table.hpp), complete where this is
// instantiated.
template <communicator C>
class automatic_allgather_plan : public plan_types<automatic_allgather, C, std::span<std::byte>> {
    using bruck = allgather_plan_of<C, bruck_allgather>;
    using ring = allgather_plan_of<C, ring_allgather>;

public:
    automatic_allgather_plan(const C& comm, std::size_t block_bytes, const plan_options<automatic_allgather>& options)
        : chosen_(options.algorithm.choose(block_bytes, comm.size())),
          plan_(chosen_ == bruck_allgather::code
                    ? std::variant<bruck, ring>(std::in_place_index<0>, comm, block_bytes,
                                                options_for(options, bruck_allgather{}))
                    : std::variant<bruck, ring>(std::in_place_index<1>, comm, block_bytes,
                                                options_for(options, ring_allgather{})))
    {
    }

    std::size_t count() const noexcept
    {
        return std::visit([](const auto& p) { return p.count(); }, plan_);
    }
    std::size_t block_bytes() const noexcept
    {
        return std::visit([](const auto& p) { return p.block_bytes(); }, plan_);
    }

    // Code of the algorithm this plan runs (bruck_allgather::code or ring_allgather::code).
    std::uint32_t chosen() const noexcept { return chosen_; }

    void run(C& comm, std::span<std::byte> data, int tag)
    {
        std::visit([&](auto& p) { p.run(comm, data, tag); }, plan_);
    }

private:
    std::uint32_t chosen_;
    std::variant<bruck, ring> plan_;
};

} // namespace gradsync
