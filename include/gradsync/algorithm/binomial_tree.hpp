// Binomial tree broadcast: the root's vector goes down the binomial tree rooted at the root
// (binomial_node_of, plan/schedule.hpp), whole at every step: each rank receives it from
// its parent, then sends it to its children, largest subtree first.
//
// Cost (N ranks, M bytes, alpha per message, beta per byte sent; planner::binomial_tree_cost,
// checked by tests/test_cost_formulas.cpp): the tree's depth is ceil(log2 N) = log2(P) + F,
// and a rank's sends run one after another, so the root's last child, at depth one, waits
// for the same number of whole-vector sends as the deepest leaf.
// cost: (log2(P) + F)*(alpha + M*beta)
// Latency-bound: it suits small vectors (selector/automatic_broadcast.hpp). Every message is
// the whole vector (send_down, exchange.hpp, says why). In a memory space the space is
// synchronized once before the first send, so a send reads what the caller queued there.
//
// Preconditions: any N >= 1, any root 0..N-1, any count (0 sends nothing). Every rank ends
// with the root's bits: they are copied, never computed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include <gradsync/core/codes.hpp>
#include <gradsync/plan/broadcast_plan.hpp>

namespace gradsync {

struct binomial_tree {
    static constexpr std::uint32_t code = codes::binomial_tree;
    static constexpr const char* name = "binomial_tree";
};

template <broadcast_element T, communicator C, class Memory = host_memory>
class binomial_tree_plan : public plan_types<binomial_tree, C, typename Memory::template span<T>> {
public:
    binomial_tree_plan(const C& comm, std::size_t count, int root, const plan_options<binomial_tree>& options)
        : count_(count), root_(root), cut_(cut_for(comm, options.pipeline))
    {
        const binomial_node node = binomial_node_of(comm.size(), comm.rank(), root);
        parent_ = node.parent.peer;
        for (const tree_link& child : node.children)
            children_.emplace_back(child.peer, block{0, count});
        requests_.resize(1);
    }

    std::size_t count() const noexcept { return count_; }
    int root() const noexcept { return root_; }

    void run(C& comm, typename Memory::template span<T> data, int tag)
    {
        Memory::of(data).synchronize();
        send_down<T>(comm, tag, Memory::elements(data), parent_, {0, count_}, children_, cut_, requests_);
    }

private:
    std::size_t count_;
    int root_;
    message_cut cut_;
    int parent_; // -1 at the root
    std::vector<std::pair<int, block>> children_; // each gets the whole vector
    std::vector<typename C::request> requests_;
};

} // namespace gradsync
