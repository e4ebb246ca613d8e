// What the conformance suite (tests/conformance/*.hpp) needs of a transport. A harness H
// provides
//   H::comm_type                      the communicator a rank is given
//   H::sizes(wanted)                  the N to run: local_group every wanted N; a launched job
//                                     (MPI, Gloo) only the launcher's, whatever was wanted
//   H::run(n, body)                   body(comm_type&) on every rank of n; "" or what escaped a
//                                     rank (a launched job cannot go on past that: it aborts)
//   H::checked_rank()                 the rank whose results this process checks against the
//                                     references: rank 0 of the threads, or its own rank
//   H::checked_ranks(n)               the ranks whose outcomes this process checks where every
//                                     rank's own outcome counts (misuse): all n of the
//                                     threads, or its own rank
//   H::identical(per_rank<T>)         "" when every rank holds the same bits (collective where
//                                     the ranks are processes: every rank calls it in turn)
//   H::in_process                     true where the ranks are threads of this process: the
//                                     reductions suite runs its whole matrix there, and its
//                                     cut where they are processes (reductions.hpp, runs())
// Rank code only stores its results in per_rank slots; every assertion runs after run()
// returns, on the main thread (Catch2 is not thread-safe).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "../reference.hpp"

namespace conformance {

template <class T>
using per_rank = std::vector<std::vector<T>>; // [rank]; a process fills its own slot only

// "" when every rank holds exactly rank 0's bytes (NaN payloads included).
template <class T>
std::string identical_in_memory(const per_rank<T>& out)
{
    for (std::size_t r = 1; r < out.size(); ++r) {
        if (out[r].size() != out[0].size())
            return "rank " + std::to_string(r) + " has " + std::to_string(out[r].size()) + " elements";
        if (!ref::same_bits(out[r].data(), out[0].data(), out[0].size() * sizeof(T)))
            return "rank " + std::to_string(r) + " differs from rank 0 at " + ref::first_difference(out[r], out[0]);
    }
    return "";
}

} // namespace conformance
