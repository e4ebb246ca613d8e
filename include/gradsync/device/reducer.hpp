// The front door for device memory: device_reducer<> (plan once, run many) and allreduce()
// on a device_span, with the semantics of allreduce.hpp (in place, same results, the same
// collective construction and agreement check).
//
//   gradsync::device_span<float> grad(device_pointer, count, stream);
//   gradsync::device_reducer<float, Comm, gradsync::average, gradsync::ring> r(comm, layers);
//   r(grad);
//   gradsync::allreduce(comm, grad, gradsync::adasum{}, gradsync::ring{}, layers);
//
// Two transports, chosen when the reducer is planned:
//  - direct: the algorithm's device plan runs in the span's space, its messages straight
//    from and into device memory. Needs a communicator that carries the space's memory
//    (Space::carries: a local_group built with gradsync::device_copy, nccl_communicator) and
//    a device plan for the (policy, algorithm) pair (device/algorithm.hpp: Sum and Average
//    with ring, recursive_halving, recursive_doubling, automatic; nccl_passthrough).
//  - staged: the data is copied into a host buffer (pinned for a GPU, allocated once here),
//    the host algorithm runs on it, and the result is copied back. Any policy and algorithm,
//    Adasum and hierarchical included, over any communicator that runs host algorithms
//    (runs_host_algorithms: all but nccl_communicator).
// transport::automatic takes direct where it can. Device plans send the host plans'
// messages and compute their bits, so ranks with equal options may even differ in
// transport.
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

#include <gradsync/allreduce.hpp>
#include <gradsync/communicator.hpp>
#include <gradsync/device/algorithm.hpp>
#include <gradsync/device/span.hpp>
#include <gradsync/error.hpp>
#include <gradsync/layout.hpp>
#include <gradsync/types.hpp>
#include <gradsync/verify.hpp>

namespace gradsync {

enum class transport { automatic, staged, direct };

inline const char* transport_name(transport t) noexcept
{
    return t == transport::direct ? "direct" : t == transport::staged ? "staged" : "automatic";
}

struct device_options {
    transport path = transport::automatic;
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

namespace detail {

// The plan types of the two transports, std::monostate where a transport cannot exist.
template <element T, class Comm, class Policy, class Algorithm, class Space>
auto direct_plan_of()
{
    if constexpr (device_algorithm<Algorithm, Policy>::available)
        return std::type_identity<typename device_algorithm<Algorithm, Policy>::template plan<T, Comm, Space>>{};
    else
        return std::type_identity<std::monostate>{};
}

template <element T, class Comm, class Policy, class Algorithm>
auto staged_reducer_of()
{
    if constexpr (runs_host_algorithms<Comm>)
        return std::type_identity<reducer<T, Comm, Policy, Algorithm>>{};
    else
        return std::type_identity<std::monostate>{};
}

} // namespace detail

template <element T, communicator Comm, class Policy = sum, class Algorithm = automatic, class Space = cuda_stream>
class device_reducer {
    static constexpr bool has_direct = device_algorithm<Algorithm, Policy>::available;
    static constexpr bool has_staged = runs_host_algorithms<Comm>;
    static_assert(has_direct || has_staged,
                  "gradsync::device_reducer: this communicator runs only device plans, and there is none for this "
                  "policy and algorithm (device plans: sum or average with ring, recursive_halving, "
                  "recursive_doubling, automatic or nccl_passthrough)");

public:
    // count elements in `layers` (empty: one layer); the layers must add up to count.
    device_reducer(Comm& comm, std::size_t count, std::span<const std::size_t> layers, Algorithm algorithm = {},
                   device_options options = {})
        : comm_(&comm), count_(count), tag_(options.reducer.tag), path_(choose(comm, options.path))
    {
        if constexpr (has_direct) {
            if (path_ == transport::direct) {
                const layer_layout layout(count, layers);
                verify_agreement(comm, reducer_signature<T, Policy>(comm, count, layout, algorithm, options.reducer),
                                 "gradsync::device_reducer");
                direct_.emplace(comm, layout, algorithm, options.reducer.pipeline);
                return;
            }
        }
        if constexpr (has_staged) {
            staged_.emplace(comm, count, layers, algorithm, options.reducer);
            host_.emplace(count);
        }
    }

    device_reducer(Comm& comm, std::span<const std::size_t> layers, Algorithm algorithm = {},
                   device_options options = {})
        : device_reducer(comm, layer_layout(0, layers).total(), layers, algorithm, options)
    {
    }

    device_reducer(Comm& comm, std::size_t count, Algorithm algorithm = {}, device_options options = {})
        : device_reducer(comm, count, std::span<const std::size_t>(), algorithm, options)
    {
    }

    // Reduces data in place on every rank. data.size() must equal count().
    void operator()(device_span<T, Space> data)
    {
        if (data.size() != count_)
            throw usage_error("gradsync::device_reducer (" + where(*comm_) + "): buffer holds " +
                              std::to_string(data.size()) + " elements, the reducer was planned for " +
                              std::to_string(count_));
        if constexpr (has_direct)
            if (direct_)
                return direct_->template run<Policy>(*comm_, data, tag_);
        if constexpr (has_staged) {
            const Space& space = data.space();
            space.copy(host_->data(), data.data(), count_ * sizeof(T));
            space.synchronize();
            (*staged_)(std::span<T>(host_->data(), count_));
            space.copy(data.data(), host_->data(), count_ * sizeof(T));
            space.synchronize();
        }
    }

    std::size_t count() const noexcept { return count_; }
    // The transport chosen: transport::staged or transport::direct.
    transport path() const noexcept { return path_; }

private:
    static transport choose(const Comm& comm, transport requested)
    {
        const bool carried = Space::carries(comm);
        const std::string who = "gradsync::device_reducer (" + where(comm) + "): ";
        if (requested == transport::direct && !has_direct)
            throw usage_error(who + "the direct transport was asked for, but there is no device plan for " +
                              Policy::name + " with " + Algorithm::name + "; use the staged transport");
        if (requested == transport::direct && !carried)
            throw usage_error(who + "the direct transport needs a communicator that moves device memory (a "
                              "local_group built with gradsync::device_copy, or nccl_communicator)");
        if (requested == transport::staged && !has_staged)
            throw usage_error(who + "this communicator cannot run the host algorithms of the staged transport");
        if (requested != transport::automatic)
            return requested;
        if (has_direct && carried)
            return transport::direct;
        if (!has_staged)
            throw usage_error(who + "this communicator does not move this memory, and cannot run the host "
                              "algorithms of the staged transport");
        return transport::staged;
    }

    using direct_plan = typename decltype(detail::direct_plan_of<T, Comm, Policy, Algorithm, Space>())::type;
    using staged_reducer = typename decltype(detail::staged_reducer_of<T, Comm, Policy, Algorithm>())::type;

    // Those of the transport not taken stay empty.
    Comm* comm_;
    std::size_t count_;
    int tag_;
    transport path_;
    std::optional<direct_plan> direct_;
    std::optional<staged_reducer> staged_;
    std::optional<typename Space::template host_buffer<T>> host_;
};

// One allreduce of device memory, in place. layers: element counts of the layers fused in
// data (empty: one).
template <communicator Comm, element T, class Space, class Policy = sum, class Algorithm = automatic>
void allreduce(Comm& comm, device_span<T, Space> data, Policy = {}, Algorithm algorithm = {},
               std::span<const std::size_t> layers = {}, device_options options = {})
{
    device_reducer<T, Comm, Policy, Algorithm, Space> r(comm, data.size(), layers, algorithm, options);
    r(data);
}

} // namespace gradsync
