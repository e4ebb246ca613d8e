// The scale study's program (scripts/scale_study.sh, docs/results_scale.md), built with
// SimGrid's smpicxx and started by smpirun on a simulated platform. For each size it times,
// on simulated time (MPI_Wtime), every side asked for: gradsync's reducers (ring,
// recursive_halving, recursive_doubling, hierarchical, automatic; Sum or Adasum over float;
// and tuned, Sum only, which measures its candidates on simulated time) and SMPI's own
// allreduce algorithms and selectors over MPI_FLOAT and MPI_SUM, called by their names in
// one run. Each side runs once untimed (tuned: through its tuning), then `reps` times timed between
// barriers; its time is the slowest rank's, the median over reps (simulated time repeats
// exactly unless the platform is shared). One CSV line per (size, side) on rank 0:
//   ranks,bytes,policy,side,seconds,exact,predicted
// --cut: how gradsync cuts its messages. "transport" (the default): as for Open MPI's shared
// memory (mpi_options' eager limit of 4000 bytes: blocks of up to 16 eager messages go as
// eager pieces; exchange_combine's 256 KiB segments). "whole": every block one message, as
// SMPI's algorithms send them, so that the same algorithm sends the same messages.
// --segment B, --window W: exchange_combine's segment size and segments in flight
// (pipeline_options; 262144 and 2 by default).
// predicted: with --predict, the `cost:` line of the gradsync algorithm (planner/cost_model.hpp;
// automatic: the one it chose), with gamma = 0 (the arithmetic is left out) and alpha, beta
// fitted to a ping-pong (half the round trip) of 4 KiB to 16 MiB between rank 0 and rank N/2,
// across hosts; hierarchical's link inside a host from ranks 0 and 1 where they share one.
// exact: with --check, whether every rank's result equals the exact sum (integer-valued
// floats, so every order of additions gives it) for Sum, or equals rank 0's bits for Adasum;
// "-" without --check, where every rank's data and large scratch share one block of simulated
// memory (SMPI's shared malloc), so that 1 024 ranks of 64 MiB fit, and results are garbage.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <gradsync/comm/mpi/mpi.hpp>
#include <gradsync/gradsync.hpp>

#include "cost_lines.hpp"
#include "shared_memory_hook.hpp"
#include "smpi_allreduce.hpp"

static_assert(gradsync::detail::simulated_mpi, "scale_study is built with SimGrid's smpicxx");

