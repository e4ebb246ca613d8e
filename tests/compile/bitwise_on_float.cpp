// Must not compile: a bitwise policy on floating-point elements. The compiler's message must
// be the policy's static_assert (tests/CMakeLists.txt checks it).
#include <gradsync/gradsync.hpp>

#include <span>
#include <vector>

void reduce(gradsync::local_communicator& comm, std::vector<float>& data)
{
    gradsync::allreduce(comm, std::span<float>(data), gradsync::bitwise_xor{}, gradsync::ring{});
}
