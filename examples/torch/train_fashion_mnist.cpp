// train_fashion_mnist: data-parallel training of Horovod's MNIST network (lenet.hpp) on
// Fashion-MNIST with gradsync::data_parallel (docs/torch.md), in the setting of the Adasum
// paper's LeNet-5 study: momentum SGD, a batch of 32 per rank, a linear warm-up over the first
// 17% of the steps from zero to the peak rate and a linear decay back to zero at the end.
//
//   train_fashion_mnist --ranks 8 --policy adasum --epochs 2 --lr 0.0328 --seed 1
//
// Ranks are threads of this process (one module and one intra-op thread each), or, built with
// MPI and started by mpiexec, the MPI processes. Every epoch each rank takes its share of one
// permutation of the 60 000 training images, the same on every rank; rank 0 prints a line per
// epoch and, at the end, one "result ..." line for scripts.
#include <gradsync/comm/local.hpp>
#include <gradsync/policy/adasum.hpp>
#include <gradsync/policy/sum.hpp>
#include <gradsync/torch.hpp>

#include "idx.hpp"
#include "lenet.hpp"

#if GRADSYNC_TRAINER_MPI
#include <gradsync/comm/mpi.hpp>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace {

using gradsync_examples::lenet;

struct options {
    int ranks = 1;
    std::string policy = "average";
    int epochs = 2;
    int batch = 32;
    double lr = 0.0328;
    double momentum = 0.9;
    double warmup = 0.17;
    std::uint64_t seed = 1;
    std::size_t train_limit = 0; // 0: every training image
    std::filesystem::path data = "/usr/share/datasets/fashion-mnist";
};

const char* usage =
    "usage: train_fashion_mnist [--ranks N] [--policy sum|average|adasum] [--epochs E] [--batch B]\n"
    "                           [--lr PEAK] [--momentum M] [--warmup SHARE] [--seed S]\n"
    "                           [--train-limit IMAGES] [--data DIR]\n"
    "defaults: 1 rank, average, 2 epochs, batch 32 per rank, peak 0.0328, momentum 0.9, warm-up 0.17,\n"
    "seed 1, every image, /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist)\n";

[[noreturn]] void refuse(const std::string& what)
{
    std::fprintf(stderr, "train_fashion_mnist: %s\n%s", what.c_str(), usage);
    std::exit(2);
}

double number(std::string_view flag, const char* text)
{
    char* end = nullptr;
    const double v = std::strtod(text, &end);
    if (end == text || *end || !std::isfinite(v) || v < 0)
        refuse(std::string(flag) + " takes a finite non-negative number, got '" + text + "'");
    return v;
}

options parse(int argc, char** argv)
{
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string_view flag = argv[i];
        if (flag == "--help")
            refuse("the options are");
        if (i + 1 >= argc)
            refuse(std::string(flag) + " needs a value");
        const char* v = argv[++i];
        if (flag == "--ranks")
            o.ranks = int(number(flag, v));
        else if (flag == "--policy")
            o.policy = v;
        else if (flag == "--epochs")
            o.epochs = int(number(flag, v));
        else if (flag == "--batch")
            o.batch = int(number(flag, v));
        else if (flag == "--lr")
            o.lr = number(flag, v);
        else if (flag == "--momentum")
            o.momentum = number(flag, v);
        else if (flag == "--warmup")
            o.warmup = number(flag, v);
        else if (flag == "--seed")
            o.seed = std::uint64_t(number(flag, v));
        else if (flag == "--train-limit")
            o.train_limit = std::size_t(number(flag, v));
        else if (flag == "--data")
            o.data = v;
        else
            refuse("unknown option " + std::string(flag));
    }
    if (o.ranks < 1 || o.epochs < 1 || o.batch < 1 || o.warmup > 1)
        refuse("--ranks, --epochs and --batch must be at least 1, --warmup at most 1");
    if (o.policy != "sum" && o.policy != "average" && o.policy != "adasum")
        refuse("--policy is sum, average or adasum, not '" + o.policy + "'");
    return o;
}

struct images {
    torch::Tensor x; // [n, 1, 28, 28], normalized
    torch::Tensor y; // [n], int64
};

// Fashion-MNIST's mean and standard deviation of the training pixels.
images load(const std::filesystem::path& dir, const char* split, std::size_t limit)
{
    const std::filesystem::path xp = dir / (std::string(split) + "-images-idx3-ubyte.gz"),
                                yp = dir / (std::string(split) + "-labels-idx1-ubyte.gz");
    const gradsync_examples::idx_array xi = gradsync_examples::read_idx_images(xp),
                                       yi = gradsync_examples::read_idx_labels(yp);
    gradsync_examples::check_pair(xi, yi, xp, yp, 10);
    const std::int64_t n = std::int64_t(limit ? std::min<std::size_t>(limit, xi.dims[0]) : xi.dims[0]);
    const std::int64_t h = xi.dims[1], w = xi.dims[2];
    torch::Tensor x = torch::from_blob(const_cast<std::uint8_t*>(xi.data.data()), {n, 1, h, w}, torch::kUInt8)
                          .to(torch::kFloat)
                          .div(255)
                          .sub(0.2860)
                          .div(0.3530);
    torch::Tensor y = torch::from_blob(const_cast<std::uint8_t*>(yi.data.data()), {n}, torch::kUInt8).to(torch::kLong);
    return {x.clone(), y.clone()};
}

