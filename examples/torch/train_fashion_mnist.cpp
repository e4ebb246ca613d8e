// train_fashion_mnist: data-parallel training of Horovod's MNIST network (lenet.hpp) on
// Fashion-MNIST with gradsync::data_parallel (docs/torch.md), in the setting of the Adasum
// paper's LeNet-5 study: momentum SGD, a batch of 32 per rank, a linear warm-up over the first
// 17% of the steps from zero to the peak rate and a linear decay back to zero at the end. The
// policy combines the gradients, or (--reduce model_change) the change of each rank's own
// step, its momentum kept per rank as in Horovod's Adasum optimizer.
//
//   train_fashion_mnist --ranks 8 --policy adasum --epochs 2 --lr 0.0328 --seed 1
//   train_fashion_mnist --ranks 32 --policy adasum --reduce model_change --trace trace.csv
//   train_fashion_mnist --study accuracy --seeds 1,2,3 --out DIR
//   train_fashion_mnist --study schedule --ranks 2 --out DIR
//
// One run: ranks are threads of this process (one module and one intra-op thread each), or,
// built with MPI and started by mpiexec, the MPI processes. Every epoch each rank takes its
// share of one permutation of the 60 000 training images, the same on every rank; rank 0
// prints a line per epoch and, at the end, one "result ..." line for scripts.
//
// The accuracy study (accuracy_study.hpp): one run per column (policy and what it reduces),
// rank count and seed, the schedule unchanged, then a table of the test accuracy per column
// and rank count, runs.csv and accuracy.svg in --out.
//
// --trace FILE (trace.hpp) writes, per step, how alike the ranks' gradients (and momentum
// buffers) are and what the policy makes of them.
//
// The scheduling study (schedule_study.hpp): the step's time under each merge plan over an
// emulated slow link, beside the planner's prediction and the plain libtorch loop;
// profile.csv, the measured LeNet profile, in --out.
#include <gradsync/comm/local/local.hpp>
#include <gradsync/planner/profile_csv.hpp>
#include <gradsync/policy/adasum.hpp>
#include <gradsync/policy/sum.hpp>
#include <gradsync/torch.hpp>

#include "accuracy_study.hpp"
#include "idx.hpp"
#include "lenet.hpp"
#include "schedule_study.hpp"
#include "trace.hpp"

#if GRADSYNC_TRAINER_MPI
#include <gradsync/comm/mpi/mpi.hpp>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using gradsync_examples::lenet;
using gradsync_examples::study_column;

struct options {
    std::string study; // "", "accuracy" or "schedule"
    int ranks = 0;     // 0: 1, or 2 for the scheduling study
    std::string policy = "average";
    std::string reduce = "gradients";      // or "model_change"
    std::string momentum_buffer = "own";   // model change: or "combined" (a diagnostic)
    std::string compress = "none";         // or "fp16", "bf16": the gradients on the wire
    std::filesystem::path trace;           // empty: no trace
    int epochs = 2;
    int batch = 32;
    double lr = 0.0328;
    double momentum = 0.9;
    double warmup = 0.17;
    std::uint64_t seed = 1;
    std::size_t train_limit = 0; // 0: every training image
    std::filesystem::path data = "/usr/share/datasets/fashion-mnist";
    std::vector<std::uint64_t> seeds{1, 2, 3};
    std::vector<std::uint64_t> rank_counts{1, 4, 8, 16, 32};
    std::vector<study_column> columns{
        {"sum", "gradients"}, {"average", "gradients"}, {"adasum", "gradients"}, {"adasum", "model_change"}};
    std::filesystem::path out = "fashion_mnist_out";
    gradsync_examples::schedule_options schedule{};
};

const char* usage =
    "usage: train_fashion_mnist [--ranks N] [--policy sum|average|adasum] [--reduce gradients|model_change]\n"
    "                           [--epochs E] [--batch B] [--lr PEAK] [--momentum M] [--warmup SHARE]\n"
    "                           [--seed S] [--train-limit IMAGES] [--data DIR] [--trace FILE]\n"
    "                           [--momentum-buffer own|combined] [--compress none|fp16|bf16]\n"
    "       train_fashion_mnist --study accuracy [--seeds S,...] [--rank-counts N,...]\n"
    "                           [--policies P[:model_change],...] [--out DIR] [training options]\n"
    "       train_fashion_mnist --study schedule [--ranks N] [--alpha SECONDS] [--beta SECONDS_PER_BYTE]\n"
    "                           [--out DIR] [--batch B] [--data DIR]\n"
    "defaults: 1 rank, average, gradients, 2 epochs, batch 32 per rank, peak 0.0328, momentum 0.9,\n"
    "warm-up 0.17, seed 1, every image, /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist),\n"
    "no trace, momentum buffer own (combined: each rank's set to the combined change / -rate after each\n"
    "step of the model change), no compression;\n"
    "accuracy: seeds 1,2,3, rank counts 1,4,8,16,32, policies sum,average,adasum,adasum:model_change;\n"
    "schedule: 2 ranks, alpha 1e-3, beta 1e-7; out: fashion_mnist_out\n";

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