namespace {

using namespace scale_study;

const char* const gradsync_sides[] = {"ring", "recursive_halving", "recursive_doubling", "hierarchical",
                                      "automatic", "tuned"};

// tuned measures its candidates (at most 7) over its first rounds * candidates calls.
constexpr int tuned_rounds = 7;
constexpr int tuned_warmup_calls = tuned_rounds * 7;

struct options {
    std::vector<std::size_t> sizes;
    std::vector<std::string> sides;
    std::string policy = "sum";
    int reps = 3;
    bool check = false;
    bool whole = false; // --cut whole
    gradsync::pipeline_options pipeline{}; // --segment, --window: exchange_combine's segments
    bool predict = false;
};

[[noreturn]] void usage(const std::string& why)
{
    std::fprintf(stderr,
                 "scale_study: %s\nusage: scale_study --sizes B[,B...] [--sides NAME[,NAME...]] "
                 "[--policy sum|adasum] [--reps R] [--check] [--cut transport|whole] [--segment B] [--window W] "
                 "[--predict]\nsides: gradsync's",
                 why.c_str());
    for (const char* s : gradsync_sides)
        std::fprintf(stderr, " %s", s);
    std::fprintf(stderr, "; SMPI's");
    for (const smpi_side& s : smpi_sides)
        std::fprintf(stderr, " %s", s.name);
    std::fprintf(stderr, " (SMPI's run Sum only)\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
    std::abort();
}

std::vector<std::string> split(const std::string& text)
{
    std::vector<std::string> out;
    std::size_t from = 0;
    while (from <= text.size()) {
        const std::size_t comma = std::min(text.find(',', from), text.size());
        if (comma > from)
            out.push_back(text.substr(from, comma - from));
        from = comma + 1;
    }
    return out;
}

options parse(int argc, char** argv)
{
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc)
                usage(a + " needs a value");
            return argv[++i];
        };
        if (a == "--sizes") {
            for (const std::string& s : split(value())) {
                char* end = nullptr;
                const unsigned long bytes = std::strtoul(s.c_str(), &end, 10);
                if (*end || bytes == 0 || bytes % sizeof(float))
                    usage("size '" + s + "' is not a positive multiple of 4 bytes");
                o.sizes.push_back(bytes);
            }
        } else if (a == "--sides") {
            o.sides = split(value());
        } else if (a == "--policy") {
            o.policy = value();
            if (o.policy != "sum" && o.policy != "adasum")
                usage("policy '" + o.policy + "' is not sum or adasum");
        } else if (a == "--reps") {
            o.reps = std::atoi(value().c_str());
            if (o.reps < 1)
                usage("--reps must be at least 1");
        } else if (a == "--cut") {
            const std::string cut = value();
            if (cut != "transport" && cut != "whole")
                usage("cut '" + cut + "' is not transport or whole");
            o.whole = cut == "whole";
        } else if (a == "--segment" || a == "--window") {
            const std::string v = value();
            char* end = nullptr;
            const unsigned long k = std::strtoul(v.c_str(), &end, 10);
            if (*end || k == 0)
                usage(a + " '" + v + "' is not a positive number");
            if (a == "--segment")
                o.pipeline.segment_bytes = k;
            else
                o.pipeline.window = int(k);
        } else if (a == "--predict") {
            o.predict = true;
        } else if (a == "--check") {
            o.check = true;
        } else {
            usage("unknown argument '" + a + "'");
        }
    }
    if (o.sizes.empty())
        usage("no --sizes");
    if (o.sides.empty()) {
        for (const char* s : gradsync_sides)
            if (o.policy == "sum" || std::string(s) != "tuned")
                o.sides.emplace_back(s);
        if (o.policy == "sum")
            for (const smpi_side& s : smpi_sides)
                o.sides.emplace_back(s.name);
    }
    return o;
}

bool is_gradsync(const std::string& name)
{
    return std::find_if(std::begin(gradsync_sides), std::end(gradsync_sides),
                        [&](const char* s) { return name == s; }) != std::end(gradsync_sides);
}

// One side's call on `data`, made ready (reducer planned) for this size.
using call = std::function<void(std::span<float>)>;

constexpr std::size_t never = std::size_t(1) << 60; // a cut no message reaches

template <class Policy>
call gradsync_call(gradsync::mpi_communicator& comm, const options& o, const std::string& side, std::size_t count)
{
    using C = gradsync::mpi_communicator;
    gradsync::reducer_options cut{.pipeline = o.pipeline};
    if (o.whole)
        cut.pipeline.segment_bytes = never;
    auto made = [&](auto algorithm) -> call {
        using A = decltype(algorithm);
        auto r = std::make_shared<gradsync::reducer<float, C, Policy, A>>(comm, count, algorithm, cut);
        return [r](std::span<float> d) { (*r)(d); };
    };
    if (side == "ring")
        return made(gradsync::ring{});
    if (side == "recursive_halving")
        return made(gradsync::recursive_halving{});
    if (side == "recursive_doubling")
        return made(gradsync::recursive_doubling{});
    if (side == "hierarchical")
        return made(gradsync::hierarchical{});
    if constexpr (gradsync::has_plan<float, C, gradsync::tuned, Policy>)
        if (side == "tuned")
            return made(gradsync::tuned{.rounds = tuned_rounds});
    return made(gradsync::automatic{});
}

call make_call(gradsync::mpi_communicator& comm, const options& o, const std::string& side, std::size_t count)
{
    if (const smpi_side* s = find_smpi(side)) {
        MV2_Allreducection = nullptr; // as in a simulation of this side alone
        MV2_Allreduce_intra_function = nullptr;
        // SMPI's algorithms take no MPI_IN_PLACE (MPI_Allreduce copies for them), so neither
        // do they here: the copy is arithmetic, which the study leaves out for both sides.
        auto input = std::make_shared<std::vector<float>>(count);
        return [s, &comm, input](std::span<float> d) {
            std::copy(d.begin(), d.end(), input->begin());
            if (s->run(input->data(), d.data(), int(d.size()), MPI_FLOAT, MPI_SUM, comm.native()) != MPI_SUCCESS)
                throw gradsync::communication_error(std::string("SMPI's allreduce__") + s->name + " failed");
        };
    }
    if (o.policy == "adasum")
        return gradsync_call<gradsync::adasum>(comm, o, side, count);
    return gradsync_call<gradsync::sum>(comm, o, side, count);
}

