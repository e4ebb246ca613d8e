// The device path: allreduce and broadcast of GPU memory (device_span, device_reducer,
// device_broadcaster, allreduce and broadcast on a device_span), the Thrust kernels, and
// device_copy for local_group ranks that share a GPU.
// Needs CUDA (link gradsync::cuda) and nvcc: include it from .cu files. docs/gpu.md has the
// design. The NCCL communicator and its algorithm are included by name: <gradsync/comm/nccl/nccl.hpp>,
// <gradsync/device/nccl_passthrough.hpp>.
#pragma once

#include <gradsync/comm/local/device_copy.hpp>
#include <gradsync/device/broadcaster.hpp>
#include <gradsync/device/cuda.hpp>
#include <gradsync/device/memory.hpp>
#include <gradsync/device/policy.hpp>
#include <gradsync/device/reducer.hpp>
#include <gradsync/device/space.hpp>
#include <gradsync/device/span.hpp>
#include <gradsync/kernels/thrust.hpp>
