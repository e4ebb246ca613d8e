// data_parallel's options: what it reduces, how it plans, how it keeps buffers, passes and
// ranks in step. docs/torch.md describes each.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include <gradsync/core/error.hpp>
#include <gradsync/planner/cost_model.hpp>
#include <gradsync/planner/merge_plan.hpp>
#include <gradsync/planner/optimal.hpp>
#include <gradsync/planner/profile.hpp>
#include <gradsync/runtime/synchronizer.hpp>

namespace gradsync {

// What data_parallel reduces: the gradients during backward, or the model change after a
// local optimizer step.
enum class reduction_target { gradients, model_change };

// How module buffers (BatchNorm's running statistics) are kept equal, once per iteration,
// after the reduction: copied from rank 0 (DDP's broadcast_buffers), averaged over the ranks
// (floating buffers of the element type; the others are copied), or left alone.
enum class buffer_sync { broadcast, average, none };

// The gradients' type on the wire: their own, or rounded to fp16 or bf16 for the reduction
// and widened after it (Horovod's Compression.fp16, DDP's fp16 and bf16 compress hooks), for
// fp32 and fp64 parameters. Adasum's dot products are formed in double either way.
enum class compression { none, fp16, bf16 };

struct data_parallel_options {
    reduction_target reduce = reduction_target::gradients;
    // Iterations measured (one allreduce per layer) before the first plan; 0 keeps wfbp.
    int measure_iterations = 3;
    // The model's allreduce cost; zero: calibrated over the communicator when planning.
    planner::linear_cost cost{};
    // The planner: profile and cost to plan (bytes per element are the element type's).
    std::function<planner::merge_plan(const planner::profile&, const planner::linear_cost&, std::size_t)> plan_with =
        [](const planner::profile& p, const planner::linear_cost& c, std::size_t bytes) {
            return planner::optimal(p, c, bytes);
        };
    synchronizer_options sync{};
    // Construction copies rank 0's parameters and buffers to every rank.
    bool broadcast_start = true;
    buffer_sync buffers = buffer_sync::broadcast;
    // Backward passes per step: the hooks reduce on the last of them only.
    int accumulate = 1;
    // Model change: local optimizer steps per combined change (the Adasum paper's Table 2).
    int local_steps = 1;
    // Every rank votes once per iteration whether it still has data, so that join() can answer
    // for a rank that has run out (DDP's Join, Horovod's join()).
    bool uneven_inputs = false;
    compression compress = compression::none;
    // Every this many iterations the ranks compare parameters and buffers bit for bit; 0: never.
    int check_every = 0;
};

namespace torch_binding {

// The options' values on their own, for parameters of element_bytes each: a usage_error
// after prefix names the first that cannot be.
inline void check(const data_parallel_options& options, std::size_t element_bytes, const std::string& prefix)
{
    const auto at_least = [&](int value, const char* name, int least) {
        if (value < least)
            throw usage_error(prefix + "data_parallel_options::" + name + " is " + std::to_string(value) +
                              "; it must be at least " + std::to_string(least));
    };
    at_least(options.measure_iterations, "measure_iterations", 0);
    at_least(options.accumulate, "accumulate", 1);
    at_least(options.local_steps, "local_steps", 1);
    at_least(options.check_every, "check_every", 0);
    if (options.compress != compression::none && element_bytes == 2)
        throw usage_error(prefix + "data_parallel_options::compress rounds fp32 or fp64 gradients to 16 bits; "
                                   "these parameters are 16-bit already");
    if (options.local_steps > 1 && options.reduce != reduction_target::model_change)
        throw usage_error(prefix + "data_parallel_options::local_steps needs reduce = "
                                   "reduction_target::model_change (gradients are reduced every step)");
}

} // namespace torch_binding

} // namespace gradsync
