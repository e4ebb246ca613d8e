// train_demo: data-parallel training of a multi-layer perceptron with gradsync, in two
// studies (docs/trainer.md):
//   adasum    Adasum against Sum at 1, 8, 16 and 32 ranks, with the learning-rate schedule
//             tuned for one rank: final test accuracy of each;
//   schedule  the iteration time of five merge plans (WFBP, one group, 25 MiB buckets,
//             MG-WFBP, optimal) over an emulated slow network, measured beside the
//             planner's prediction from the measured profile and the calibrated link;
//             writes the profile CSV and the timeline SVG of the optimal plan.
// Ranks are threads of this process (local_group). Built with MPI and started by mpiexec,
// the ranks are the MPI processes instead and both studies run at the world size.
#include <gradsync/comm/local/local.hpp>
#include <gradsync/core/error.hpp>
#include <gradsync/planner/profile_csv.hpp>
#include <gradsync/planner/svg.hpp>
#include <gradsync/planner/timeline.hpp>
#include <gradsync/policy/adasum.hpp>
#include <gradsync/policy/sum.hpp>

#include "trainer/adasum_study.hpp"
#include "trainer/dataset.hpp"
#include "trainer/options.hpp"
#include "trainer/report.hpp"
#include "trainer/schedule_study.hpp"
#include "trainer/self_check.hpp"
#include "trainer/train.hpp"

