// mpi_abort: MPI_Abort that ends this process within a bound, also when the launcher is out of
// reach.
//
// Why: MPI_Abort asks the launcher to end the job. On a host cut off from the launcher (a
// network partition) that request never arrives, and Open MPI's MPI_Abort then waits on its
// own daemon without end: the rank and its daemon outlive the job. mpi_abort calls MPI_Abort
// and, if the process still runs `grace` later, prints why on stderr and ends it with
// _Exit(code). docs/cluster.md ("When a link fails") has the launcher options that end the
// daemons of a cut-off host too.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace gradsync {

[[noreturn]] inline void mpi_abort(MPI_Comm comm, int code, std::chrono::milliseconds grace)
{
    // Detached, so nothing joins it: it only ever ends the process.
    std::thread([code, grace] {
        std::this_thread::sleep_for(grace);
        std::fprintf(stderr,
                     "gradsync::mpi_abort: MPI_Abort did not end this process within %lld ms (is the "
                     "launcher out of reach?); ending it with status %d\n",
                     static_cast<long long>(grace.count()), code);
        std::fflush(stderr);
        std::_Exit(code);
    }).detach();
    MPI_Abort(comm, code);
    std::_Exit(code); // MPI_Abort is not meant to return; if it does, the job is over all the same
}

} // namespace gradsync
