// automatic: picks an algorithm once, when the reducer is planned. Ranks of one host (every
// rank of the group on rank 0's host, able to map one shared region: comm/shared/region.hpp)
// reduce through shared memory (shared_memory), faster than any message at every size
// (docs/results.md); automatic{.share_memory = false} leaves it out. Otherwise, from the
// vector size in bytes (M), the rank count (N) and the ranks per host (k: the communicator's
// ranks_per_node() where it has one and hosts hold equal runs of consecutive ranks, else 1),
// with L = k*M where 1 < k < N (in recursive doubling's steps between hosts the k ranks of a
// host send M each over the host's one link: on the simulated hosts of 8 ranks recursive
// halving took 0.15 to 0.93 of its time from 8 to 32 KiB, docs/results_scale.md), else L = M:
//   L <= small_bytes or count < N   -> recursive_doubling (latency-bound: log2 N rounds)
//   N a power of two                -> recursive_halving  (log2 N rounds, optimal bandwidth)
//   otherwise, M >= ring_bytes      -> ring  (no folding: folding moves 2M more bytes on
//                                             the folded ranks)
//   otherwise                       -> recursive_halving
// Every rank computes the same choice: the rule from the same (M, N, k), the shared region's
// verdict from rank 0. The rule is the same for every policy and every memory
// (memory/host_memory.hpp): the chosen algorithm's plan for the policy and memory comes from
// the table (selector/plan_table.hpp), so a memory space makes the host path's choice and sends
// its messages; shared memory is a candidate only where the table has its plan (host memory).
#pragma once

#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <variant>

#include <gradsync/algorithm/recursive_doubling.hpp>
#include <gradsync/algorithm/recursive_halving.hpp>
#include <gradsync/algorithm/ring.hpp>
#include <gradsync/algorithm/shared_memory.hpp>
#include <gradsync/core/codes.hpp>
#include <gradsync/core/error.hpp>
#include <gradsync/core/hash.hpp>
#include <gradsync/plan/plan.hpp>

namespace gradsync {

struct automatic {
    static constexpr std::uint32_t code = codes::automatic;
    static constexpr const char* name = "automatic";
    std::size_t small_bytes = std::size_t(32) << 10;
    std::size_t ring_bytes = std::size_t(1) << 20;
    bool share_memory = true; // ranks of one host: shared_memory

    bool reads_shared_buffer() const noexcept { return share_memory; }

    // Fingerprint of the rule, which every rank must share (checked by the reducer).
    std::uint64_t parameter() const noexcept
    {
        return detail::mix_in(detail::mix_in(detail::mix(small_bytes), ring_bytes), share_memory ? 1 : 0);
    }

    // Code of the message-passing algorithm chosen for `bytes` per rank over `ranks` ranks,
    // `ranks_per_host` of them on each host.
    std::uint32_t choose(std::size_t bytes, std::size_t count, int ranks, int ranks_per_host = 1) const noexcept
    {
        const std::size_t sharing = ranks_per_host > 1 && ranks_per_host < ranks ? std::size_t(ranks_per_host) : 1;
        if (bytes <= small_bytes / sharing || count < std::size_t(ranks)) // L <= small_bytes, L = sharing * M
            return recursive_doubling::code;
        if (std::has_single_bit(unsigned(ranks)) || bytes < ring_bytes)
            return recursive_halving::code;
        return ring::code;
    }
};

// k for automatic::choose: comm.ranks_per_node() where the communicator has it (collective)
// and hosts hold equal runs of consecutive ranks, else 1 (no host shares its link). Only a
// vector that recursive doubling could take asks (`bytes` <= small_bytes): every rank has
// the same bytes, so every rank asks or none does.
template <communicator C>
int ranks_per_host_for(C& comm, const automatic& rule, std::size_t bytes)
{
    if constexpr (requires { { comm.ranks_per_node() } -> std::convertible_to<int>; }) {
        if (bytes > rule.small_bytes || comm.size() < 3)
            return 1;
        try {
            return comm.ranks_per_node();
        } catch (const usage_error&) { // uneven hosts, the same verdict on every rank
            return 1;
        }
    } else {
        return 1;
    }
}

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
    static constexpr bool shares = has_plan<T, C, shared_memory, Policy, Memory>;
    struct no_shared_plan {};
    using shared_plan = std::conditional_t<shares, plan_of<T, C, shared_memory, Policy, Memory>, no_shared_plan>;

public:
    automatic_plan(C& comm, const layer_layout& layout, const plan_options<automatic>& options)
    {
        if constexpr (shares)
            if (options.algorithm.share_memory && comm.size() > 1 &&
                build_if_shared(shared_, comm, layout, options_for(options, shared_memory{}))) {
                chosen_ = shared_memory::code;
                return;
            }
        const std::size_t bytes = layout.total() * sizeof(T);
        chosen_ = options.algorithm.choose(bytes, layout.total(), comm.size(),
                                           ranks_per_host_for(comm, options.algorithm, bytes));
        plan_.emplace(make_candidate<T, C, Policy, Memory>(comm, layout, chosen_, options.pipeline));
    }

    std::size_t count() const noexcept
    {
        return visit(*this, [](const auto& p) { return p.count(); });
    }
    std::size_t scratch_bytes() const noexcept
    {
        return visit(*this, [](const auto& p) { return p.scratch_bytes(); });
    }

    // Code of the algorithm this plan runs (shared_memory::code, ring::code, ...).
    std::uint32_t chosen() const noexcept { return chosen_; }

    void run(C& comm, typename Memory::template span<T> data, int tag)
    {
        visit(*this, [&](auto& p) { p.run(comm, data, tag); });
    }

private:
    // f(the plan chosen), for a const or a mutable automatic_plan.
    template <class Self, class F>
    static decltype(auto) visit(Self& self, F&& f)
    {
        if constexpr (shares)
            if (self.shared_)
                return f(*self.shared_);
        return std::visit(f, *self.plan_);
    }

    std::uint32_t chosen_ = 0;
    std::optional<shared_plan> shared_;
    std::optional<candidate_plan<T, C, Policy, Memory>> plan_;
};

} // namespace gradsync
