// SimGrid's SMPI (smpicxx, smpirun) runs an MPI program's ranks as threads of one process on
// simulated time and a simulated platform. Its mpi.h is recognised at compile time, and the
// MPI transport then keeps to what the simulator can see: waits without a deadline block in
// MPI_Wait (SMPI charges every MPI_Test simulated time, so polling would inflate the times it
// reports), deadlines count MPI_Wtime (simulated seconds), and ranks never share memory (they
// would spin on futexes the simulator cannot see). docs/simulation.md has the rest.
#pragma once

#include <mpi.h>

#include <chrono>
#include <type_traits>

namespace gradsync::detail {

#ifdef SMPI_H
inline constexpr bool simulated_mpi = true;
#else
inline constexpr bool simulated_mpi = false;
#endif

// MPI_Wtime as a std::chrono clock.
struct mpi_wtime_clock {
    using duration = std::chrono::nanoseconds;
    using rep = duration::rep;
    using period = duration::period;
    using time_point = std::chrono::time_point<mpi_wtime_clock>;
    static constexpr bool is_steady = true;
    static time_point now() noexcept
    {
        return time_point(std::chrono::duration_cast<duration>(std::chrono::duration<double>(MPI_Wtime())));
    }
};

// The clock an MPI transport's deadlines count.
using mpi_wait_clock = std::conditional_t<simulated_mpi, mpi_wtime_clock, std::chrono::steady_clock>;

} // namespace gradsync::detail
