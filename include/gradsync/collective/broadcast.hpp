// Broadcast: broadcaster<> (plan once, run many) and broadcast() (one
// call). Rank root's data is copied into every rank's data, in place, bit for bit.
//
//   gradsync::broadcaster<std::byte, Comm> b(comm, state.size(), /*root=*/0);
//   b(std::span<std::byte>(state));                  // every call
//
//   gradsync::broadcast(comm, std::span<float>(weights), 0); // one call
//
// T is any element type (fp16, bf16, fp32, fp64) or std::byte, for raw bytes (packed tensors
// of mixed types). Constructing a broadcaster is collective, as constructing a reducer is
// (collective/allreduce.hpp): every rank must construct one with the same element type, count, root,
// algorithm and tag. It checks agreement (collective/verify.hpp), throwing on every rank a usage_error
// when a rank's root is not a rank and a mismatch_error naming the field and the ranks when
// they disagree; only then does it plan the schedule and the request slots. A call then
// allocates nothing and sends only the algorithm's own messages; broadcast() builds a
// broadcaster per call (the agreement check included).
//
// The plan comes from the table (selector/plan_table.hpp) for (Algorithm, Memory): host memory by
// default, space_memory<Space> for a device_span (collective/device_broadcaster.hpp).
//
// Call order: as for reducers, with which broadcasters (and the other collectives) share their
// identities and their default tag: every rank must call its collectives in the same order, each
// call's messages carry the broadcaster's identity and call number (core/tags.hpp), a call out of
// order ends in a mismatch_error where the transport sees it, and a call that fails makes
// the broadcaster refuse every later call with a usage_error.
//
// Thread safety: one broadcaster runs one broadcast at a time. Broadcasters or reducers that
// may run concurrently on the same communicator need distinct tags (0..32765).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include <gradsync/collective/allreduce.hpp>
#include <gradsync/collective/verify.hpp>
#include <gradsync/comm/communicator.hpp>
#include <gradsync/core/broadcast_element.hpp>
#include <gradsync/core/layout.hpp>
#include <gradsync/core/tags.hpp>
#include <gradsync/core/types.hpp>
#include <gradsync/memory/host_memory.hpp>
#include <gradsync/plan/broadcast_plan.hpp>
#include <gradsync/plan/plan.hpp>
#include <gradsync/selector/automatic_broadcast.hpp>
#include <gradsync/selector/plan_table.hpp>

namespace gradsync {

struct broadcaster_options {
    int tag = tags::reducer; // a reducer's: calls out of order between the two are caught
};

// A broadcast algorithm: a type with a broadcast row in the table, a code and a name.
template <class A>
concept broadcast_algorithm = std::copyable<A> && broadcast_row<A>::exists && requires {
    { A::code } -> std::convertible_to<std::uint32_t>;
    { A::name } -> std::convertible_to<const char*>;
};

template <broadcast_element T, communicator Comm, broadcast_algorithm Algorithm = automatic_broadcast,
          class Memory = host_memory>
class broadcaster {
public:
    using plan_type = broadcast_plan_of<T, Comm, Algorithm, Memory>;
    static_assert(broadcast_plan<plan_type>, "gradsync: a plan of the table does not model broadcast_plan");
    using data_type = typename plan_type::data_type;

    broadcaster(Comm& comm, std::size_t count, int root = 0, Algorithm algorithm = {},
                broadcaster_options options = {})
        : comm_(&comm), plan_(comm,
                              call_signature<T, void, Memory>(comm, count, layer_layout(count, {}),
                                                              plan_options<Algorithm>{algorithm, {}}, options.tag, root),
                              {}, options.tag, "gradsync::broadcaster", "broadcaster",
                              std::to_string(count) + " " + element_traits<T>::name + " elements from rank " +
                                  std::to_string(root) + ", " + Algorithm::name,
                              count, root, plan_options<Algorithm>{algorithm, {}})
    {
    }

    // Copies root's data into every rank's data. data.size() must equal count().
    void operator()(data_type data) { plan_(*comm_, data); }

    std::size_t count() const noexcept { return plan_.plan().count(); }
    int root() const noexcept { return plan_.plan().root(); }
    const plan_type& plan() const noexcept { return plan_.plan(); }
    // The identity every rank's broadcaster shares, carried in its messages (core/tags.hpp).
    std::uint64_t identity() const noexcept { return plan_.identity(); }

private:
    Comm* comm_;
    detail::agreed_plan<Comm, plan_type> plan_;
};

// One broadcast from root, in place.
template <communicator Comm, broadcast_element T, broadcast_algorithm Algorithm = automatic_broadcast>
void broadcast(Comm& comm, std::span<T> data, int root = 0, Algorithm algorithm = {},
               broadcaster_options options = {})
{
    broadcaster<T, Comm, Algorithm> b(comm, data.size(), root, algorithm, options);
    b(data);
}

} // namespace gradsync
