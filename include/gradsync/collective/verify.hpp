// Cross-rank agreement, checked when a collective (a reducer, a broadcaster, an allgatherer,
// ...) is planned and before any user data moves.
//
// Every rank describes its call in a fixed-size signature (element type, policy, algorithm
// and its parameters, count, block size, root, layer layout, message cutting) and the signatures are
// allgathered around a ring (N-1 rounds of one small message; done once per plan). Every
// rank then sees every signature and throws the same error, naming the ranks and values,
// so disagreement ends in an exception everywhere instead of a hang or corrupted data.
// The exchange uses its own tag so that ranks that disagree on the data tag still meet.
//
// The layer sizes travel as a fingerprint. When fingerprints differ, the ranks (all of them,
// as all saw it) gather the lists themselves in a second ring, so that the error names the
// first layer (or, for the synchronizer, the first group) that differs and both values.
//
// The signature also carries, not compared, each rank's proposal for the reducer's identity
// (core/tags.hpp) and rank 0's position board (comm/shared/board.hpp) with rank 0's position
// there: every rank takes rank 0's identity, a number no other reducer built in rank 0's
// process has, so reducers built in the same order on every rank share one, and rank 0's
// board and position, so that the collectives of one communicator publish their calls on one
// board and count them from one point.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <gradsync/comm/communicator.hpp>
#include <gradsync/comm/shared/board.hpp>
#include <gradsync/comm/shared/buffer.hpp>
#include <gradsync/core/broadcast_element.hpp>
#include <gradsync/core/error.hpp>
#include <gradsync/core/layout.hpp>
#include <gradsync/core/types.hpp>
#include <gradsync/plan/plan.hpp>
#include <gradsync/policy/adasum.hpp>

namespace gradsync {

struct signature {
    enum field : std::size_t {
        element_type,
        policy,
        algorithm,
        algorithm_parameter,
        triple_order,
        count,
        block,
        root,
        layer_sum,
        layers,
        layout_fingerprint,
        segment_bytes,
        window,
        eager_limit,
        tag,
        shared_buffer,
        field_count
    };
    std::array<std::uint64_t, field_count> value{};
    std::array<std::array<char, 24>, 3> names{}; // element type, policy, algorithm
    std::uint64_t identity = 0;      // the proposal; rank 0's is taken (not compared)
    std::uint64_t detail_length = 0; // elements of the list the layout fingerprint covers
    position_board::offer board{};   // rank 0's position board, which every rank uses (not compared)
    std::uint64_t board_at = 0;      // rank 0's position there on the collective's base tag (not compared)

