// <gradsync/torch.hpp>: data parallelism for a libtorch module, gradsync's answer to PyTorch's
// DistributedDataParallel (docs/torch.md). The front door of include/gradsync/torch/ (its
// headers: docs/design.md, "Layers").
//
//   gradsync::data_parallel<float, Comm, gradsync::average> dp(comm, *model); // collective
//   for each batch:
//       dp.zero_grad();                      // not optimizer.zero_grad(), which throws on views
//       loss = criterion(model->forward(x), y);
//       loss.backward();                     // each group's allreduce starts during backward
//       dp.step(optimizer);                  // every gradient reduced in place, then the step
//   dp.join(optimizer);                      // with uneven_inputs: until every rank ran out
#pragma once

#include <torch/torch.h>

#include <gradsync/torch/data_parallel.hpp>
