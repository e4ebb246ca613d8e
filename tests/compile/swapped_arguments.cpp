// Must not compile: the algorithm and the policy are passed in each other's place. The
// compiler's message must name the concept (tests/CMakeLists.txt checks it).
#include <gradsync/gradsync.hpp>

#include <span>
#include <vector>

void reduce(gradsync::local_communicator& comm, std::vector<float>& grad)
{
    gradsync::allreduce(comm, std::span<float>(grad), gradsync::ring{}, gradsync::sum{});
}