double accuracy(lenet& model, const images& test)
{
    torch::NoGradGuard no_grad;
    model->eval();
    std::int64_t right = 0;
    for (std::int64_t at = 0; at < test.x.size(0); at += 1000) {
        const std::int64_t n = std::min<std::int64_t>(1000, test.x.size(0) - at);
        right += model->forward(test.x.narrow(0, at, n)).argmax(1).eq(test.y.narrow(0, at, n)).sum().item<std::int64_t>();
    }
    model->train();
    return double(right) / double(test.x.size(0));
}

// Zero to peak over the first `warmup` share of the steps, then back to zero at the last.
double rate_at(const options& o, std::int64_t step, std::int64_t steps)
{
    const double t = double(step) / double(steps), w = std::max(o.warmup, 1e-9);
    return o.lr * (t < w ? t / w : std::max(0.0, (1 - t) / (1 - w)));
}

struct outcome {
    double test_accuracy = 0;
    double seconds = 0;
};

template <class Policy, class Comm>
outcome train(Comm& comm, lenet& model, const images& train_set, const images& test, const options& o, bool printing)
{
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    const std::int64_t n = comm.size(), r = comm.rank();
    const std::int64_t per_step = o.batch * n, steps_per_epoch = train_set.x.size(0) / per_step;
    if (steps_per_epoch == 0)
        throw gradsync::usage_error("train_fashion_mnist: " + std::to_string(train_set.x.size(0)) +
                                    " images are fewer than one step of " + std::to_string(per_step));
    const std::int64_t steps = steps_per_epoch * o.epochs;
    torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0).momentum(o.momentum));
    gradsync::data_parallel<float, Comm, Policy> dp(comm, *model);
    outcome out;
    for (int e = 0; e < o.epochs; ++e) {
        torch::Generator shuffle = at::detail::createCPUGenerator(o.seed * 1000 + std::uint64_t(e));
        const torch::Tensor order = torch::randperm(train_set.x.size(0), shuffle);
        double loss_sum = 0;
        for (std::int64_t s = 0; s < steps_per_epoch; ++s) {
            const torch::Tensor picked = order.narrow(0, s * per_step + r * o.batch, o.batch);
            const double rate = rate_at(o, e * steps_per_epoch + s, steps);
            for (auto& group : sgd.param_groups())
                static_cast<torch::optim::SGDOptions&>(group.options()).lr(rate);
            dp.zero_grad();
            const torch::Tensor loss = torch::nll_loss(model->forward(train_set.x.index_select(0, picked)),
                                                       train_set.y.index_select(0, picked));
            loss.backward();
            dp.synchronize();
            sgd.step();
            loss_sum += loss.item<double>();
        }
        if (printing) {
            out.test_accuracy = accuracy(model, test);
            out.seconds = std::chrono::duration<double>(clock::now() - start).count();
            std::printf("epoch %d/%d: %lld ranks, %s, train loss %.4f (rank 0), test accuracy %.2f%%, %.1f s\n", e + 1,
                        o.epochs, static_cast<long long>(n), o.policy.c_str(), loss_sum / double(steps_per_epoch),
                        100 * out.test_accuracy, out.seconds);
            std::fflush(stdout);
        }
    }
    return out;
}

template <class Comm>
outcome train_with(Comm& comm, lenet& model, const images& train_set, const images& test, const options& o,
                   bool printing)
{
    if (o.policy == "sum")
        return train<gradsync::sum>(comm, model, train_set, test, o, printing);
    if (o.policy == "adasum")
        return train<gradsync::adasum>(comm, model, train_set, test, o, printing);
    return train<gradsync::average>(comm, model, train_set, test, o, printing);
}

// Every replica starts from the parameters of the one built from the seed.
lenet replica(const options& o, std::uint64_t rank)
{
    torch::manual_seed(o.seed);
    lenet model(o.seed * 7919 + rank);
    return model;
}

#if GRADSYNC_TRAINER_MPI
bool under_mpiexec() { return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE"); }
#endif

} // namespace

int main(int argc, char** argv)
{
    try {
        options o = parse(argc, argv);
        torch::set_num_threads(1);
        const images train_set = load(o.data, "train", o.train_limit), test = load(o.data, "t10k", 0);
        outcome result;
        int ranks = o.ranks;
#if GRADSYNC_TRAINER_MPI
        if (under_mpiexec()) {
            int provided = 0;
            MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
            gradsync::mpi_communicator comm(MPI_COMM_WORLD);
            ranks = comm.size();
            lenet model = replica(o, std::uint64_t(comm.rank()));
            result = train_with(comm, model, train_set, test, o, comm.rank() == 0);
            const bool printing = comm.rank() == 0;
            MPI_Finalize();
            if (!printing)
                return 0;
        } else
#endif
        {
            std::vector<lenet> models;
            for (int r = 0; r < ranks; ++r)
                models.push_back(replica(o, std::uint64_t(r)));
            gradsync::local_group group(ranks);
            group.run([&](gradsync::local_communicator& comm) {
                const outcome mine =
                    train_with(comm, models[std::size_t(comm.rank())], train_set, test, o, comm.rank() == 0);
                if (comm.rank() == 0)
                    result = mine;
            });
        }
        std::printf("result policy=%s ranks=%d seed=%llu epochs=%d lr=%g test_accuracy=%.4f seconds=%.1f\n",
                    o.policy.c_str(), ranks, static_cast<unsigned long long>(o.seed), o.epochs, o.lr,
                    result.test_accuracy, result.seconds);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "train_fashion_mnist: %s\n", e.what());
        return 1;
    }
}
