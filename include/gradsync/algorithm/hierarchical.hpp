// Hierarchical allreduce for ranks grouped in nodes of k consecutive ranks (rank r is local
// rank r % k of node r / k; k divides N):
//   1. reduce-scatter inside each node (through shared memory where the node's ranks share a
//      host, the data is in host memory and share_memory is set, shared_memory.hpp, in rank
//      order; else the ring over the k local ranks, in the ring's order): local rank i ends
//      with the node's sum of block i + 1 (mod k), so nodes may differ in which they use;
//   2. allreduce of that block across the nodes, among the local ranks i of every node
//      (recursive halving with folding);
//   3. allgather inside each node (shared memory or the ring, as in 1).
// Elementwise policies: the global reduction, every stage combining as the policy does
// (Average as Sum does, then scaling the block by 1/N after step 2).
// Adasum: the node vector is the average (default) or the sum of its k gradients, and step 2
// is the Adasum tree over node vectors (adasum_recursive_halving on the block, with each
// step's triples also summed over the node's k blocks, so coefficients are those of the
// whole node vectors).
//
// Cost of Sum and Average (M bytes per rank, alpha, beta, gamma inside a node and alpha_x,
// beta_x, gamma_x between nodes; here P is the largest power of two <= N/k and F = 1 when
// N/k is not a power of two, else 0; planner::hierarchical_cost, checked by
// tests/test_cost_formulas.cpp): the ring's reduce-scatter (combining (k-1)/k M) and
// allgather (copying) over the k ranks of a node, and recursive halving with folding over
// the N/k nodes on the M/k block.
// cost: 2*(k-1)*alpha + 2*(k-1)/k*M*beta + (k-1)/k*M*gamma + 2*log2(P)*alpha_x + 2*(P-1)/P*(M/k)*beta_x + (P-1)/P*(M/k)*gamma_x + F*(2*alpha_x + 2*(M/k)*beta_x + (M/k)*gamma_x)
// Through shared memory the node's part is shared_memory's cost over k ranks instead.
// In a memory space (Memory, memory/host_memory.hpp) the messages are the same and gamma is
// the kernels' (Adasum: the costs of adasum_recursive_halving.hpp on the block).
// Only M/k bytes per rank cross the slow links, against 2(N-1)/N M for a flat ring.
//
// ranks_per_node = 0 asks the communicator (c.ranks_per_node(): local_communicator says N,
// the MPI adapters use MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) and check that nodes are
// contiguous and equal). A k that does not divide N is refused on every rank.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <gradsync/algorithm/adasum_recursive_halving.hpp>
#include <gradsync/algorithm/recursive_doubling.hpp>
#include <gradsync/algorithm/recursive_halving.hpp>
#include <gradsync/algorithm/ring.hpp>
#include <gradsync/algorithm/shared_memory.hpp>
#include <gradsync/comm/subgroup.hpp>
#include <gradsync/core/codes.hpp>
#include <gradsync/core/error.hpp>
#include <gradsync/plan/plan.hpp>
#include <gradsync/policy/adasum.hpp>
#include <gradsync/policy/sum.hpp>

namespace gradsync {

// How Adasum forms a node's vector from its ranks' gradients.
enum class node_combine { average, sum };

struct hierarchical {
    static constexpr std::uint32_t code = codes::hierarchical;
    static constexpr const char* name = "hierarchical";
    int ranks_per_node = 0; // 0: ask the communicator
    node_combine within_node = node_combine::average;
    bool share_memory = true; // the node stage through shared memory where the node's ranks can

    std::uint64_t parameter() const noexcept
    {
        return std::uint64_t(std::uint32_t(ranks_per_node)) * 4 + (share_memory ? 2 : 0) +
            (within_node == node_combine::sum ? 1 : 0);
    }
};

// k for a hierarchical plan: the algorithm's, or the communicator's when the algorithm says 0.
template <communicator C>
int resolve_ranks_per_node(C& comm, int requested)
{
    int k = requested;
    if (k == 0) {
        if constexpr (requires { { comm.ranks_per_node() } -> std::convertible_to<int>; })
            k = comm.ranks_per_node();
        else
            throw usage_error("gradsync::hierarchical (" + where(comm) +
                              "): ranks_per_node = 0, and this communicator cannot tell its nodes; set it");
    }
    if (k < 1 || comm.size() % k != 0)
        throw usage_error("gradsync::hierarchical (" + where(comm) + "): ranks_per_node = " + std::to_string(k) +
                          " does not divide the " + std::to_string(comm.size()) + " ranks");
    return k;
}

// Policy: an elementwise policy that Memory combines, or adasum.
template <element T, communicator C, class Policy, class Memory = host_memory>
class hierarchical_plan : public plan_types<hierarchical, C, typename Memory::template span<T>> {
    using view = subgroup<C>;
    // What the stages combine with: the policy's combine, its finish left to the end (Average's
    // 1/N is applied once); Adasum's node stage sums (node_combine scales it).
    using stage_policy = std::conditional_t<is_adasum<Policy> || std::is_same_v<Policy, average>, sum, Policy>;
    using cross_plan = std::conditional_t<is_adasum<Policy>, adasum_halving<T, view, Memory>,
                                          recursive_halving_plan<T, view, stage_policy, Memory>>;
    // Adasum's node-wide sums of each step's triples; nothing for the other policies.
    struct no_triples {
        std::size_t scratch_bytes() const noexcept { return 0; }
    };
    using triple_plan =
        std::conditional_t<is_adasum<Policy>, recursive_doubling_plan<double, view, sum, Memory>, no_triples>;
    // The node stage through shared memory, in host memory; nothing in a memory space.
    struct no_shared_stage {};
    using shared_stage = std::conditional_t<std::is_same_v<Memory, host_memory>,
                                            shared_memory_plan<T, view, stage_policy>, no_shared_stage>;
    static constexpr bool may_share = !std::is_same_v<shared_stage, no_shared_stage>;

public:
    hierarchical_plan(C& comm, const layer_layout& layout, const plan_options<hierarchical>& options)
        : size_(comm.size()), count_(layout.total()),
          per_node_(resolve_ranks_per_node(comm, options.algorithm.ranks_per_node)),
          rule_(options.algorithm.within_node), node_(members(comm, true)), cross_(members(comm, false)),
          owned_(block_of(layout.total(), per_node_, (comm.rank() % per_node_ + 1) % per_node_)),
          inter_(make_inter(comm, layout, options)), node_triples_(make_triples(comm, layout, options))
    {
        const layer_layout whole(layout.total(), {});
        view node = node_view(comm);
        if constexpr (may_share)
            // No shared_buffer: its slots are the whole group's, the stage's ranks a node's.
            if (options.algorithm.share_memory &&
                build_if_shared(shared_, node, whole, plan_options<shared_memory>{{}, options.pipeline}, 1))
                return;
        ring_.emplace(node, whole, options_for<ring>(options));
    }

