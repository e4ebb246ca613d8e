// Must not compile: nccl_passthrough runs ncclAllReduce, which has no Adasum. CTest
// (compile.nccl_passthrough_adasum) compiles this and expects the static_assert's message.
#include <gradsync/algorithm/nccl_passthrough.hpp>
#include <gradsync/comm/nccl/nccl.hpp>
#include <gradsync/device.hpp>

void reduce(gradsync::nccl_communicator& comm, float* grad, std::size_t count, cudaStream_t stream)
{
    gradsync::allreduce(comm, gradsync::device_span<float>(grad, count, stream), gradsync::adasum{},
                        gradsync::nccl_passthrough{});
}