    void name(field f, const char* s) noexcept
    {
        auto& dst = names[std::size_t(f)];
        std::strncpy(dst.data(), s, dst.size() - 1);
    }
};
static_assert(sizeof(signature) == 248, "docs/semantics.md gives the signature's size");

// The signature of a reduction of `count` elements in `layout` with element type T, Policy,
// the plan options and (for Adasum) the triple order of the plan's Memory: what every
// rank's reducer must agree on. Adasum's triples are summed in a different order in host
// memory and in a memory space, and recursive doubling's partners each compute the same
// triple, so ranks that mixed the two would end with different bits; they are refused.
// A reducer identity no earlier call in this process returned (rank 0 proposes it).
inline std::uint64_t next_identity() noexcept
{
    static std::atomic<std::uint64_t> last{0};
    return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

// A broadcast passes Policy = void (it has none, named "none") and its root; a reduction's
// root is 0. The block size is 0 here: the data-movement collectives set it
// (collective/movement.hpp).
template <broadcast_element T, class Policy, class Memory = host_memory, communicator C, class Algorithm>
signature call_signature(const C& comm, std::size_t count, const layer_layout& layout,
                         const plan_options<Algorithm>& options, int tag, int root = 0)
{
    signature s;
    s.value[signature::element_type] = element_traits<T>::code;
    s.value[signature::algorithm] = Algorithm::code;
    if constexpr (requires { options.algorithm.parameter(); })
        s.value[signature::algorithm_parameter] = options.algorithm.parameter();
    if constexpr (std::is_void_v<Policy>) {
        s.name(signature::policy, "none");
    } else {
        s.value[signature::policy] = Policy::code;
        s.name(signature::policy, Policy::name);
        if constexpr (is_adasum<Policy>)
            s.value[signature::triple_order] = Memory::triple_order;
    }
    s.value[signature::count] = count;
    s.value[signature::root] = std::uint64_t(std::int64_t(root));
    s.value[signature::layer_sum] = layout.total();
    s.value[signature::layers] = layout.layers();
    s.value[signature::layout_fingerprint] = layout.fingerprint();
    s.value[signature::segment_bytes] = options.pipeline.segment_bytes;
    s.value[signature::window] = std::uint64_t(options.pipeline.window);
    s.value[signature::eager_limit] = eager_limit(comm);
    s.value[signature::tag] = std::uint64_t(std::int64_t(tag));
    s.value[signature::shared_buffer] = options.shared ? options.shared->key() : 0;
    s.identity = comm.rank() == 0 ? next_identity() : 0;
    s.detail_length = layout.layers();
    s.name(signature::element_type, element_traits<T>::name);
    s.name(signature::algorithm, Algorithm::name);
    return s;
}

namespace detail {

inline std::string describe(const signature& s, signature::field f)
{
    if (f <= signature::algorithm)
        return std::string(s.names[std::size_t(f)].data());
    if (f == signature::triple_order)
        return s.value[f] == triple_order_host ? "the host kernels' order (host memory, or the staged path)"
                                               : "the Thrust kernels' order (device memory, the direct path)";
    if (f == signature::root)
        return std::to_string(std::int64_t(s.value[f]));
    return std::to_string(s.value[f]);
}

inline const char* field_title(signature::field f)
{
    static constexpr std::array<const char*, signature::field_count> titles{
        "the element type", "the policy", "the algorithm", "the algorithm's parameter", "the Adasum triple order",
        "the element count", "the block size in bytes", "the root", "the sum of the layer sizes", "the number of layers", "the layer sizes",
        "the pipeline segment size", "the pipeline window", "the eager message limit", "the message tag",
        "the shared buffer (its key; 0: none)"};
    return titles[f];
}

// Every rank's list (lengths[k] elements from rank k), gathered around a ring on the
// agreement tag: all[k] is rank k's.
template <class U, communicator C>
std::vector<std::vector<U>> gather_all(C& comm, std::span<const U> mine, std::span<const std::size_t> lengths)
{
    const int n = comm.size(), r = comm.rank();
    std::vector<std::vector<U>> all(static_cast<std::size_t>(n));
    for (int k = 0; k < n; ++k)
        all[std::size_t(k)].resize(lengths[std::size_t(k)]);
    std::copy(mine.begin(), mine.end(), all[std::size_t(r)].begin());
    for (int s = 0; s + 1 < n; ++s) {
        const int send = (r - s + n) % n, recv = (r - s - 1 + n) % n;
        auto rq = irecv(comm, std::span<U>(all[std::size_t(recv)]), (r + n - 1) % n, tags::agreement);
        auto sq = isend(comm, std::span<const U>(all[std::size_t(send)]), (r + 1) % n, tags::agreement);
        comm.wait(rq);
        comm.wait(sq);
    }
    return all;
}

// "the layer sizes: layer 2 has 5 elements on rank 0 and 7 on rank 1"
inline std::string layer_size_difference(std::span<const std::size_t> first, std::span<const std::size_t> other,
                                         int other_rank)
{
    const std::size_t n = std::min(first.size(), other.size());
    const std::size_t l = std::size_t(std::mismatch(first.begin(), first.begin() + std::ptrdiff_t(n), other.begin()).first -
                                      first.begin());
    if (l == n)
        return "the layer sizes: rank 0 has " + std::to_string(first.size()) + " layers, rank " +
            std::to_string(other_rank) + " has " + std::to_string(other.size());
    return "the layer sizes: layer " + std::to_string(l) + " has " + std::to_string(first[l]) + " elements on rank 0 and " +
        std::to_string(other[l]) + " on rank " + std::to_string(other_rank);
}

} // namespace detail

// Names what differs between rank 0's list and another rank's: "the layer sizes: ...".
using difference_describer = std::string (*)(std::span<const std::size_t> first, std::span<const std::size_t> other,
                                             int other_rank);

// Throws usage_error (a rank's layers do not add up to its buffer, its options are invalid
// or its root is not a rank) or mismatch_error (ranks disagree) on every rank; returns rank 0's
// signature, whose identity and board every rank takes, only when all signatures agree.
// `detail` is the list that mine's layout fingerprint covers (the layer sizes), gathered to
// name a difference.
template <communicator C>
signature verify_agreement(C& comm, const signature& mine, const char* who, std::span<const std::size_t> detail,
                               difference_describer describe = detail::layer_size_difference)
{
    const int n = comm.size();
    const std::vector<std::size_t> ones(static_cast<std::size_t>(n), 1);
    const std::vector<std::vector<signature>> gathered = detail::gather_all(comm, std::span(&mine, 1), ones);
    std::vector<signature> all;
    for (const std::vector<signature>& g : gathered)
        all.push_back(g.front());
    const std::string prefix = std::string(who) + " (" + where(comm) + "): ";
    for (int k = 0; k < n; ++k) {
        const signature& s = all[std::size_t(k)];
        const std::string rank = "rank " + std::to_string(k);
        if (s.value[signature::layer_sum] == std::numeric_limits<std::uint64_t>::max())
            throw usage_error(prefix + rank + "'s layer sizes overflow when added up");
        if (s.value[signature::layer_sum] != s.value[signature::count])
            throw usage_error(prefix + rank + "'s layer sizes add up to " +
                              std::to_string(s.value[signature::layer_sum]) + " elements but its buffer holds " +
                              std::to_string(s.value[signature::count]));
        if (s.value[signature::segment_bytes] == 0 || s.value[signature::window] == 0 ||
            s.value[signature::window] > std::uint64_t(std::numeric_limits<int>::max()))
            throw usage_error(prefix + rank + "'s pipeline options are invalid (segment_bytes " +
                              std::to_string(s.value[signature::segment_bytes]) + ", window " +
                              std::to_string(std::int64_t(s.value[signature::window])) + "; both must be positive)");
        if (const auto root = std::int64_t(s.value[signature::root]); root < 0 || root >= n)
            throw usage_error(prefix + rank + "'s root " + std::to_string(root) + " is out of range: ranks are 0.." +
                              std::to_string(n - 1));
        if (const auto tag = std::int64_t(s.value[signature::tag]); tag < 0 || !tags::valid_base(int(tag)))
            throw usage_error(prefix + rank + "'s tag " + std::to_string(tag) + " is out of range: tags are 0.." +
                              std::to_string(tags::agreement - 1) + " (" + std::to_string(tags::agreement) +
                              " is the agreement check's)");
    }
    for (std::size_t f = 0; f < signature::field_count; ++f) {
        const auto field = signature::field(f);
        for (int k = 1; k < n; ++k) {
            if (all[std::size_t(k)].value[f] == all[0].value[f] &&
                (f > signature::algorithm || all[std::size_t(k)].names[f] == all[0].names[f]))
                continue;
            if (field == signature::layout_fingerprint) {
                std::vector<std::size_t> lengths;
                for (const signature& s : all)
                    lengths.push_back(std::size_t(s.detail_length));
                const std::vector<std::vector<std::size_t>> lists = detail::gather_all(comm, detail, lengths);
                throw mismatch_error(prefix + "ranks disagree on " + describe(lists[0], lists[std::size_t(k)], k));
            }
            throw mismatch_error(prefix + "ranks disagree on " + detail::field_title(field) + ": rank 0 has " +
                                 detail::describe(all[0], field) + ", rank " + std::to_string(k) + " has " +
                                 detail::describe(all[std::size_t(k)], field));
        }
    }
    return all[0];
}

} // namespace gradsync
