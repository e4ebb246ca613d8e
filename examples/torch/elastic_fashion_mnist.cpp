// elastic_fashion_mnist: the Fashion-MNIST example's network and schedule, trained by
// processes that may die or arrive while it runs (gradsync::elastic_run over an elastic_group
// in a Redis store). Start one process per rank, on any host that reaches the server and the
// others; start another at any time and it enters at the next step. docs/elastic.md,
// "Training", is its manual.
//
//   GRADSYNC_REDIS_PASSWORD=... elastic_fashion_mnist --store HOST:PORT --address ADDRESS
//       [--prefix P] [--min-ranks N] [--start-ranks N] [--epochs E] [--batch B]
//       [--train-limit IMAGES] [--seed S] [--lease-ms MS] [--deadline-ms MS]
//       [--formation-timeout-ms MS] [--data DIR] [--fail-at-step K]
//       [--checkpoint FILE --checkpoint-step K] [--resume FILE]
//
// Prints a line when it joins, each time the loop restarts and at the end of each epoch (rank
// 0), with the monotonic clock's time (the same on every process of a host); at the end its
// result: the generation, ranks, test accuracy and a hash of the parameters (equal on every rank).
// A run is repeatable: the data order and dropout's masks follow from the seed and the position
// (epoch, step, rank), so a run that resumes from a checkpoint (rank 0 writes the commit made
// once K steps are done to FILE; --resume starts every process from it) trains as the run that
// wrote it would have gone on with the same number of ranks, bit for bit.
#include <gradsync/comm/gloo/redis_store.hpp>
#include <gradsync/core/error.hpp>
#include <gradsync/elastic/group.hpp>
#include <gradsync/torch.hpp>
#include <gradsync/torch/elastic.hpp>

#include "dataset.hpp"
#include "lenet.hpp"
#include "train.hpp"

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <string_view>
#include <thread>