// Rank r's input: integer values below 8, so that every sum of up to 2^21 ranks is exact.
void fill(std::span<float> d, int rank)
{
    for (std::size_t i = 0; i < d.size(); ++i)
        d[i] = float((std::size_t(rank) * 3 + i) % 8) - 3.0f;
}

bool exact(std::span<const float> d, const options& o, int size, MPI_Comm world)
{
    bool ok = true;
    if (o.policy == "sum") {
        for (std::size_t i = 0; i < d.size() && ok; ++i) {
            double want = 0;
            for (int r = 0; r < size; ++r)
                want += double((std::size_t(r) * 3 + i) % 8) - 3.0;
            ok = double(d[i]) == want;
        }
    } else {
        std::vector<float> first(d.begin(), d.end());
        MPI_Bcast(first.data(), int(first.size()), MPI_FLOAT, 0, world);
        ok = std::memcmp(first.data(), d.data(), d.size_bytes()) == 0;
    }
    int mine = ok ? 1 : 0, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, world);
    return all == 1;
}

double timed(const call& run, std::span<float> d, MPI_Comm world)
{
    MPI_Barrier(world);
    const double start = MPI_Wtime();
    run(d);
    double mine = MPI_Wtime() - start, slowest = 0;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, world);
    return slowest;
}

} // namespace

int main(int argc, char** argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const options o = parse(argc, argv);
    for (const std::string& side : o.sides)
        if (!is_gradsync(side) && !find_smpi(side))
            usage("unknown side '" + side + "'");
        else if (o.policy == "adasum" && !is_gradsync(side))
            usage("side '" + side + "' is SMPI's, which has no Adasum");
        else if (o.policy == "adasum" && side == "tuned")
            usage("tuned measures elementwise policies only, not Adasum");
    simulation::share_large_allocations(!o.check);
    int status = 0;
    try {
        gradsync::mpi_options transport;
        if (o.whole)
            transport.eager_limit = never;
        gradsync::mpi_communicator comm(MPI_COMM_WORLD, transport);
        const links measured = o.predict ? measured_links(rank, size, MPI_COMM_WORLD) : links{};
        if (rank == 0)
            std::printf("ranks,bytes,policy,side,seconds,exact,predicted\n");
        for (const std::size_t bytes : o.sizes) {
            const std::size_t count = bytes / sizeof(float);
            float* data = o.check ? static_cast<float*>(std::malloc(bytes))
                                  : static_cast<float*>(SMPI_SHARED_MALLOC(bytes));
            const std::span<float> d(data, count);
            for (const std::string& side : o.sides) {
                const call run = make_call(comm, o, side, count);
                for (int warm = side == "tuned" ? tuned_warmup_calls : 1; warm > 0; --warm) {
                    fill(d, rank);
                    run(d); // untimed: the first call of a plan, and tuned's tuning
                }
                const bool ok = !o.check || exact(d, o, size, MPI_COMM_WORLD);
                std::vector<double> times;
                for (int r = 0; r < o.reps; ++r)
                    times.push_back(timed(run, d, MPI_COMM_WORLD));
                std::sort(times.begin(), times.end());
                const double line = o.predict && is_gradsync(side) ? predicted(measured, side, o.policy, bytes, size) : -1;
                if (rank == 0) {
                    std::printf("%d,%zu,%s,%s,%.9g,%s,", size, bytes, o.policy.c_str(), side.c_str(),
                                times[times.size() / 2], o.check ? (ok ? "yes" : "NO") : "-");
                    if (line >= 0)
                        std::printf("%.9g", line);
                    std::printf("\n");
                }
                std::fflush(stdout);
                if (o.check && !ok)
                    status = 1;
            }
            if (o.check)
                std::free(data);
            else
                SMPI_SHARED_FREE(data);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "scale_study (rank %d of %d): %s\n", rank, size, e.what());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Finalize();
    return status;
}
