// train_fashion_mnist: data-parallel training of Horovod's MNIST network on Fashion-MNIST with
// gradsync::data_parallel, in the setting of the Adasum paper's LeNet-5 study, and the two
// parts of that study (--study accuracy, --study schedule). Ranks are threads of this
// process or, built with MPI and started by mpiexec, the MPI processes. Options, outputs and
// results: docs/torch.md, "The Fashion-MNIST example" and "The study".
#include <gradsync/comm/local/local.hpp>
#include <gradsync/core/error.hpp>
#include <gradsync/torch.hpp>

#include "accuracy_study.hpp"
#include "dataset.hpp"
#include "lenet.hpp"
#include "options.hpp"
#include "report.hpp"
#include "schedule_study.hpp"
#include "train.hpp"

#if GRADSYNC_TRAINER_MPI
#include <gradsync/comm/mpi/mpi.hpp>
#endif

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace fashion_mnist;

#if GRADSYNC_TRAINER_MPI
bool under_mpiexec() { return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE"); }
#endif

// One run over o.ranks threads; rank 0's outcome.
outcome run_threads(const images& train_set, const images& test, const options& o)
{
    std::vector<lenet> models;
    for (int r = 0; r < o.ranks; ++r)
        models.push_back(replica(o, std::uint64_t(r)));
    outcome result;
    gradsync::local_group group(o.ranks);
    group.run([&](gradsync::local_communicator& comm) {
        const outcome mine = train_with(comm, models[std::size_t(comm.rank())], train_set, test, o, comm.rank() == 0);
        if (comm.rank() == 0)
            result = mine;
    });
    return result;
}

// Every policy at every rank count and seed, over threads (accuracy_study.hpp).
void accuracy_study(const images& train_set, const images& test, options o)
{
    const gradsync_examples::accuracy_setting setting{o.epochs, o.batch, o.lr, o.seeds, o.rank_counts, o.columns,
                                                      o.out};
    gradsync_examples::accuracy_study(setting, [&](const study_column& column, int ranks, std::uint64_t seed) {
        o.seed = seed, o.ranks = ranks, o.policy = column.policy, o.reduce = column.reduce;
        const outcome r = run_threads(train_set, test, o);
        print_result(o, o.ranks, r);
        return gradsync_examples::run_outcome{r.test_accuracy, r.train_loss, r.seconds};
    });
}

// The scheduling study over this communicator; rank 0 prints the table and writes profile.csv.
template <class Comm>
void schedule_with(Comm& comm, const images& train_set, const options& o)
{
    const std::int64_t n = comm.size(), r = comm.rank(), per_step = o.batch * n;
    const std::int64_t batches = train_set.x.size(0) / per_step;
    if (batches == 0)
        throw gradsync::usage_error("train_fashion_mnist: " + std::to_string(train_set.x.size(0)) +
                                    " images are fewer than one step of " + std::to_string(per_step));
    const torch::Tensor order = torch::randperm(train_set.x.size(0), at::detail::createCPUGenerator(o.seed * 1000));
    const auto batch = [&](int step) {
        const torch::Tensor picked = order.narrow(0, (step % batches) * per_step + r * o.batch, o.batch);
        return std::pair(train_set.x.index_select(0, picked), train_set.y.index_select(0, picked));
    };
    lenet model = replica(o, std::uint64_t(r)), plain = replica(o, std::uint64_t(r));
    const gradsync_examples::schedule_result result =
        gradsync_examples::schedule_study(comm, model, plain, batch, o.schedule);
    if (r == 0)
        print_schedule(o, n, result);
}

} // namespace

int main(int argc, char** argv)
{
    try {
        options o = parse(argc, argv);
        torch::set_num_threads(1);
        const images train_set = load(o.data, "train", o.train_limit), test = load(o.data, "t10k", 0);
#if GRADSYNC_TRAINER_MPI
        if (under_mpiexec()) {
            if (o.study == "accuracy")
                throw gradsync::usage_error("train_fashion_mnist: the accuracy study runs its ranks as threads; "
                                            "start it without mpiexec");
            int provided = 0;
            MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
            {
                gradsync::mpi_communicator comm(MPI_COMM_WORLD);
                if (o.study == "schedule")
                    schedule_with(comm, train_set, o);
                else {
                    lenet model = replica(o, std::uint64_t(comm.rank()));
                    const outcome r = train_with(comm, model, train_set, test, o, comm.rank() == 0);
                    if (comm.rank() == 0)
                        print_result(o, comm.size(), r);
                }
            }
            MPI_Finalize();
            return 0;
        }
#endif
        if (o.study == "accuracy")
            accuracy_study(train_set, test, o);
        else if (o.study == "schedule") {
            gradsync::local_group group(o.ranks);
            group.run([&](gradsync::local_communicator& comm) { schedule_with(comm, train_set, o); });
        } else
            print_result(o, o.ranks, run_threads(train_set, test, o));
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "train_fashion_mnist: %s\n", e.what());
        return 1;
    }
}