namespace {

struct run_options {
    std::string store_host;
    int store_port = 0;
    std::string address;
    std::string prefix = "fashion_mnist";
    int min_ranks = 1;
    int start_ranks = 1; // members to wait for before the first step
    int epochs = 2;
    int batch = 32;
    std::uint64_t seed = 1;
    std::size_t train_limit = 0;
    long lease_ms = 3000;
    long deadline_ms = 3000;
    long formation_timeout_ms = 60000;
    long fail_at_step = -1; // a fault drill: SIGKILL itself in the middle of that step's backward
    std::filesystem::path checkpoint; // rank 0 writes the commit there once checkpoint_step steps are done
    long checkpoint_step = -1;
    std::filesystem::path resume;
    std::filesystem::path data = "/usr/share/datasets/fashion-mnist";
};

constexpr const char* usage =
    "usage: elastic_fashion_mnist --store HOST:PORT --address ADDRESS [--prefix P] [--min-ranks N]\n"
    "           [--start-ranks N] [--epochs E] [--batch B] [--train-limit IMAGES] [--seed S]\n"
    "           [--lease-ms MS] [--deadline-ms MS] [--formation-timeout-ms MS] [--data DIR]\n"
    "           [--fail-at-step K]\n"
    "           [--checkpoint FILE --checkpoint-step K] [--resume FILE]\n"
    "the store's password, if it has one: GRADSYNC_REDIS_PASSWORD\n";

[[noreturn]] void refuse(const std::string& what)
{
    std::fprintf(stderr, "elastic_fashion_mnist: %s\n%s", what.c_str(), usage);
    std::exit(2);
}

long whole(std::string_view flag, const char* text, long least)
{
    char* end = nullptr;
    const long v = std::strtol(text, &end, 10);
    if (end == text || *end || v < least)
        refuse(std::string(flag) + " takes a whole number of at least " + std::to_string(least) + ", got '" + text + "'");
    return v;
}

run_options parse_options(int argc, char** argv)
{
    run_options o;
    for (int i = 1; i < argc; i += 2) {
        const std::string_view flag = argv[i];
        if (i + 1 >= argc)
            refuse(std::string(flag) + " needs a value");
        const char* v = argv[i + 1];
        if (flag == "--store") {
            const std::string_view s = v;
            const std::size_t colon = s.rfind(':');
            if (colon == std::string_view::npos || colon == 0)
                refuse("--store takes HOST:PORT, got '" + std::string(s) + "'");
            o.store_host = s.substr(0, colon);
            o.store_port = int(whole(flag, v + colon + 1, 1));
        } else if (flag == "--address")
            o.address = v;
        else if (flag == "--prefix")
            o.prefix = v;
        else if (flag == "--min-ranks")
            o.min_ranks = int(whole(flag, v, 1));
        else if (flag == "--start-ranks")
            o.start_ranks = int(whole(flag, v, 1));
        else if (flag == "--epochs")
            o.epochs = int(whole(flag, v, 1));
        else if (flag == "--batch")
            o.batch = int(whole(flag, v, 1));
        else if (flag == "--train-limit")
            o.train_limit = std::size_t(whole(flag, v, 1));
        else if (flag == "--seed")
            o.seed = std::uint64_t(whole(flag, v, 0));
        else if (flag == "--lease-ms")
            o.lease_ms = whole(flag, v, 1);
        else if (flag == "--deadline-ms")
            o.deadline_ms = whole(flag, v, 1);
        else if (flag == "--formation-timeout-ms")
            o.formation_timeout_ms = whole(flag, v, 1);
        else if (flag == "--data")
            o.data = v;
        else if (flag == "--fail-at-step")
            o.fail_at_step = whole(flag, v, 0);
        else if (flag == "--checkpoint")
            o.checkpoint = v;
        else if (flag == "--checkpoint-step")
            o.checkpoint_step = whole(flag, v, 0);
        else if (flag == "--resume")
            o.resume = v;
        else
            refuse("unknown option " + std::string(flag));
    }
    if (o.store_host.empty() || o.address.empty())
        refuse("--store and --address are required");
    if (o.checkpoint.empty() != (o.checkpoint_step < 0))
        refuse("--checkpoint and --checkpoint-step go together");
    return o;
}

// The checkpoint: the module (parameters and buffers), the optimizer's state and the position,
// in libtorch's archive.
void write_checkpoint(const std::filesystem::path& file, gradsync_examples::lenet& model, torch::optim::Optimizer& optimizer,
                      const gradsync::elastic_position& at)
{
    torch::serialize::OutputArchive archive, optimizer_state;
    model->save(archive);
    optimizer.save(optimizer_state);
    archive.write("optimizer", optimizer_state);
    archive.write("position", torch::tensor({at.epoch, at.sample, at.step}, torch::kInt64));
    archive.save_to(file.string());
}

gradsync::elastic_position read_checkpoint(const std::filesystem::path& file, gradsync_examples::lenet& model,
                                           torch::optim::Optimizer& optimizer)
{
    torch::serialize::InputArchive archive, optimizer_state;
    archive.load_from(file.string());
    model->load(archive);
    archive.read("optimizer", optimizer_state);
    optimizer.load(optimizer_state);
    torch::Tensor position;
    archive.read("position", position);
    const auto at = position.accessor<std::int64_t, 1>();
    return {at[0], at[1], at[2]};
}

// Seconds on the monotonic clock, which every process of a host shares: lines of different
// processes compare.
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

} // namespace

