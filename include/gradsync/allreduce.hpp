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
// The plan comes from the table (plan_table.hpp) for (algorithm, policy, host memory);
// Policy must model reduction_policy and Algorithm allreduce_algorithm, so arguments in the
// wrong order fail to compile with the concept's name.
//
// Thread safety: one reducer runs one reduction at a time. Reducers that may run
// concurrently on the same communicator need distinct tags (reducer_options::tag).
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include <gradsync/algorithm/automatic.hpp>
#include <gradsync/algorithm/exchange.hpp>
#include <gradsync/algorithm/memory.hpp>
#include <gradsync/communicator.hpp>
#include <gradsync/error.hpp>
#include <gradsync/layout.hpp>
#include <gradsync/plan.hpp>
#include <gradsync/plan_table.hpp>
#include <gradsync/policy/reduction_policy.hpp>
#include <gradsync/policy/sum.hpp>
#include <gradsync/types.hpp>
#include <gradsync/verify.hpp>

namespace gradsync {

struct reducer_options {
    int tag = tags::reducer;
    pipeline_options pipeline{};

    template <class Algorithm>
    plan_options<Algorithm> for_plan(const Algorithm& algorithm) const
    {
        return {algorithm, pipeline, tag};
    }
};

namespace detail {

// The plan of (Algorithm, Policy, Memory), built once every rank has agreed on it, and the
// size check of every call: what reducer and device_reducer's direct path share. `who`
// names the front door in messages.
template <element T, communicator Comm, class Policy, class Algorithm, class Memory>
class agreed_plan {
public:
    using plan_type = plan_of<T, Comm, Algorithm, Policy, Memory>;
    static_assert(reduction_plan<plan_type>, "gradsync: a plan of the table does not model reduction_plan");

    agreed_plan(Comm& comm, std::size_t count, const layer_layout& layout, const plan_options<Algorithm>& options,
                const char* who)
        : who_(who), plan_(agree(comm, count, layout, options, who))
    {
    }

    void operator()(Comm& comm, typename plan_type::data_type data)
    {
        check_size(comm, data.size());
        plan_.run(comm, data);
    }

    void check_size(const Comm& comm, std::size_t elements) const
    {
        if (elements != plan_.count())
            throw usage_error(std::string(who_) + " (" + where(comm) + "): buffer holds " + std::to_string(elements) +
                              " elements, the reducer was planned for " + std::to_string(plan_.count()));
    }

    const plan_type& plan() const noexcept { return plan_; }

private:
    static plan_type agree(Comm& comm, std::size_t count, const layer_layout& layout,
                           const plan_options<Algorithm>& options, const char* who)
    {
        verify_agreement(comm, call_signature<T, Policy, Memory>(comm, count, layout, options), who);
        return plan_type(comm, layout, options);
    }

    const char* who_;
    plan_type plan_;
};

inline std::size_t total_of(std::span<const std::size_t> layers) { return layer_layout(0, layers).total(); }

} // namespace detail

template <element T, communicator Comm, reduction_policy Policy = sum, allreduce_algorithm Algorithm = automatic>
class reducer {
    static_assert(has_plan<T, Comm, Algorithm, Policy>,
                  "gradsync::reducer: no plan runs this algorithm for this policy in host memory (plan_table.hpp)");
    using agreed = detail::agreed_plan<T, Comm, Policy, Algorithm, host_memory>;

public:
    using plan_type = typename agreed::plan_type;

    // count elements in `layers` (empty: one layer); the layers must add up to count.
    reducer(Comm& comm, std::size_t count, std::span<const std::size_t> layers, Algorithm algorithm = {},
            reducer_options options = {})
        : comm_(&comm), layout_(count, layers),
          plan_(comm, count, layout_, options.for_plan(algorithm), "gradsync::reducer")
    {
    }

    reducer(Comm& comm, std::span<const std::size_t> layers, Algorithm algorithm = {}, reducer_options options = {})
        : reducer(comm, detail::total_of(layers), layers, algorithm, options)
    {
    }

    reducer(Comm& comm, std::size_t count, Algorithm algorithm = {}, reducer_options options = {})
        : reducer(comm, count, std::span<const std::size_t>(), algorithm, options)
    {
    }

    // Reduces data in place on every rank. data.size() must equal count().
    void operator()(std::span<T> data) { plan_(*comm_, data); }

    std::size_t count() const noexcept { return layout_.total(); }
    const layer_layout& layout() const noexcept { return layout_; }
    const plan_type& plan() const noexcept { return plan_.plan(); }

private:
    Comm* comm_;
    layer_layout layout_;
    agreed plan_;
};

// One allreduce, in place. layers: element counts of the layers fused in data (empty: one).
template <communicator Comm, element T, reduction_policy Policy = sum, allreduce_algorithm Algorithm = automatic>
void allreduce(Comm& comm, std::span<T> data, Policy = {}, Algorithm algorithm = {},
               std::span<const std::size_t> layers = {}, reducer_options options = {})
{
    reducer<T, Comm, Policy, Algorithm> r(comm, data.size(), layers, algorithm, options);
    r(data);
}

} // namespace gradsync