#if GRADSYNC_TRAINER_MPI
#include <gradsync/comm/mpi/mpi.hpp>
#endif

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace {

using trainer::fixed;
using trainer::percent;

// Runs f(communicator) on every rank; returns rank 0's result. Under mpiexec this process is
// one rank of the world; otherwise `threads` ranks run as threads here.
class ranks_runner {
public:
    explicit ranks_runner(bool mpi = false, int rank = 0) : mpi_(mpi), rank_(rank) {}

    bool mpi() const noexcept { return mpi_; }
    bool printing() const noexcept { return rank_ == 0; }

    int world() const
    {
#if GRADSYNC_TRAINER_MPI
        if (mpi_) {
            int n = 0;
            MPI_Comm_size(MPI_COMM_WORLD, &n);
            return n;
        }
#endif
        return 1;
    }

    template <class F>
    auto run(int threads, F&& f)
    {
        return run_with(threads, std::forward<F>(f), false);
    }

    // For a communicator that delay_communicator wraps: over MPI no message is cut to the
    // eager limit, since on the emulated link every message pays the latency.
    template <class F>
    auto run_on_link(int threads, F&& f)
    {
        return run_with(threads, std::forward<F>(f), true);
    }

private:
    template <class F>
    auto run_with(int threads, F&& f, [[maybe_unused]] bool whole_messages)
    {
#if GRADSYNC_TRAINER_MPI
        if (mpi_) {
            gradsync::mpi_options options;
            if (whole_messages)
                options.eager_limit = std::numeric_limits<std::size_t>::max();
            gradsync::mpi_communicator comm(MPI_COMM_WORLD, options);
            return f(comm);
        }
#endif
        std::optional<decltype(f(std::declval<gradsync::local_communicator&>()))> first;
        gradsync::local_group group(threads);
        group.run([&](gradsync::local_communicator& comm) {
            auto r = f(comm);
            if (comm.rank() == 0)
                first = std::move(r);
        });
        return std::move(*first);
    }

    bool mpi_;
    int rank_;
};

const trainer::method_result& find_method(const trainer::schedule_result& r, const std::string& name)
{
    for (const auto& m : r.methods)
        if (m.method == name)
            return m;
    throw gradsync::error("train_demo: the schedule study has no result for " + name);
}

struct adasum_row {
    int ranks = 0;
    trainer::run_summary sum, adasum;
};

std::string accuracy_cell(const trainer::run_summary& s)
{
    return s.diverged ? percent(s.accuracy) + " (diverged)" : percent(s.accuracy);
}

std::vector<adasum_row> adasum_study(ranks_runner& runner, const trainer::task& data, const trainer::demo_options& o)
{
    std::vector<int> counts = o.ranks;
    if (runner.mpi())
        counts = {runner.world()};
    std::vector<adasum_row> rows;
    for (int n : counts) {
        adasum_row row{n, {}, {}};
        const std::string tag = std::to_string(n) + (n == 1 ? " rank" : " ranks");
        row.sum = runner.run(n, [&](auto& comm) {
            return trainer::train_and_report<gradsync::sum>(comm, data.train, data.test, "test", o.train,
                                                            (n == 1 ? "sum = adasum, " : "sum, ") + tag);
        });
        row.adasum = n == 1 ? row.sum : runner.run(n, [&](auto& comm) {
            return trainer::train_and_report<gradsync::adasum>(comm, data.train, data.test, "test", o.train,
                                                               "adasum, " + tag);
        });
        rows.push_back(row);
    }
    return rows;
}

void print_adasum_table(const std::vector<adasum_row>& rows, const trainer::demo_options& o)
{
    std::printf("\nAdasum vs Sum: final test accuracy after %zu epochs; every run uses the one-rank schedule\n"
                "(lr %.3g, cosine over the run, momentum %.2g, %zu samples per rank and step)\n\n",
                o.train.epochs, o.train.sgd.learning_rate, o.train.sgd.momentum, o.train.local_batch);
    trainer::table t({"ranks", "global batch", "Sum", "Adasum"});
    const trainer::run_summary* one = nullptr;
    for (const adasum_row& r : rows) {
        t.add({std::to_string(r.ranks), std::to_string(std::size_t(r.ranks) * o.train.local_batch),
               accuracy_cell(r.sum), accuracy_cell(r.adasum)});
        if (r.ranks == 1)
            one = &r.sum;
    }
    t.print(stdout);
    for (const adasum_row& r : rows) {
        if (r.ranks == 1)
            continue;
        std::printf("%d ranks: Adasum %s Sum by %.2f points", r.ranks,
                    r.adasum.accuracy >= r.sum.accuracy ? "leads" : "trails",
                    100.0 * std::abs(r.adasum.accuracy - r.sum.accuracy));
        if (one)
            std::printf("; Adasum is %.2f points %s the one-rank run",
                        100.0 * std::abs(r.adasum.accuracy - one->accuracy),
                        r.adasum.accuracy >= one->accuracy ? "above" : "below");
        std::printf("\n");
    }
}

void lr_study(ranks_runner& runner, const trainer::task& data, const trainer::demo_options& o)
{
    if (runner.mpi())
        throw gradsync::usage_error("train_demo: the lr study trains on one rank; start it without mpiexec");
    std::vector<std::pair<double, trainer::run_summary>> rows;
    for (double lr : o.lr_grid) {
        trainer::train_options t = o.train;
        t.sgd.learning_rate = lr;
        rows.emplace_back(lr, runner.run(1, [&](auto& comm) {
            return trainer::train_and_report<gradsync::sum>(comm, data.train, data.validation, "validation", t,
                                                            "lr " + fixed(lr, 4) + ", 1 rank");
        }));
    }
    std::printf("\nOne-rank learning rates: validation accuracy after %zu epochs\n\n", o.train.epochs);
    trainer::table t({"lr", "validation accuracy", "train loss"});
    for (const auto& [lr, s] : rows)
        t.add({fixed(lr, 4), accuracy_cell(s), fixed(s.loss, 4)});
    t.print(stdout);
}

void print_schedule_table(const trainer::schedule_result& r, const trainer::demo_options& o, int ranks)
{
    const auto ms = [](double s) { return fixed(1e3 * s, 2); };
    std::printf("\nCommunication scheduling: %d ranks over an emulated link, alpha %s ms per message, beta %s ns per "
                "byte;\n",
                ranks, fixed(1e3 * o.schedule.link.alpha, 3).c_str(), fixed(1e9 * o.schedule.link.beta, 2).c_str());
    std::printf("%zu samples per rank and step%s.\n", o.schedule.local_batch,
                r.separate_cores ? ", communication threads on a core of their own" : "");
    std::printf("measured: median over %zu steps (%zu rounds, the plans taking turns) from the start of backward to "
                "the end\nof the last allreduce, when wait() returns; wake-up: median time until the trainer thread "
                "got a core back\nafter that, not counted (docs/trainer.md)\n\n",
                o.schedule.rounds * o.schedule.steps_per_round, o.schedule.rounds);
    trainer::table t({"method", "groups", "predicted ms", "measured ms", "measured/predicted", "wake-up ms"});
    for (const trainer::method_result& m : r.methods)
        t.add({m.method, std::to_string(m.groups.size()), ms(m.predicted_s), ms(m.measured_s),
               fixed(m.measured_s / m.predicted_s, 3), ms(m.wake_s)});
    t.print(stdout);
    double backward = 0;
    for (const auto& l : r.profile)
        backward += l.backward_s;
    std::printf("\nbackward %s ms; calibrated T(M) = %s ms + %s ns/byte x M (rms residual %s ms);\n"
                "the link alone gives T(M) = %s ms + %s ns/byte x M\n",
                ms(backward).c_str(), ms(r.fit.cost.a).c_str(), fixed(1e9 * r.fit.cost.b, 2).c_str(),
                fixed(1e3 * r.fit.residual_rms_s, 3).c_str(), ms(r.nominal.a).c_str(),
                fixed(1e9 * r.nominal.b, 2).c_str());
    const auto find = [&](const char* name) -> const trainer::method_result& { return find_method(r, name); };
    const auto& best = find("optimal");
    double worst = 0;
    for (const auto& m : r.methods)
        worst = std::max(worst, std::abs(m.measured_s / m.predicted_s - 1));
    std::printf("measured speed of the optimal plan: %.2fx WFBP's, %.2fx MG-WFBP's; largest measured/predicted "
                "gap %.1f %%\n",
                find("WFBP").measured_s / best.measured_s, find("MG-WFBP").measured_s / best.measured_s,
                100.0 * worst);
}

// Creates the output folder before any work, so that a bad --out fails at once.
void prepare_output(const std::filesystem::path& out)
{
    std::error_code ec;
    std::filesystem::create_directories(out, ec);
    if (ec || !std::filesystem::is_directory(out))
        throw gradsync::usage_error("train_demo: --out '" + out.string() + "': cannot create the folder" +
                                    (ec ? " (" + ec.message() + ")" : std::string()));
}

void write_outputs(const trainer::schedule_result& r, const std::filesystem::path& out, int ranks)
{
    namespace planner = gradsync::planner;
    {
        std::ofstream csv(out / "profile.csv");
        planner::write_profile_csv(csv, r.profile);
        if (!csv)
            throw gradsync::error("train_demo: could not write " + (out / "profile.csv").string());
    }
    const trainer::method_result& best = find_method(r, "optimal");
    const planner::timeline t = planner::simulate(r.profile, best.groups, r.planned);
    std::ofstream svg(out / "timeline.svg");
    planner::write_timeline_svg(svg, r.profile, best.groups, t,
                                "train_demo: " + best.method + " plan, " + std::to_string(ranks) +
                                    " ranks, measured " + fixed(1e3 * best.measured_s, 2) + " ms");
    if (!svg)
        throw gradsync::error("train_demo: could not write " + (out / "timeline.svg").string());
}

int run(int argc, char** argv, ranks_runner& runner)
{
    const trainer::demo_options o = trainer::parse_demo_options(argc, argv);
    if (o.help) {
        if (runner.printing())
            std::printf("%s", trainer::demo_usage);
        return 0;
    }
    if (o.self_check) {
        if (runner.mpi())
            throw gradsync::usage_error("train_demo: --self-check runs its ranks as threads; start it without mpiexec");
        std::printf("train_demo self-check\n");
        return trainer::self_check(o.task) ? 0 : 1;
    }

    const trainer::task data = trainer::make_task(o.task);
    const trainer::mlp shape(o.train.widths, o.train.init_seed);
    if (runner.printing()) {
        std::printf("train_demo: %zu-class teacher task, %zu inputs, %zu training samples (%.0f %% label noise), "
                    "%zu test\n",
                    o.task.classes, o.task.inputs, data.train.size(), 100 * o.task.label_noise, data.test.size());
        std::printf("model: %zu dense layers, widths", shape.dense_layers());
        for (std::size_t w : shape.widths())
            std::printf(" %zu", w);
        std::printf(", %zu parameters in %zu layers (weights and biases)%s\n\n", shape.parameter_count(),
                    shape.layer_sizes().size(), runner.mpi() ? ", ranks are MPI processes" : ", ranks are threads");
        std::fflush(stdout);
    }

    if (o.study == "lr") {
        lr_study(runner, data, o);
        return 0;
    }
    const bool scheduling = o.study == "all" || o.study == "schedule";
    if (scheduling && runner.printing())
        prepare_output(o.out);
    std::vector<adasum_row> adasum;
    if (o.study == "all" || o.study == "adasum")
        adasum = adasum_study(runner, data, o);

    std::optional<trainer::schedule_result> schedule;
    const int schedule_ranks = runner.mpi() ? runner.world() : o.schedule_ranks;
    if (scheduling) {
        if (runner.printing())
            std::printf("\nschedule study: %d ranks over the emulated link; profiling, calibrating, then each plan\n",
                        schedule_ranks);
        const bool print = runner.printing();
        schedule = runner.run_on_link(schedule_ranks, [&](auto& comm) {
            return trainer::schedule_study(comm, data.train, o.train, o.schedule, [&](const trainer::method_result& m) {
                if (print && comm.rank() == 0)
                    std::printf("  %-15s %2zu groups  predicted %8.2f ms  measured %8.2f ms\n", m.method.c_str(),
                                m.groups.size(), 1e3 * m.predicted_s, 1e3 * m.measured_s);
                std::fflush(stdout);
            });
        });
    }

    if (!runner.printing())
        return 0;
    std::printf("\n==== results ====\n");
    if (!adasum.empty())
        print_adasum_table(adasum, o);
    if (schedule) {
        print_schedule_table(*schedule, o, schedule_ranks);
        write_outputs(*schedule, o.out, schedule_ranks);
        std::printf("\nwrote %s and %s\n", (std::filesystem::path(o.out) / "profile.csv").string().c_str(),
                    (std::filesystem::path(o.out) / "timeline.svg").string().c_str());
    }
    return 0;
}

} // namespace

int main(int argc, char** argv)
{
#if GRADSYNC_TRAINER_MPI
    // Started by mpiexec (Open MPI, MPICH or any PMIx launcher): the ranks are processes.
    const bool mpi = std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") || std::getenv("PMIX_RANK");
    int rank = 0;
    if (mpi) {
        int provided = 0;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        if (provided < MPI_THREAD_MULTIPLE) {
            if (rank == 0)
                std::fprintf(stderr, "train_demo: the MPI library does not provide MPI_THREAD_MULTIPLE, which the "
                                     "synchronizer's communication thread needs\n");
            MPI_Finalize();
            return 2;
        }
    }
    ranks_runner runner(mpi, rank);
#else
    ranks_runner runner;
#endif
    int status = 0;
    try {
        status = run(argc, argv, runner);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
#if GRADSYNC_TRAINER_MPI
        // The other ranks may be waiting in a collective for this one.
        if (mpi)
            MPI_Abort(MPI_COMM_WORLD, 2);
#endif
        return 2;
    }
#if GRADSYNC_TRAINER_MPI
    if (mpi)
        MPI_Finalize();
#endif
    return status;
}
