// automatic: picks an algorithm once, when the reducer is planned, from the vector size in
// bytes (M) and the rank count (N):
//   M <= small_bytes or count < N   -> recursive_doubling (latency-bound: log2 N rounds)
//   N a power of two                -> recursive_halving  (log2 N rounds, optimal bandwidth)
//   otherwise, M >= ring_bytes      -> ring  (no folding: folding moves 2M more bytes on
//                                             the folded ranks)
//   otherwise                       -> recursive_halving
// Every rank computes the same choice from the same (M, N), so no agreement is needed
// beyond the reducer's usual check. The rule is the same for every policy and every memory
// (algorithm/memory.hpp): each algorithm runs its own plan for the policy (Adasum has plans
// of its own) with the vector in Memory, so a memory space makes the host path's choice and
// sends its messages.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <variant>

#include <gradsync/algorithm/exchange.hpp>
#include <gradsync/algorithm/memory.hpp>
#include <gradsync/algorithm/recursive_doubling.hpp>
#include <gradsync/algorithm/recursive_halving.hpp>
#include <gradsync/algorithm/ring.hpp>
#include <gradsync/communicator.hpp>
#include <gradsync/layout.hpp>
#include <gradsync/types.hpp>

namespace gradsync {

template <element T, communicator C, class Policy, class Memory = host_memory>
class automatic_plan;

struct automatic {
    static constexpr std::uint32_t code = 0;
    static constexpr const char* name = "automatic";
    std::size_t small_bytes = std::size_t(32) << 10;
    std::size_t ring_bytes = std::size_t(1) << 20;
    template <element T, communicator C, class P, class Memory = host_memory>
    using plan = automatic_plan<T, C, P, Memory>;

    // Fingerprint of the thresholds, which every rank must share (checked by the reducer).
    std::uint64_t parameter() const noexcept { return small_bytes ^ (std::uint64_t(ring_bytes) * 0x9e3779b97f4a7c15ull); }

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

template <element T, communicator C, class Policy, class Memory>
class automatic_plan {
public:
    automatic_plan(const C& comm, const layer_layout& layout, const automatic& rule, const pipeline_options& pipe)
        : chosen_(rule.choose(layout.total() * sizeof(T), layout.total(), comm.size())),
          plan_(make(comm, layout, chosen_, pipe))
    {
    }

    std::size_t count() const noexcept
    {
        return std::visit([](const auto& p) { return p.count(); }, plan_);
    }

    // Code of the algorithm this plan runs (ring::code, recursive_halving::code, ...).
    std::uint32_t chosen() const noexcept { return chosen_; }

    template <class P>
    void run(C& comm, typename Memory::template span<T> data, int tag)
    {
        std::visit([&](auto& p) { p.template run<P>(comm, data, tag); }, plan_);
    }

private:
    using variant = std::variant<recursive_doubling::plan<T, C, Policy, Memory>,
                                 recursive_halving::plan<T, C, Policy, Memory>, ring::plan<T, C, Policy, Memory>>;

    static variant make(const C& comm, const layer_layout& layout, std::uint32_t chosen, const pipeline_options& pipe)
    {
        switch (chosen) {
        case recursive_doubling::code:
            return variant(std::in_place_index<0>, comm, layout, recursive_doubling{}, pipe);
        case recursive_halving::code:
            return variant(std::in_place_index<1>, comm, layout, recursive_halving{}, pipe);
        default:
            return variant(std::in_place_index<2>, comm, layout, ring{}, pipe);
        }
    }

    std::uint32_t chosen_;
    variant plan_;
};

} // namespace gradsync