int main(int argc, char** argv)
{
    try {
        const run_options o = parse_options(argc, argv);
        torch::set_num_threads(1);
        const fashion_mnist::images train_set = fashion_mnist::load(o.data, "train", o.train_limit),
                                    test = fashion_mnist::load(o.data, "t10k", 0);
        const std::int64_t samples = train_set.x.size(0);

        const char* password = std::getenv("GRADSYNC_REDIS_PASSWORD");
        gradsync::redis_store store({.host = o.store_host, .port = o.store_port, .password = password ? password : ""});
        gradsync::elastic_options group_options{.prefix = o.prefix, .min_ranks = o.min_ranks};
        group_options.lease = std::chrono::milliseconds(o.lease_ms);
        group_options.formation_timeout = std::chrono::milliseconds(o.formation_timeout_ms);
        group_options.connect.hostname = o.address;
        group_options.communicator.deadline = std::chrono::milliseconds(o.deadline_ms);
        gradsync::elastic_group group(store, group_options);
        std::printf("joined: generation %llu, rank %d of %d, t=%.6f\n",
                    static_cast<unsigned long long>(group.generation()), group.rank(), group.size(), now());
        std::fflush(stdout);

        // Every process builds the same start; a newcomer's is replaced by rank 0's state.
        torch::manual_seed(o.seed);
        gradsync_examples::lenet model(o.seed);
        torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0).momentum(0.9));
        gradsync::elastic_state state(group, *model, sgd,
                                      o.resume.empty() ? gradsync::elastic_position{} : read_checkpoint(o.resume, model, sgd));
        gradsync::elastic_position& at = state.position;
        const std::int64_t first_step = at.step;
        if (o.fail_at_step >= 0)
            model->fc1->weight.register_hook([&](const torch::Tensor& g) {
                if (at.step == o.fail_at_step) {
                    std::printf("fault drill: SIGKILL in step %ld's backward, t=%.6f\n", o.fail_at_step, now());
                    std::fflush(stdout);
                    std::raise(SIGKILL);
                }
                return g;
            });

        gradsync::elastic_run(state, [&](gradsync::gloo_communicator& comm) {
            const bool restarted = !state.restarted_after().empty();
            if (restarted)
                std::printf("restarted: generation %llu, rank %d of %d, at epoch %lld sample %lld, after: %s\n",
                            static_cast<unsigned long long>(group.generation()), comm.rank(), comm.size(),
                            static_cast<long long>(at.epoch), static_cast<long long>(at.sample),
                            state.restarted_after().c_str());
            // As horovodrun's -np: the first step waits for start_ranks members (a commit
            // re-forms the group with each newcomer); later the job goes on with fewer.
            // Every member decides alike: the position is rank 0's.
            while (at.step == first_step && comm.size() < o.start_ranks) {
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
                state.commit();
            }
            gradsync::data_parallel<float, gradsync::gloo_communicator> dp(comm, *model);
            const fashion_mnist::options schedule; // the example's peak rate and warm-up
            for (bool first = true; at.epoch < o.epochs; at.next_epoch()) {
                const torch::Tensor order = torch::randperm(samples, at::detail::createCPUGenerator(o.seed * 1000 + std::uint64_t(at.epoch)));
                while (at.step_left(comm.size(), o.batch, samples)) {
                    // The rate follows the samples taken, not the steps: a change of size
                    // leaves the schedule where it was.
                    const double rate = fashion_mnist::rate_at(schedule, at.epoch * samples + at.sample, o.epochs * samples);
                    for (auto& g : sgd.param_groups())
                        static_cast<torch::optim::SGDOptions&>(g.options()).lr(rate);
                    const torch::Tensor picked = order.narrow(0, at.first(comm.rank(), o.batch), o.batch);
                    dp.zero_grad();
                    model->seed_dropout((o.seed * 1000003 + std::uint64_t(at.step)) * 1024 + std::uint64_t(comm.rank()));
                    torch::nll_loss(model->forward(train_set.x.index_select(0, picked)), train_set.y.index_select(0, picked))
                        .backward();
                    dp.step(sgd);
                    at.advance(comm.size(), o.batch);
                    if (first && restarted)
                        std::printf("resumed: generation %llu, first step done, t=%.6f\n",
                                    static_cast<unsigned long long>(group.generation()), now());
                    first = false;
                    state.commit();
                    if (at.step == o.checkpoint_step && comm.rank() == 0)
                        write_checkpoint(o.checkpoint, model, sgd, at);
                }
                // Testing waits until the end: a rank busy alone for longer than the deadline
                // would make the others' next call fail.
                if (comm.rank() == 0)
                    std::printf("epoch %lld/%d done: %d ranks, step %lld, t=%.6f\n", static_cast<long long>(at.epoch + 1),
                                o.epochs, comm.size(), static_cast<long long>(at.step), now());
                std::fflush(stdout);
            }
        });
        std::printf("result generation=%llu ranks=%d rank=%d steps=%lld test_accuracy=%.4f parameters=%016llx\n",
                    static_cast<unsigned long long>(group.generation()), group.size(), group.rank(),
                    static_cast<long long>(at.step), fashion_mnist::accuracy(model, test),
                    static_cast<unsigned long long>(fashion_mnist::fingerprint(model)));
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "elastic_fashion_mnist: %s\n", e.what());
        return 1;
    }
}
