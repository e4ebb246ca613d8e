// Large allocations shared between simulated ranks: SMPI runs every rank in one process, so
// 1 024 ranks' scratch of 64 MiB each would not fit. Once switched on, every allocation of at
// least 1 MiB through operator new (the reducers' scratch are std::vectors) is one block of
// simulated memory that every rank's allocation of that call site shares (SMPI's shared
// malloc): the simulated times are unchanged, and the values in such blocks are garbage.
// The program links shared_memory_hook.cpp, which replaces operator new and delete, with
// -Bsymbolic-functions so that its own code binds to them.
#pragma once

namespace simulation {

void share_large_allocations(bool on);

} // namespace simulation
