// Allreduce of device memory: device_reducer<> (plan once, run many) and allreduce()
// on a device_span, with the semantics of collective/allreduce.hpp (in place, same results, the same
// collective construction and agreement check).
//
//   gradsync::device_span<float> grad(device_pointer, count, stream);
//   gradsync::device_reducer<float, Comm, gradsync::average, gradsync::ring> r(comm, layers);
//   r(grad);
//   gradsync::allreduce(comm, grad, gradsync::adasum{}, gradsync::ring{}, layers);
//
// Two paths, chosen when the reducer is planned:
//  - direct: the algorithm's plan for the span's memory space runs there, its messages
//    straight from and into device memory. Needs a communicator that carries the space's
//    memory (Space::carries: a local_group built with gradsync::device_copy,
//    nccl_communicator) and a plan in the table (selector/plan_table.hpp) for (algorithm, policy,
//    space_memory<Space>): every policy with ring, recursive_halving, recursive_doubling,
//    hierarchical and automatic; Sum and Average with nccl_passthrough.
//  - staged: the data is copied into a host buffer (pinned for a GPU, allocated once here),
//    the host plan runs on it, and the result is copied back. Any policy and algorithm,
//    over any communicator that runs host algorithms (runs_host_algorithms: all but
//    nccl_communicator).
// device_path::automatic takes direct where it can. Device plans send the host plans'
// messages; for Sum and Average they compute the host plans' bits, so ranks with equal
// options may even differ in path. Adasum's triples are summed in another order on the
// device, so for Adasum the agreement check refuses ranks that differ in path.
//
// A call is ordered after the work the caller queued in the span's space and returns when
// the reduced data is in place (the space has been synchronized).
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <variant>

#include <gradsync/collective/allreduce.hpp>
#include <gradsync/comm/communicator.hpp>
#include <gradsync/core/device_span.hpp>
#include <gradsync/core/error.hpp>
#include <gradsync/core/layout.hpp>
#include <gradsync/core/types.hpp>
#include <gradsync/memory/space_memory.hpp>
#include <gradsync/plan/plan.hpp>
#include <gradsync/policy/reduction_policy.hpp>
#include <gradsync/selector/plan_table.hpp>

namespace gradsync {

enum class device_path { automatic, staged, direct };

inline const char* device_path_name(device_path p) noexcept
{
    return p == device_path::direct ? "direct" : p == device_path::staged ? "staged" : "automatic";
}

struct device_options {
    device_path path = device_path::automatic;
    // A GPU moves a large block fastest as one message: segments of 64 MiB cut only blocks
    // of more than 128 MiB.
    reducer_options reducer{.pipeline = {.segment_bytes = std::size_t(64) << 20}};
};

// Whether Comm can run host algorithms. A communicator that cannot (nccl_communicator: a
// window of receives waited on one by one deadlocks under NCCL's grouping) says
// static constexpr bool runs_host_algorithms = false.
template <class Comm>
inline constexpr bool runs_host_algorithms = [] {
    if constexpr (requires { Comm::runs_host_algorithms; })
        return bool(Comm::runs_host_algorithms);
    else
        return true;
}();

template <element T, communicator Comm, reduction_policy Policy = sum, allreduce_algorithm Algorithm = automatic,
          class Space = cuda_stream>
class device_reducer {
    static constexpr bool has_direct = has_plan<T, Comm, Algorithm, Policy, space_memory<Space>>;
    static constexpr bool has_staged = runs_host_algorithms<Comm> && has_plan<T, Comm, Algorithm, Policy>;
    static_assert(has_direct || has_staged,
                  "gradsync::device_reducer: this communicator runs only device plans, and the table has none for "
                  "this policy and algorithm (nccl_passthrough has only sum and average)");

