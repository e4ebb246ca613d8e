// The consumer: a reducer over MPI_COMM_WORLD (Sum and Adasum) and one over a local_group,
// each result checked against what the inputs make it by hand. Exit status 0 when all hold.
// Written as most MPI programs are: the communicator lives in main's scope and MPI_Finalize
// comes before its destructor.
#include <gradsync/comm/mpi/mpi.hpp>
#include <gradsync/gradsync.hpp>

#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <span>
#include <vector>

int main(int argc, char** argv)
{
    MPI_Init(&argc, &argv);
    gradsync::mpi_communicator comm(MPI_COMM_WORLD);
    int failures = 0;
    try {
        const int n = comm.size(), r = comm.rank();

        // Sum of (rank + 1) * (i + 1) over ranks: (i + 1) * n (n + 1) / 2, exact in float.
        const std::vector<std::size_t> layers{3, 0, 1000, 1};
        gradsync::reducer<float, gradsync::mpi_communicator, gradsync::sum, gradsync::ring> sum(comm, layers);
        std::vector<float> g(sum.count());
        for (std::size_t i = 0; i < g.size(); ++i)
            g[i] = float((r + 1) * int(i % 7 + 1));
        sum(std::span<float>(g));
        for (std::size_t i = 0; i < g.size(); ++i)
            failures += g[i] != float(int(i % 7 + 1) * n * (n + 1) / 2);

        // Adasum of equal vectors is the vector itself (A(v, v) = v), on every layer.
        gradsync::reducer<double, gradsync::mpi_communicator, gradsync::adasum, gradsync::recursive_halving> ada(
            comm, layers);
        std::vector<double> v(ada.count());
        for (std::size_t i = 0; i < v.size(); ++i)
            v[i] = 0.25 * double(i % 5) - 0.5;
        const std::vector<double> want = v;
        ada(std::span<double>(v));
        for (std::size_t i = 0; i < v.size(); ++i)
            failures += std::fabs(v[i] - want[i]) > 1e-12;

        // Threads as ranks, in the same program.
        gradsync::local_group group(3);
        group.run([&](gradsync::local_communicator& c) {
            std::vector<double> x(100, double(c.rank()));
            gradsync::allreduce(c, std::span<double>(x));
            if (c.rank() == 0)
                for (double e : x)
                    failures += e != 3.0;
        });
    } catch (const gradsync::error& e) {
        std::fprintf(stderr, "consumer: %s\n", e.what());
        failures += 1;
    }
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
        std::printf("consumer: %s (%d wrong values)\n", total ? "FAILED" : "ok", total);
    MPI_Finalize();
    return total ? 1 : 0;
}
