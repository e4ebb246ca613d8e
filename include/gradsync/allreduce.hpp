// The front door: reducer<> (plan once, run many) and allreduce() (one call).
//
//   gradsync::reducer<float, Comm, gradsync::average, gradsync::ring> r(comm, layer_sizes);
//   r(std::span<float>(grad));                       // in place, every call
//
//   gradsync::allreduce(comm, std::span<float>(grad)); // Sum, automatic algorithm
//
// Constructing a reducer is collective: every rank of the communicator must construct one
// with the same element type, policy, algorithm, count, layer layout and options. It plans
// the schedule, allocates every scratch buffer and request slot, and checks agreement
// (verify.hpp), throwing on every rank if the ranks disagree. A call then allocates nothing
// and sends only the algorithm's own messages. allreduce() builds a reducer per call (the
// agreement check included); use a reducer for repeated reductions.
//
// Thread safety: one reducer runs one reduction at a time. Reducers that may run
// concurrently on the same communicator need distinct tags (reducer_options::tag).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>

#include <gradsync/algorithm/automatic.hpp>
#include <gradsync/algorithm/exchange.hpp>
#include <gradsync/communicator.hpp>
#include <gradsync/error.hpp>
#include <gradsync/layout.hpp>
#include <gradsync/policy/adasum.hpp>
#include <gradsync/policy/sum.hpp>
#include <gradsync/types.hpp>
#include <gradsync/verify.hpp>

namespace gradsync {

struct reducer_options {
    int tag = 24301; // below 32767, the smallest MPI_TAG_UB the standard allows
    pipeline_options pipeline{};
};

// What every rank's reducer must agree on (verify.hpp), from its arguments.
template <element T, class Policy, communicator Comm, class Algorithm>
signature reducer_signature(const Comm& comm, std::size_t count, const layer_layout& layout, const Algorithm& algorithm,
                            const reducer_options& options)
{
    signature s;
    s.value[signature::element_type] = element_traits<T>::code;
    s.value[signature::policy] = Policy::code;
    s.value[signature::algorithm] = Algorithm::code;
    s.value[signature::count] = count;
    s.value[signature::layer_sum] = layout.total();
    s.value[signature::layers] = layout.layers();
    s.value[signature::layout_fingerprint] = layout.fingerprint();
    s.value[signature::segment_bytes] = options.pipeline.segment_bytes;
    s.value[signature::window] = std::uint64_t(options.pipeline.window);
    s.value[signature::eager_limit] = eager_limit(comm);
    s.value[signature::tag] = std::uint64_t(options.tag);
    s.name(signature::element_type, element_traits<T>::name);
    s.name(signature::policy, Policy::name);
    s.name(signature::algorithm, Algorithm::name);
    if constexpr (requires { algorithm.parameter(); })
        s.value[signature::algorithm_parameter] = algorithm.parameter();
    return s;
}

template <element T, communicator Comm, class Policy = sum, class Algorithm = automatic>
class reducer {
public:
    using plan_type = typename Algorithm::template plan<T, Comm, Policy>;

    // count elements in `layers` (empty: one layer); the layers must add up to count.
    reducer(Comm& comm, std::size_t count, std::span<const std::size_t> layers, Algorithm algorithm = {},
            reducer_options options = {})
        : comm_(&comm), options_(options), layout_(count, layers),
          plan_(make_plan(comm, count, layout_, algorithm, options))
    {
    }

    reducer(Comm& comm, std::span<const std::size_t> layers, Algorithm algorithm = {}, reducer_options options = {})
        : reducer(comm, sum_of(layers), layers, algorithm, options)
    {
    }

    reducer(Comm& comm, std::size_t count, Algorithm algorithm = {}, reducer_options options = {})
        : reducer(comm, count, std::span<const std::size_t>(), algorithm, options)
    {
    }

    // Reduces data in place on every rank. data.size() must equal count().
    void operator()(std::span<T> data)
    {
        if (data.size() != layout_.total())
            throw usage_error("gradsync::reducer (" + where(*comm_) + "): buffer holds " + std::to_string(data.size()) +
                              " elements, the reducer was planned for " + std::to_string(layout_.total()));
        plan_.template run<Policy>(*comm_, data, options_.tag);
    }

    std::size_t count() const noexcept { return layout_.total(); }
    const layer_layout& layout() const noexcept { return layout_; }
    const plan_type& plan() const noexcept { return plan_; }

private:
    static std::size_t sum_of(std::span<const std::size_t> layers) { return layer_layout(0, layers).total(); }

    static plan_type make_plan(Comm& comm, std::size_t count, const layer_layout& layout, const Algorithm& algorithm,
                               const reducer_options& options)
    {
        verify_agreement(comm, reducer_signature<T, Policy>(comm, count, layout, algorithm, options), "gradsync::reducer");
        return plan_type(comm, layout, algorithm, options.pipeline);
    }

    Comm* comm_;
    reducer_options options_;
    layer_layout layout_;
    plan_type plan_;
};

// One allreduce, in place. layers: element counts of the layers fused in data (empty: one).
template <communicator Comm, element T, class Policy = sum, class Algorithm = automatic>
void allreduce(Comm& comm, std::span<T> data, Policy = {}, Algorithm algorithm = {},
               std::span<const std::size_t> layers = {}, reducer_options options = {})
{
    reducer<T, Comm, Policy, Algorithm> r(comm, data.size(), layers, algorithm, options);
    r(data);
}

} // namespace gradsync
