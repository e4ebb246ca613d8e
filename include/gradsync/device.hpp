// The device path: allreduce and broadcast of GPU memory (device_span, device_reducer,
// device_broadcaster, allreduce and broadcast on a device_span), the Thrust kernels, and
// device_copy for local_group ranks that share a GPU.
// Needs CUDA (link gradsync::cuda) and nvcc: include it from .cu files. docs/gpu.md has the
// design. The NCCL communicator and its algorithm are included by name: <gradsync/comm/nccl/nccl.hpp>,
// <gradsync/algorithm/nccl_passthrough.hpp>.
#pragma once

#include <gradsync/core/cuda.hpp>
#include <gradsync/core/device_span.hpp>
#include <gradsync/core/space.hpp>
#include <gradsync/comm/local/device_copy.hpp>
#include <gradsync/kernels/thrust.hpp>
#include <gradsync/policy/device_sum.hpp>
#include <gradsync/memory/space_memory.hpp>
#include <gradsync/collective/device_broadcaster.hpp>
#include <gradsync/collective/device_reducer.hpp>
