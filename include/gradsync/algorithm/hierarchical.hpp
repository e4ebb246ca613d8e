// Hierarchical allreduce for ranks grouped in nodes of k consecutive ranks (rank r is local
// rank r % k of node r / k; k divides N):
//   1. reduce-scatter inside each node (ring over the k local ranks): local rank i ends with
//      the node's sum of shard i;
//   2. allreduce of shard i across the nodes, among the local ranks i of every node
//      (recursive halving with folding);
//   3. allgather inside each node.
// Sum and Average: the global Sum or Average (Average scales the shard by 1/N after step 2).
// Adasum: the node vector is the average (default) or the sum of its k gradients, and step 2
// is the Adasum tree over node vectors (adasum_recursive_halving on the shard, with each
// step's triples also summed over the node's k shards, so coefficients are those of the
// whole node vectors).
//
// Cost (M bytes per rank, alpha/beta inside a node, alpha'/beta' between nodes, P the
// largest power of two <= N/k):
//   2(k-1) alpha + 2(k-1)/k M beta                              (steps 1 and 3)
//   + 2 log2(P) alpha' + 2(P-1)/P (M/k) beta'                   (step 2; folding extra)
// Only M/k bytes per rank cross the slow links, against 2(N-1)/N M for a flat ring.
//
// ranks_per_node = 0 asks the communicator (c.ranks_per_node(): local_communicator says N,
// the MPI adapters use MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) and check that nodes are
// contiguous and equal). A k that does not divide N is refused on every rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <gradsync/algorithm/adasum_recursive_halving.hpp>
#include <gradsync/algorithm/exchange.hpp>
#include <gradsync/algorithm/recursive_doubling.hpp>
#include <gradsync/algorithm/recursive_halving.hpp>
#include <gradsync/algorithm/ring.hpp>
#include <gradsync/communicator.hpp>
#include <gradsync/error.hpp>
#include <gradsync/layout.hpp>
#include <gradsync/policy/adasum.hpp>
#include <gradsync/policy/sum.hpp>
#include <gradsync/subgroup.hpp>
#include <gradsync/types.hpp>

namespace gradsync {

template <element T, communicator C, class Policy>
class hierarchical_plan;

// How Adasum forms a node's vector from its ranks' gradients.
enum class node_combine { average, sum };

struct hierarchical {
    static constexpr std::uint32_t code = 4;
    static constexpr const char* name = "hierarchical";
    int ranks_per_node = 0; // 0: ask the communicator
    node_combine within_node = node_combine::average;

    std::uint64_t parameter() const noexcept
    {
        return std::uint64_t(std::uint32_t(ranks_per_node)) * 2 + (within_node == node_combine::sum ? 1 : 0);
    }

    template <element T, communicator C, class P>
    using plan = hierarchical_plan<T, C, P>;
};

// k for a hierarchical plan: the tag's, or the communicator's when the tag says 0.
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

template <element T, communicator C, class Policy>
class hierarchical_plan {
    using view = subgroup<C>;
    using cross_plan = std::conditional_t<is_adasum<Policy>, adasum_recursive_halving_plan<T, view>,
                                          recursive_halving_plan<T, view>>;

public:
    hierarchical_plan(C& comm, const layer_layout& layout, const hierarchical& tag, const pipeline_options& pipe)
        : size_(comm.size()), per_node_(resolve_ranks_per_node(comm, tag.ranks_per_node)), rule_(tag.within_node),
          node_(members(comm, true)), cross_(members(comm, false)),
          intra_(node_view(comm), layout_of(layout.total()), ring{}, pipe),
          inter_(make_inter(comm, layout, pipe)),
          node_triples_(node_view(comm), layout_of(3 * layout.layers()), recursive_doubling{}, pipe)
    {
    }

    std::size_t count() const noexcept { return intra_.count(); }
    int ranks_per_node() const noexcept { return per_node_; }

    template <class P>
    void run(C& comm, std::span<T> data, int tag)
    {
        view node = node_view(comm), across = cross_view(comm);
        intra_.template reduce_scatter<sum>(node, data, tag);
        const block owned = intra_.owned();
        const std::span<T> shard = data.subspan(owned.begin, owned.size());
        if constexpr (is_adasum<P>) {
            if (rule_ == node_combine::average)
                average::finish<T>(shard, per_node_);
            inter_.template run<adasum>(across, shard, tag, [&](std::span<double> triples) {
                node_triples_.template run<sum>(node, triples, tag);
            });
        } else {
            inter_.template run<sum>(across, shard, tag);
            P::template finish<T>(shard, size_);
        }
        intra_.allgather(node, data, tag);
    }

private:
    static layer_layout layout_of(std::size_t n) { return layer_layout(n, {}); }

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

    cross_plan make_inter(C& comm, const layer_layout& layout, const pipeline_options& pipe) const
    {
        const block owned = intra_.owned();
        if constexpr (is_adasum<Policy>)
            return cross_plan(cross_view(comm), layout, recursive_halving{}, pipe, owned);
        else
            return cross_plan(cross_view(comm), layout_of(owned.size()), recursive_halving{}, pipe);
    }

    int size_, per_node_;
    node_combine rule_;
    std::vector<int> node_, cross_;
    ring_plan<T, view> intra_;
    cross_plan inter_;
    recursive_doubling_plan<double, view> node_triples_;
};

} // namespace gradsync
