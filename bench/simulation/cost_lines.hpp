// The cost lines' predictions for scale_study.cpp (--predict): alpha and beta fitted to a
// ping-pong on the simulated platform, gamma 0 (the study leaves the arithmetic out), and the
// `cost:` line of each gradsync algorithm (planner/cost_model.hpp) evaluated with them.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include <gradsync/gradsync.hpp>
#include <gradsync/planner/cost_model.hpp>

namespace scale_study {

namespace gp = gradsync::planner;

// Half the round trip of `bytes` between ranks a and b (the others wait), the median of 3.
inline double one_way(std::vector<char>& buffer, std::size_t bytes, int a, int b, int rank, MPI_Comm world)
{
    std::vector<double> t;
    for (int rep = 0; rep < 3; ++rep) {
        MPI_Barrier(world);
        const double start = MPI_Wtime();
        if (rank == a) {
            MPI_Send(buffer.data(), int(bytes), MPI_BYTE, b, 0, world);
            MPI_Recv(buffer.data(), int(bytes), MPI_BYTE, b, 0, world, MPI_STATUS_IGNORE);
        } else if (rank == b) {
            MPI_Recv(buffer.data(), int(bytes), MPI_BYTE, a, 0, world, MPI_STATUS_IGNORE);
            MPI_Send(buffer.data(), int(bytes), MPI_BYTE, a, 0, world);
        }
        t.push_back((MPI_Wtime() - start) / 2);
    }
    std::sort(t.begin(), t.end());
    double median = t[1];
    MPI_Bcast(&median, 1, MPI_DOUBLE, a, world);
    return median;
}

inline gp::link_parameters fitted_link(int a, int b, int rank, MPI_Comm world)
{
    std::vector<char> buffer(std::size_t(16) << 20);
    std::vector<std::pair<double, double>> samples;
    for (std::size_t bytes = 4096; bytes <= buffer.size(); bytes *= 4)
        samples.emplace_back(double(bytes), one_way(buffer, bytes, a, b, rank, world));
    const gp::linear_cost c = gp::fit_linear_cost(samples).cost;
    return {std::max(0.0, c.a), c.b, 0.0};
}

struct links {
    gp::link_parameters across, inside;
    int per_host = 1;
};

inline links measured_links(int rank, int size, MPI_Comm world)
{
    links l;
    MPI_Comm host;
    MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host);
    MPI_Comm_size(host, &l.per_host);
    MPI_Comm_free(&host);
    l.across = size > 1 ? fitted_link(0, size / 2, rank, world) : gp::link_parameters{};
    l.inside = l.per_host > 1 ? fitted_link(0, 1, rank, world) : l.across;
    return l;
}

// The cost line's time for a gradsync side, or a negative number where there is none
// (hierarchical Adasum, whose line is adasum_recursive_halving's on the block).
inline double predicted(const links& l, const std::string& side, const std::string& policy, std::size_t bytes, int n)
{
    const bool adasum = policy == "adasum";
    std::string algorithm = side;
    if (side == "automatic")
        switch (gradsync::automatic{}.choose(bytes, bytes / sizeof(float), n, l.per_host)) {
        case gradsync::recursive_doubling::code: algorithm = "recursive_doubling"; break;
        case gradsync::recursive_halving::code: algorithm = "recursive_halving"; break;
        default: algorithm = "ring";
        }
    const double m = double(bytes);
    if (algorithm == "ring")
        return (adasum ? gp::ring_adasum_cost(l.across, n, 1) : gp::ring_cost(l.across, n))(m);
    if (algorithm == "recursive_halving")
        return (adasum ? gp::recursive_halving_adasum_cost(l.across, n, 1) : gp::recursive_halving_cost(l.across, n))(m);
    if (algorithm == "recursive_doubling")
        return (adasum ? gp::recursive_doubling_adasum_cost(l.across, n) : gp::recursive_doubling_cost(l.across, n))(m);
    if (algorithm == "hierarchical" && !adasum && n % l.per_host == 0)
        return gp::hierarchical_cost(l.inside, l.across, n, l.per_host)(m);
    return -1;
}

} // namespace scale_study
