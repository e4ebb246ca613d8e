// automatic: picks an algorithm once, when the reducer is planned, from the vector size in
// bytes (M) and the rank count (N):
//   M <= small_bytes or count < N   -> recursive_doubling (latency-bound: log2 N rounds)
//   N a power of two                -> recursive_halving  (log2 N rounds, optimal bandwidth)
//   otherwise, M >= ring_bytes      -> ring  (no folding: folding moves 2M more bytes on
//                                             the folded ranks)
//   otherwise                       -> recursive_halving
// Every rank computes the same choice from the same (M, N), so no agreement is needed
// beyond the reducer's usual check. The rule is the same for every policy and every memory
// (memory/host_memory.hpp): the chosen algorithm's plan for the policy and memory comes from
// the table (selector/plan_table.hpp), so a memory space makes the host path's choice and sends its
// messages.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <variant>

#include <gradsync/algorithm/recursive_doubling.hpp>
#include <gradsync/algorithm/recursive_halving.hpp>
#include <gradsync/algorithm/ring.hpp>
#include <gradsync/core/codes.hpp>
#include <gradsync/core/hash.hpp>
#include <gradsync/plan/plan.hpp>

namespace gradsync {

struct automatic {
    static constexpr std::uint32_t code = codes::automatic;
    static constexpr const char* name = "automatic";
    std::size_t small_bytes = std::size_t(32) << 10;
    std::size_t ring_bytes = std::size_t(1) << 20;

    // Fingerprint of the thresholds, which every rank must share (checked by the reducer).
    std::uint64_t parameter() const noexcept { return detail::mix_in(detail::mix(small_bytes), ring_bytes); }

    // Code of the algorithm chosen for `bytes` per rank over `ranks` ranks.
    std::uint32_t choose(std::size_t bytes, std::size_t count, int ranks) const noexcept
    {
        if (bytes <= small_bytes || count < std::size_t(ranks))
            return recursive_doubling::code;
        if (std::has_single_bit(unsigned(ranks)) || bytes < ring_bytes)
            return recursive_halving::code;
        return ring::code;
    }
};

// The three candidates' plans come from the table, which must be complete where these are
// instantiated (selector/plan_table.hpp includes this header and is included by the reducers).
template <element T, communicator C, class Policy, class Memory = host_memory>
using candidate_plan = std::variant<plan_of<T, C, recursive_doubling, Policy, Memory>,
                                    plan_of<T, C, recursive_halving, Policy, Memory>,
                                    plan_of<T, C, ring, Policy, Memory>>;

// The plan of the candidate with that code (any other code: ring), with those pipeline
// options: what automatic and tuned both build.
template <element T, communicator C, class Policy, class Memory = host_memory>
candidate_plan<T, C, Policy, Memory> make_candidate(const C& comm, const layer_layout& layout, std::uint32_t code,
                                                    const pipeline_options& pipeline)
{
    using variant = candidate_plan<T, C, Policy, Memory>;
    switch (code) {
    case recursive_doubling::code:
        return variant(std::in_place_index<0>, comm, layout, plan_options<recursive_doubling>{{}, pipeline});
    case recursive_halving::code:
        return variant(std::in_place_index<1>, comm, layout, plan_options<recursive_halving>{{}, pipeline});
    default:
        return variant(std::in_place_index<2>, comm, layout, plan_options<ring>{{}, pipeline});
    }
}

template <element T, communicator C, class Policy, class Memory = host_memory>
class automatic_plan : public plan_types<automatic, C, typename Memory::template span<T>> {
public:
    automatic_plan(const C& comm, const layer_layout& layout, const plan_options<automatic>& options)
        : chosen_(options.algorithm.choose(layout.total() * sizeof(T), layout.total(), comm.size())),
          plan_(make_candidate<T, C, Policy, Memory>(comm, layout, chosen_, options.pipeline))
    {
    }

    std::size_t count() const noexcept
    {
        return std::visit([](const auto& p) { return p.count(); }, plan_);
    }
    std::size_t scratch_bytes() const noexcept
    {
        return std::visit([](const auto& p) { return p.scratch_bytes(); }, plan_);
    }

    // Code of the algorithm this plan runs (ring::code, recursive_halving::code, ...).
    std::uint32_t chosen() const noexcept { return chosen_; }

    void run(C& comm, typename Memory::template span<T> data, int tag)
    {
        std::visit([&](auto& p) { p.run(comm, data, tag); }, plan_);
    }

private:
    std::uint32_t chosen_;
    candidate_plan<T, C, Policy, Memory> plan_;
};

} // namespace gradsync