template <class Item>
std::vector<Item> list(std::string_view flag, const char* text)
{
    std::vector<Item> items;
    std::string_view rest = text;
    while (true) {
        const std::size_t comma = rest.find(',');
        const std::string item(rest.substr(0, comma));
        if (item.empty())
            refuse(std::string(flag) + " takes a comma-separated list, got '" + text + "'");
        if constexpr (std::is_same_v<Item, std::string>)
            items.push_back(item);
        else
            items.push_back(Item(number(flag, item.c_str())));
        if (comma == std::string_view::npos)
            return items;
        rest.remove_prefix(comma + 1);
    }
}

// --policies items: a policy, alone (the gradients) or with ":model_change" or ":gradients".
std::vector<study_column> columns(const std::vector<std::string>& items)
{
    std::vector<study_column> out;
    for (const std::string& item : items) {
        const std::size_t colon = item.find(':');
        out.push_back({item.substr(0, colon), colon == std::string::npos ? "gradients" : item.substr(colon + 1)});
    }
    return out;
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
        else if (flag == "--reduce")
            o.reduce = v;
        else if (flag == "--momentum-buffer")
            o.momentum_buffer = v;
        else if (flag == "--compress")
            o.compress = v;
        else if (flag == "--trace")
            o.trace = v;
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
        else if (flag == "--study")
            o.study = v;
        else if (flag == "--seeds")
            o.seeds = list<std::uint64_t>(flag, v);
        else if (flag == "--rank-counts")
            o.rank_counts = list<std::uint64_t>(flag, v);
        else if (flag == "--policies")
            o.columns = columns(list<std::string>(flag, v));
        else if (flag == "--out")
            o.out = v;
        else if (flag == "--alpha")
            o.schedule.link.alpha = number(flag, v);
        else if (flag == "--beta")
            o.schedule.link.beta = number(flag, v);
        else
            refuse("unknown option " + std::string(flag));
    }
    if (o.study != "" && o.study != "accuracy" && o.study != "schedule")
        refuse("--study is accuracy or schedule, not '" + o.study + "'");
    if (o.ranks == 0)
        o.ranks = o.study == "schedule" ? 2 : 1;
    if (o.ranks < 1 || o.epochs < 1 || o.batch < 1 || o.warmup > 1)
        refuse("--ranks, --epochs and --batch must be at least 1, --warmup at most 1");
    for (std::uint64_t n : o.rank_counts)
        if (n < 1 || n > 1024)
            refuse("--rank-counts are 1 to 1024, got " + std::to_string(n));
    if (o.reduce != "gradients" && o.reduce != "model_change")
        refuse("--reduce is gradients or model_change, not '" + o.reduce + "'");
    std::vector<study_column> runs = o.columns;
    runs.push_back({o.policy, o.reduce});
    for (const auto& [policy, reduce] : runs) {
        if (policy != "sum" && policy != "average" && policy != "adasum")
            refuse("a policy is sum, average or adasum, not '" + policy + "'");
        if (reduce != "gradients" && reduce != "model_change")
            refuse("a policy reduces gradients or model_change, not '" + reduce + "'");
    }
    if (o.compress != "none" && o.compress != "fp16" && o.compress != "bf16")
        refuse("--compress is none, fp16 or bf16, not '" + o.compress + "'");
    if (o.momentum_buffer != "own" && o.momentum_buffer != "combined")
        refuse("--momentum-buffer is own or combined, not '" + o.momentum_buffer + "'");
    if (o.momentum_buffer == "combined" && (o.reduce != "model_change" || o.momentum == 0))
        refuse("--momentum-buffer combined needs --reduce model_change and a momentum");
    if (!o.trace.empty() && !o.study.empty())
        refuse("--trace follows one run, not a study");
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
    double train_loss = 0;          // rank 0's mean over the last epoch
    double seconds = 0;
    std::uint64_t parameters = 0;   // FNV-1a of the final parameters' bytes: equal runs, equal bits
};

std::uint64_t fingerprint(lenet& model)
{
    std::uint64_t h = 14695981039346656037ull;
    for (const torch::Tensor& p : model->parameters()) {
        const torch::Tensor c = p.detach().contiguous();
        const auto* bytes = static_cast<const unsigned char*>(c.data_ptr());
        for (std::size_t i = 0; i < std::size_t(c.nbytes()); ++i)
            h = (h ^ bytes[i]) * 1099511628211ull;
    }
    return h;
}

