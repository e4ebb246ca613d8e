// Must not compile: Average of integer elements. The compiler's message must be the policy's
// static_assert (tests/CMakeLists.txt checks it).
#include <gradsync/gradsync.hpp>

#include <cstdint>
#include <span>
#include <vector>

void reduce(gradsync::local_communicator& comm, std::vector<std::int32_t>& data)
{
    gradsync::allreduce(comm, std::span<std::int32_t>(data), gradsync::average{}, gradsync::recursive_halving{});
}
