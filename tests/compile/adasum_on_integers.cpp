// Must not compile: Adasum of integer elements. The compiler's message must be the plan
// table's static_assert (tests/CMakeLists.txt checks it).
#include <gradsync/gradsync.hpp>

#include <cstdint>
#include <span>
#include <vector>

void reduce(gradsync::local_communicator& comm, std::vector<std::int64_t>& data)
{
    gradsync::allreduce(comm, std::span<std::int64_t>(data), gradsync::adasum{}, gradsync::automatic{});
}
