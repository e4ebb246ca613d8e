// <gradsync/torch.hpp>: data parallelism for a libtorch module, gradsync's answer to PyTorch's
// DistributedDataParallel (docs/torch.md). The front door of include/gradsync/torch/:
//
//   gradsync::data_parallel<float, Comm, gradsync::average> dp(comm, *model); // collective
//   for each batch:
//       dp.zero_grad();                      // not optimizer.zero_grad(), which throws on views
//       loss = criterion(model->forward(x), y);
//       loss.backward();                     // each group's allreduce starts during backward
//       dp.step(optimizer);                  // every gradient reduced in place, then the step
//   dp.join(optimizer);                      // with uneven_inputs: until every rank ran out
//
// torch/data_parallel.hpp     the class
// torch/options.hpp           data_parallel_options, reduction_target, buffer_sync
// torch/agreement.hpp         the ranks' tensors compared at construction
// torch/hooks.hpp             the gradient accumulators' hooks
// torch/planning.hpp          measured backward times to a merge plan
// torch/model_change.hpp      the model change (the Adasum paper's Figure 3)
// torch/local_step.hpp        one parameter's local optimizer step (overlap())
// torch/wire.hpp              compressed gradients
// torch/state.hpp             parameters, buffers and optimizer state copied and compared
// torch/buffers.hpp           buffers made equal every iteration
// torch/join.hpp              the vote of uneven inputs
// torch/element.hpp           the element types and their libtorch scalar types
#pragma once

#include <torch/torch.h>

#include <gradsync/torch/data_parallel.hpp>