    std::size_t count() const noexcept { return count_; }
    std::size_t scratch_bytes() const noexcept
    {
        std::size_t node_stage = ring_ ? ring_->scratch_bytes() : 0;
        if constexpr (may_share)
            node_stage += shared_ ? shared_->scratch_bytes() : 0;
        return node_stage + inter_.scratch_bytes() + node_triples_.scratch_bytes();
    }
    int ranks_per_node() const noexcept { return per_node_; }
    // Whether the node stage runs through shared memory (the node's ranks share a host).
    bool node_shares_memory() const noexcept { return shared_.has_value(); }

    void run(C& comm, typename Memory::template span<T> data, int tag)
    {
        try {
            stages(comm, data, tag);
        } catch (...) {
            // The node stage's peers may be writing into this rank's data from its
            // reduce-scatter on: they must know it has gone before its call returns.
            if constexpr (may_share)
                if (shared_)
                    shared_->depart();
            throw;
        }
    }

private:
    void stages(C& comm, typename Memory::template span<T> data, int tag)
    {
        const Memory memory = Memory::of(data);
        const std::span<T> d = Memory::elements(data);
        view node = node_view(comm), across = cross_view(comm);
        memory.synchronize(); // the caller's queued work on data ends before the first send
        if constexpr (may_share)
            if (shared_)
                shared_->reduce_scatter(node, d, tag);
        if (ring_)
            ring_->reduce_scatter(node, d, tag, memory);
        const std::span<T> mine = block_span(d, owned_);
        if constexpr (is_adasum<Policy>) {
            if (rule_ == node_combine::average)
                memory.template finish<average>(mine, per_node_);
            inter_.run(across, memory.view(mine), tag,
                       [&](typename Memory::template span<double> triples) { node_triples_.run(node, triples, tag); });
        } else {
            inter_.run(across, memory.view(mine), tag);
            memory.template finish<Policy>(mine, size_);
        }
        memory.synchronize();
        if constexpr (may_share)
            if (shared_)
                shared_->allgather(node, d, tag);
        if (ring_)
            ring_->allgather(node, d, tag);
    }

    // The ranks of this rank's node (node = true), or the same local rank of every node.
    std::vector<int> members(const C& comm, bool node) const
    {
        std::vector<int> m;
        const int r = comm.rank(), base = r - r % per_node_;
        if (node)
            for (int i = 0; i < per_node_; ++i)
                m.push_back(base + i);
        else
            for (int n = 0; n < size_ / per_node_; ++n)
                m.push_back(n * per_node_ + r % per_node_);
        return m;
    }

    view node_view(C& comm) const { return view(comm, node_); }
    view cross_view(C& comm) const { return view(comm, cross_); }

    // Adasum's tree runs on this rank's block of the whole layout (its triples are per layer
    // of the layout); Sum's on the block alone.
    cross_plan make_inter(C& comm, const layer_layout& layout, const plan_options<hierarchical>& options) const
    {
        const block owned = owned_;
        if constexpr (is_adasum<Policy>)
            return cross_plan(cross_view(comm), layout, options_for<recursive_halving>(options), owned);
        else
            return cross_plan(cross_view(comm), layer_layout(owned.size(), {}), options_for<recursive_halving>(options));
    }

    triple_plan make_triples(C& comm, const layer_layout& layout, const plan_options<hierarchical>& options) const
    {
        if constexpr (is_adasum<Policy>)
            return triple_plan(node_view(comm), layer_layout(3 * layout.layers(), {}),
                               options_for<recursive_doubling>(options));
        else
            return {};
    }

    int size_;
    std::size_t count_;
    int per_node_;
    node_combine rule_;
    std::vector<int> node_, cross_;
    block owned_; // the node stage's: block (local rank + 1) mod k, as the ring's
    std::optional<shared_stage> shared_;
    std::optional<ring_plan<T, view, stage_policy, Memory>> ring_;
    cross_plan inter_;
    triple_plan node_triples_;
};

} // namespace gradsync
