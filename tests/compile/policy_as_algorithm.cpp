// Must not compile: a policy where the reducer's algorithm goes. The compiler's message must
// name the concept (tests/CMakeLists.txt checks it).
#include <gradsync/gradsync.hpp>

gradsync::reducer<float, gradsync::local_communicator, gradsync::sum, gradsync::average>* unusable = nullptr;