    // The plans of the two paths, std::monostate where a path cannot exist.
    using direct_plan = std::conditional_t<has_direct,
                                           detail::agreed_reduction<T, Comm, Policy, Algorithm, space_memory<Space>>,
                                           std::monostate>;
    using staged_plan =
        std::conditional_t<has_staged, detail::agreed_reduction<T, Comm, Policy, Algorithm, host_memory>, std::monostate>;

public:
    // count elements in `layers` (empty: one layer); the layers must add up to count.
    device_reducer(Comm& comm, std::size_t count, std::span<const std::size_t> layers, Algorithm algorithm = {},
                   device_options options = {})
        : comm_(&comm), count_(count), path_(choose(comm, options.path))
    {
        const layer_layout layout(count, layers);
        const plan_options<Algorithm> plan = options.reducer.for_plan(messages_only(algorithm));
        if constexpr (has_direct) {
            if (path_ == device_path::direct) {
                direct_.emplace(comm, count, layout, plan, options.reducer.tag, "gradsync::device_reducer");
                return;
            }
        }
        if constexpr (has_staged) {
            staged_.emplace(comm, count, layout, plan, options.reducer.tag, "gradsync::device_reducer");
            host_.emplace(count);
        }
    }

    device_reducer(Comm& comm, std::span<const std::size_t> layers, Algorithm algorithm = {},
                   device_options options = {})
        : device_reducer(comm, detail::total_of(layers), layers, algorithm, options)
    {
    }

    device_reducer(Comm& comm, std::size_t count, Algorithm algorithm = {}, device_options options = {})
        : device_reducer(comm, count, std::span<const std::size_t>(), algorithm, options)
    {
    }

    // Reduces data in place on every rank. data.size() must equal count().
    void operator()(device_span<T, Space> data)
    {
        if constexpr (has_direct)
            if (direct_)
                return (*direct_)(*comm_, data);
        if constexpr (has_staged) {
            staged_->check_size(*comm_, data.size()); // before the copies
            const Space& space = data.space();
            space.copy(host_->data(), data.data(), count_ * sizeof(T));
            space.synchronize();
            (*staged_)(*comm_, std::span<T>(host_->data(), count_));
            space.copy(data.data(), host_->data(), count_ * sizeof(T));
            space.synchronize();
        }
    }

    std::size_t count() const noexcept { return count_; }
    // The path chosen: device_path::staged or device_path::direct.
    device_path path() const noexcept { return path_; }

private:
    // The staged path's host plan makes the direct path's choice, and ranks of one group may
    // take either: neither shares memory, which the direct path cannot.
    static Algorithm messages_only(Algorithm algorithm) noexcept
    {
        if constexpr (requires { algorithm.share_memory = false; })
            algorithm.share_memory = false;
        return algorithm;
    }

    static device_path choose(const Comm& comm, device_path requested)
    {
        const bool carried = Space::carries(comm);
        const std::string who = "gradsync::device_reducer (" + where(comm) + "): ";
        if (requested == device_path::direct && !has_direct)
            throw usage_error(who + "the direct path was asked for, but there is no device plan for " + Policy::name +
                              " with " + Algorithm::name + "; use the staged path");
        if (requested == device_path::direct && !carried)
            throw usage_error(who + "the direct path needs a communicator that moves device memory (a "
                              "local_group built with gradsync::device_copy, or nccl_communicator)");
        if (requested == device_path::staged && !has_staged)
            throw usage_error(who + "this communicator cannot run the host algorithms of the staged path");
        if (requested != device_path::automatic)
            return requested;
        if (has_direct && carried)
            return device_path::direct;
        if (!has_staged)
            throw usage_error(who + "this communicator does not move this memory, and cannot run the host "
                              "algorithms of the staged path");
        return device_path::staged;
    }

    // Those of the path not taken stay empty.
    Comm* comm_;
    std::size_t count_;
    device_path path_;
    std::optional<direct_plan> direct_;
    std::optional<staged_plan> staged_;
    std::optional<typename Space::template host_buffer<T>> host_;
};

// One allreduce of device memory, in place. layers: element counts of the layers fused in
// data (empty: one).
template <communicator Comm, element T, class Space, reduction_policy Policy = sum,
          allreduce_algorithm Algorithm = automatic>
void allreduce(Comm& comm, device_span<T, Space> data, Policy = {}, Algorithm algorithm = {},
               std::span<const std::size_t> layers = {}, device_options options = {})
{
    device_reducer<T, Comm, Policy, Algorithm, Space> r(comm, data.size(), layers, algorithm, options);
    r(data);
}

} // namespace gradsync
