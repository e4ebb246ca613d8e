// Must not compile: an algorithm where the reducer's policy goes. The compiler's message must
// name the concept (tests/CMakeLists.txt checks it).
#include <gradsync/gradsync.hpp>

gradsync::reducer<float, gradsync::local_communicator, gradsync::ring>* unusable = nullptr;