// The momentum buffer that libtorch's SGD keeps for p, from its first step on.
torch::Tensor& momentum_buffer(torch::optim::SGD& sgd, const torch::Tensor& p)
{
    auto& state = sgd.state().at(c10::guts::to_string(p.unsafeGetTensorImpl()));
    return static_cast<torch::optim::SGDParamState&>(*state).momentum_buffer();
}

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
    const bool model_change = o.reduce == "model_change";
    gradsync::data_parallel_options dp_options;
    if (model_change)
        dp_options.reduce = gradsync::reduction_target::model_change;
    dp_options.compress = o.compress == "fp16"   ? gradsync::compression::fp16
                          : o.compress == "bf16" ? gradsync::compression::bf16
                                                 : gradsync::compression::none;
    gradsync::data_parallel<float, Comm, Policy> dp(comm, *model, dp_options);
    // The trace follows the momentum buffers too when each rank steps with its own.
    const std::vector<torch::Tensor> params = model->parameters();
    const bool buffers = model_change && o.momentum > 0;
    std::optional<gradsync_examples::combine_trace<Comm, Policy>> trace;
    if (!o.trace.empty())
        trace.emplace(comm, params, buffers, o.trace);
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
            dp.step(sgd);
            loss_sum += loss.item<double>();
            if (trace) {
                if (buffers)
                    for (std::size_t l = 0; l < params.size(); ++l)
                        trace->momentum(l).copy_(momentum_buffer(sgd, params[l]));
                trace->record(e * steps_per_epoch + s, rate);
            }
            // The diagnostic: every rank's momentum as if its step had made the combined change.
            if (o.momentum_buffer == "combined")
                for (const torch::Tensor& p : params) {
                    torch::Tensor& buffer = momentum_buffer(sgd, p);
                    if (rate > 0)
                        buffer.copy_(p.grad()).div_(-rate);
                    else
                        buffer.zero_();
                }
        }
        if (printing) {
            out.test_accuracy = accuracy(model, test);
            out.seconds = std::chrono::duration<double>(clock::now() - start).count();
            out.train_loss = loss_sum / double(steps_per_epoch);
            std::printf("epoch %d/%d: %lld ranks, %s, train loss %.4f (rank 0), test accuracy %.2f%%, %.1f s", e + 1,
                        o.epochs, static_cast<long long>(n), o.policy.c_str(), loss_sum / double(steps_per_epoch),
                        100 * out.test_accuracy, out.seconds);
            if (trace) {
                const std::vector<gradsync_examples::trace_means> means = trace->means();
                for (std::size_t k = 0; k < means.size(); ++k)
                    std::printf("; %s: mean cosine %.3f, norm ratio %.3f, signal gain %.2f", trace->kinds[k],
                                means[k].cosine, means[k].norm_ratio, means[k].signal_gain);
            }
            std::printf("\n");
            std::fflush(stdout);
        }
    }
    if (trace)
        trace->close();
    out.parameters = fingerprint(model);
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

void print_result(const options& o, int ranks, const outcome& r)
{
    std::printf("result policy=%s reduce=%s compress=%s ranks=%d seed=%llu epochs=%d lr=%g test_accuracy=%.4f "
                "parameters=%016llx seconds=%.1f\n",
                o.policy.c_str(), o.reduce.c_str(), o.compress.c_str(), ranks, static_cast<unsigned long long>(o.seed), o.epochs, o.lr,
                r.test_accuracy, static_cast<unsigned long long>(r.parameters), r.seconds);
    std::fflush(stdout);
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
    if (r != 0)
        return;
    const auto ms = [](double s) { return 1e3 * s; };
    std::printf("scheduling study: %lld ranks, batch %d per rank, link %.3g ms per message + %.3g ns per byte; "
                "calibrated T(M) = %.3f ms + %.3f ns/B x M (rms %.3f ms); %.3f ms from backward to the first hook\n\n",
                static_cast<long long>(n), o.batch, ms(o.schedule.link.alpha), 1e9 * o.schedule.link.beta,
                ms(result.fit.cost.a), 1e9 * result.fit.cost.b, ms(result.fit.residual_rms_s),
                ms(result.before_first_hook_s));
    std::printf("| layer | parameters | backward ms |\n|---|---:|---:|\n");
    for (const gradsync::planner::layer_profile& l : result.profile)
        std::printf("| %s | %llu | %.3f |\n", l.name.c_str(), static_cast<unsigned long long>(l.params),
                    ms(l.backward_s));
    const double plain_s = result.rows.back().measured_s;
    std::printf("\n| method | groups | predicted ms | measured ms | measured / predicted | speedup over allreduce after "
                "backward | synchronize() returned ms |\n|---|---:|---:|---:|---:|---:|---:|\n");
    for (const gradsync_examples::schedule_row& row : result.rows) {
        std::string groups = row.groups.empty() ? std::to_string(result.profile.size()) + " calls after"
                                                : std::to_string(row.groups.size()) + ":";
        for (const std::vector<std::size_t>& g : row.groups) { // appended piece by piece: g++ 12 misreads
            groups.append(" ").append(std::to_string(g.back()));   // a chain of + as an overlapping copy
            if (g.size() > 1)
                groups.append("..").append(std::to_string(g.front()));
        }
        std::printf("| %s | %s | %.2f | %.2f | %.3f | %.2fx | %.2f |\n", row.method.c_str(), groups.c_str(),
                    ms(row.predicted_s), ms(row.measured_s), row.measured_s / row.predicted_s,
                    plain_s / row.measured_s, ms(row.returned_s));
    }
    const std::filesystem::path file = o.out / "profile.csv";
    std::ofstream out = gradsync_examples::open_output(file);
    gradsync::planner::write_profile_csv(out, result.profile);
    gradsync_examples::close_output(out, file);
    std::printf("\nthe profile: %s\n", file.string().c_str());
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
