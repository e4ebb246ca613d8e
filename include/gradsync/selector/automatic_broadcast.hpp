// automatic_broadcast: picks a broadcast algorithm once, when the broadcaster is planned,
// from the vector size in bytes (M) and the rank count (N):
//   N <= 2, count < N or M < scatter_bytes  -> binomial_tree     (ceil(log2 N) messages)
//   otherwise                                -> scatter_allgather (2*(N-1)/N*M bytes a rank)
// For N = 2 both move M bytes and the tree sends one message fewer; with count < N most of
// the scatter's blocks are empty. The default threshold is the measured crossover
// (docs/algorithms.md, "Broadcast"). Every rank computes the same choice from the same
// (M, N), so no agreement is needed beyond the broadcaster's usual check.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <variant>

#include <gradsync/algorithm/binomial_tree.hpp>
#include <gradsync/algorithm/scatter_allgather.hpp>
#include <gradsync/core/codes.hpp>
#include <gradsync/plan/broadcast_plan.hpp>

namespace gradsync {

struct automatic_broadcast {
    static constexpr std::uint32_t code = codes::automatic_broadcast;
    static constexpr const char* name = "automatic_broadcast";
    std::size_t scatter_bytes = std::size_t(1) << 20;

    // The threshold, which every rank must share (checked by the broadcaster).
    std::uint64_t parameter() const noexcept { return scatter_bytes; }

    // Code of the algorithm chosen for `bytes` over `ranks` ranks.
    std::uint32_t choose(std::size_t bytes, std::size_t count, int ranks) const noexcept
    {
        if (ranks <= 2 || count < std::size_t(ranks) || bytes < scatter_bytes)
            return binomial_tree::code;
        return scatter_allgather::code;
    }
};

// The candidates' plans come from the table (selector/plan_table.hpp), complete where this is
// instantiated.
template <broadcast_element T, communicator C, class Memory = host_memory>
class automatic_broadcast_plan : public plan_types<automatic_broadcast, C, typename Memory::template span<T>> {
    using tree = broadcast_plan_of<T, C, binomial_tree, Memory>;
    using scatter = broadcast_plan_of<T, C, scatter_allgather, Memory>;

public:
    automatic_broadcast_plan(const C& comm, std::size_t count, int root, const plan_options<automatic_broadcast>& options)
        : chosen_(options.algorithm.choose(count * sizeof(T), count, comm.size())),
          plan_(chosen_ == binomial_tree::code
                    ? std::variant<tree, scatter>(std::in_place_index<0>, comm, count, root,
                                                  options_for(options, binomial_tree{}))
                    : std::variant<tree, scatter>(std::in_place_index<1>, comm, count, root,
                                                  options_for(options, scatter_allgather{})))
    {
    }

    std::size_t count() const noexcept
    {
        return std::visit([](const auto& p) { return p.count(); }, plan_);
    }
    int root() const noexcept
    {
        return std::visit([](const auto& p) { return p.root(); }, plan_);
    }

    // Code of the algorithm this plan runs (binomial_tree::code or scatter_allgather::code).
    std::uint32_t chosen() const noexcept { return chosen_; }

    void run(C& comm, typename Memory::template span<T> data, int tag)
    {
        std::visit([&](auto& p) { p.run(comm, data, tag); }, plan_);
    }

private:
    std::uint32_t chosen_;
    std::variant<tree, scatter> plan_;
};

} // namespace gradsync
