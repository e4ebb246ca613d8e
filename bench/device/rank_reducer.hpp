// One rank's side of a run: its data, restored before every run, and the reducer that a
// bench_case plans on it, one allreduce per call.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include <gradsync/device.hpp>
#include <gradsync/gradsync.hpp>
#if GRADSYNC_BENCH_NCCL
#include <gradsync/comm/nccl/nccl.hpp>
#include <gradsync/algorithm/nccl_passthrough.hpp>
#endif

#include "cases.hpp"

namespace device_bench {

using gradsync::detail::cuda_check;

static_assert(gradsync::has_plan<float, gradsync::local_communicator, gradsync::automatic, gradsync::adasum,
                                 gradsync::space_memory<gradsync::cuda_stream>>,
              "the benchmark runs Adasum on the direct path");

// One rank's memory: the vector it reduces (on the device, and a host copy for the host
// path) and its starting values, restored before every run.
struct rank_data {
    cudaStream_t stream = nullptr;
    gradsync::device_buffer<float> device, start;
    std::vector<float> host, values;

    rank_data(int rank, std::size_t device_count, std::size_t host_count, cudaStream_t s)
        : stream(s), device(device_count), start(device_count), host(host_count), values(device_count)
    {
        for (std::size_t i = 0; i < values.size(); ++i) // in [0.5, 1.5), different on each rank
            values[i] = 0.5f + float((i * 7 + std::size_t(rank) * 3) % 16) / 16.0f;
        cuda_check(cudaMemcpyAsync(start.data(), values.data(), device_count * sizeof(float), cudaMemcpyHostToDevice,
                                   stream),
                   "cudaMemcpyAsync");
        cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    }

    void restore(std::size_t count, side where)
    {
        if (where == side::host) {
            std::copy_n(values.data(), count, host.data());
            return;
        }
        cuda_check(cudaMemcpyAsync(device.data(), start.data(), count * sizeof(float), cudaMemcpyDeviceToDevice,
                                   stream),
                   "cudaMemcpyAsync");
        cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    }
};

// A planned reducer of the first `count` elements, one allreduce per call.
template <class Policy, class Algorithm, class Comm>
std::function<void()> planned(Comm& comm, const bench_case& c, std::size_t count,
                              std::span<const std::size_t> layers, rank_data& data)
{
    if (c.where == side::host) {
        if constexpr (gradsync::runs_host_algorithms<Comm>) {
            auto r = std::make_shared<gradsync::reducer<float, Comm, Policy, Algorithm>>(comm, count, layers);
            return [r, d = std::span<float>(data.host.data(), count)] { (*r)(d); };
        } else {
            throw std::logic_error("bench_device: " + c.name() + ": this communicator has no host path");
        }
    }
    const gradsync::device_options options{.path = c.where == side::direct ? gradsync::device_path::direct
                                                                            : gradsync::device_path::staged};
    auto r = std::make_shared<gradsync::device_reducer<float, Comm, Policy, Algorithm>>(comm, count, layers,
                                                                                        Algorithm{}, options);
    return [r, d = gradsync::device_span<float>(data.device.data(), count, data.stream)] { (*r)(d); };
}

// nccl_passthrough, which exists for Sum over NCCL only.
template <class Policy, class Comm>
std::function<void()> planned_passthrough([[maybe_unused]] Comm& comm, const bench_case& c,
                                          [[maybe_unused]] std::size_t count,
                                          [[maybe_unused]] std::span<const std::size_t> layers,
                                          [[maybe_unused]] rank_data& data)
{
#if GRADSYNC_BENCH_NCCL
    if constexpr (std::is_same_v<Comm, gradsync::nccl_communicator> && !gradsync::is_adasum<Policy>)
        return planned<Policy, gradsync::nccl_passthrough>(comm, c, count, layers, data);
    else
#endif
        throw std::logic_error("bench_device: " + c.name() + ": nccl_passthrough runs Sum over NCCL only");
}

template <class Policy, class Comm>
std::function<void()> planned_by_algorithm(Comm& comm, const bench_case& c, std::size_t count,
                                           std::span<const std::size_t> layers, rank_data& data)
{
    switch (c.algorithm) {
    case algorithm_kind::recursive_halving:
        return planned<Policy, gradsync::recursive_halving>(comm, c, count, layers, data);
    case algorithm_kind::ring:
        return planned<Policy, gradsync::ring>(comm, c, count, layers, data);
    case algorithm_kind::nccl_passthrough:
        return planned_passthrough<Policy>(comm, c, count, layers, data);
    default:
        return planned<Policy, gradsync::automatic>(comm, c, count, layers, data);
    }
}

// Rank `data`'s reducer for case c, with its data restored: one allreduce per call.
class rank_reducer {
public:
    template <class Comm>
    rank_reducer(Comm& comm, const bench_case& c, std::size_t count, std::span<const std::size_t> layers,
                 rank_data& data)
    {
        data.restore(count, c.where);
        call_ = c.policy == policy_kind::adasum
                    ? planned_by_algorithm<gradsync::adasum>(comm, c, count, layers, data)
                    : planned_by_algorithm<gradsync::sum>(comm, c, count, layers, data);
    }

    void operator()() { call_(); }

private:
    std::function<void()> call_;
};

} // namespace device_bench
