// data_parallel's passes and ranks over local_group threads: k accumulated backward passes
// (accumulate = k, or no_sync()) against one pass over the k-times batch, on a network whose
// arithmetic is exact (small integers), so that the two give the same bits; ranks with
// unequal numbers of batches finishing in join() against a reference trajectory in which the
// ranks out of data send zeros; fp16 and bf16 modules training to a sane accuracy.
#include "torch_harness.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "outcome.hpp"

namespace {

using namespace gradsync_test;
using Catch::Matchers::Contains;

// Two linear layers with small integer weights: every product and sum of the forward and
// backward passes below is an integer under 2^24, so float arithmetic is exact and the order
// of the batch's sums does not change the bits.
struct exact_impl : torch::nn::Module {
    exact_impl()
        : l1(register_module("l1", torch::nn::Linear(6, 5))), l2(register_module("l2", torch::nn::Linear(5, 3)))
    {
        torch::NoGradGuard no_grad;
        for (torch::Tensor& p : parameters())
            p.copy_(torch::randint(-2, 3, p.sizes()));
    }

    torch::Tensor forward(torch::Tensor x) { return l2->forward(torch::relu(l1->forward(x))); }

    torch::nn::Linear l1, l2;
};
TORCH_MODULE_IMPL(exact, exact_impl);

struct exact_batch {
    torch::Tensor x, weights; // the loss is (output * weights).sum()
};

exact_batch slice(const exact_batch& b, std::int64_t from, std::int64_t rows)
{
    return {b.x.narrow(0, from, rows), b.weights.narrow(0, from, rows)};
}

void backward(exact& m, const exact_batch& b) { (m->forward(b.x) * b.weights).sum().backward(); }

std::vector<float> gradients_of(exact& m)
{
    std::vector<torch::Tensor> g;
    for (const torch::Tensor& p : m->parameters())
        g.push_back(p.grad());
    return flat_of(g);
}

enum class accumulation { option, no_sync };

// dp's gradients after k passes of `rows` rows against each rank's one pass over the k * rows
// rows, reduced by a plain reducer per layer (the plan while measuring is one group a layer).
template <class Policy>
void check_accumulation(int n, int k, accumulation how)
{
    constexpr std::int64_t rows = 2;
    torch::manual_seed(5);
    std::vector<exact_batch> data;
    for (int r = 0; r < n; ++r)
        data.push_back({torch::randint(-3, 4, {k * rows, 6}, torch::kFloat), torch::randint(-2, 3, {k * rows, 3}, torch::kFloat)});
    std::vector<exact> models;
    for (int r = 0; r < n; ++r) {
        torch::manual_seed(9);
        models.push_back(exact());
    }
    std::vector<std::vector<float>> got(static_cast<std::size_t>(n)), one_pass(static_cast<std::size_t>(n));
    std::vector<std::size_t> sizes;
    local_group group(n);
    group.run([&](local_communicator& comm) {
        const std::size_t r = std::size_t(comm.rank());
        gradsync::data_parallel_options options;
        options.accumulate = how == accumulation::option ? k : 1;
        gradsync::data_parallel<float, local_communicator, Policy> dp(comm, *models[r], options);
        dp.zero_grad();
        if (how == accumulation::option) {
            for (int pass = 0; pass < k; ++pass)
                backward(models[r], slice(data[r], pass * rows, rows));
        } else {
            {
                auto scope = dp.no_sync();
                for (int pass = 0; pass + 1 < k; ++pass)
                    backward(models[r], slice(data[r], pass * rows, rows));
            }
            backward(models[r], slice(data[r], (k - 1) * rows, rows));
        }
        dp.synchronize();
        got[r] = gradients_of(models[r]);
        if (r == 0)
            sizes.assign(dp.layer_sizes().begin(), dp.layer_sizes().end());
    });
    for (int r = 0; r < n; ++r) {
        torch::manual_seed(9);
        exact m;
        backward(m, data[std::size_t(r)]);
        one_pass[std::size_t(r)] = gradients_of(m);
    }
    const gradsync::planner::merge_plan per_layer = per_layer_plan(sizes.size());
    const auto want = reduce_by_group<Policy>(one_pass, sizes, per_layer);
    for (int r = 0; r < n; ++r) {
        INFO(Policy::name << ", " << n << " ranks, " << k << " passes, "
                          << (how == accumulation::option ? "accumulate" : "no_sync") << ", rank " << r);
        CHECK(same_bits(got[std::size_t(r)], want[std::size_t(r)]));
    }
}

} // namespace

TEST_CASE("k accumulated passes give the bits of one pass over the k-times batch", "[torch]")
{
    for (int n = 1; n <= 8; ++n)
        for (int k = 1; k <= 4; ++k)
            for (accumulation how : {accumulation::option, accumulation::no_sync}) {
                check_accumulation<gradsync::sum>(n, k, how);
                check_accumulation<gradsync::average>(n, k, how);
                check_accumulation<gradsync::adasum>(n, k, how);
            }
}

TEST_CASE("a step after too few passes, or a pass too many, is refused by name", "[torch]")
{
    std::vector<lenet> models = replicas(1);
    const auto inputs = batches(3, 1);
    outcome early, extra, inside;
    local_group group(1);
    group.run([&](local_communicator& comm) {
        gradsync::data_parallel_options options;
        options.accumulate = 2;
        gradsync::data_parallel<float, local_communicator> dp(comm, *models[0], options);
        torch::optim::SGD sgd(models[0]->parameters(), torch::optim::SGDOptions(0.01));
        dp.zero_grad();
        backward(models[0], inputs[0][0]);
        record(early, false, [&] { dp.step(sgd); });
        backward(models[0], inputs[1][0]);
        record(extra, false, [&] { backward(models[0], inputs[2][0]); });
        auto scope = dp.no_sync();
        record(inside, false, [&] { dp.synchronize(); });
    });
    INFO(early.what);
    CHECK_THAT(early.what, Contains("synchronize() after 1 of 2 backward passes (data_parallel_options::accumulate)"));
    INFO(extra.what);
    CHECK_THAT(extra.what, Contains("its gradient was produced 3 times before synchronize(); "
                                    "data_parallel_options::accumulate is 2"));
    INFO(inside.what);
    CHECK_THAT(inside.what, Contains("synchronize() inside a no_sync() scope"));
}

namespace {

// Rank r has 2 + r batches; the ranks out of data join. The reference trajectory: at each
// iteration every rank's gradient at the common parameters, zeros for the ranks out of data,
// reduced per layer by a plain reducer, and one momentum SGD step on the result.
template <class Policy>
void check_join(int n)
{
    const auto count = [](int r) { return 2 + r; };
    const int most = count(n - 1);
    const auto inputs = batches(most, n);
    const auto sgd_of = [](lenet& m) {
        return torch::optim::SGD(m->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    };
    std::vector<lenet> models = replicas(n);
    std::vector<std::vector<float>> got(static_cast<std::size_t>(n));
    std::vector<std::uint64_t> iterations(static_cast<std::size_t>(n));
    std::vector<std::size_t> sizes;
    local_group group(n);
    group.run([&](local_communicator& comm) {
        const std::size_t r = std::size_t(comm.rank());
        gradsync::data_parallel_options options;
        options.uneven_inputs = true;
        options.measure_iterations = 0; // one group per layer, as the reference reduces
        options.sync.deadline = std::chrono::seconds(60);
        gradsync::data_parallel<float, local_communicator, Policy> dp(comm, *models[r], options);
        torch::optim::SGD sgd = sgd_of(models[r]);
        for (int b = 0; b < count(int(r)); ++b) {
            dp.zero_grad();
            backward(models[r], inputs[std::size_t(b)][r]);
            dp.step(sgd);
        }
        dp.join(sgd);
        got[r] = flat_of(models[r]->parameters());
        iterations[r] = dp.iterations();
        if (r == 0)
            sizes.assign(dp.layer_sizes().begin(), dp.layer_sizes().end());
    });
    const gradsync::planner::merge_plan per_layer = per_layer_plan(sizes.size());
    std::vector<lenet> reference = replicas(n + 1); // [0] steps; [1..n] compute each rank's gradient
    torch::optim::SGD sgd = sgd_of(reference[0]);
    for (int i = 0; i < most; ++i) {
        std::vector<std::vector<float>> local;
        for (int r = 0; r < n; ++r) {
            lenet& m = reference[std::size_t(r) + 1];
            {
                torch::NoGradGuard no_grad;
                for (std::size_t p = 0; p < m->parameters().size(); ++p)
                    m->parameters()[p].copy_(reference[0]->parameters()[p]);
            }
            for (torch::Tensor& p : m->parameters())
                p.mutable_grad() = torch::Tensor();
            backward(m, inputs[std::size_t(i)][std::size_t(r)]);
            local.push_back(gradients_of(m));
            if (i >= count(r))
                std::fill(local.back().begin(), local.back().end(), 0.0f);
        }
        const auto reduced = reduce_by_group<Policy>(local, sizes, per_layer);
        std::size_t at = 0;
        for (torch::Tensor& p : reference[0]->parameters()) {
            p.mutable_grad() = torch::from_blob(const_cast<float*>(reduced[0].data()) + at, p.sizes()).clone();
            at += std::size_t(p.numel());
        }
        sgd.step();
    }
    const std::vector<float> want = flat_of(reference[0]->parameters());
    for (int r = 0; r < n; ++r) {
        INFO(Policy::name << ", " << n << " ranks, rank " << r);
        CHECK(same_bits(got[std::size_t(r)], want));
        CHECK(iterations[std::size_t(r)] == std::uint64_t(most + 1)); // and one in which all had joined
    }
}

} // namespace

TEST_CASE("ranks with unequal numbers of batches all finish join() with the documented result", "[torch]")
{
    for (int n = 1; n <= 5; ++n) {
        check_join<gradsync::sum>(n);
        check_join<gradsync::average>(n);
        check_join<gradsync::adasum>(n);
    }
    outcome refused;
    std::vector<lenet> models = replicas(1);
    local_group one(1);
    one.run([&](local_communicator& comm) {
        gradsync::data_parallel<float, local_communicator> dp(comm, *models[0]);
        torch::optim::SGD sgd(models[0]->parameters(), torch::optim::SGDOptions(0.01));
        record(refused, false, [&] { dp.join(sgd); });
    });
    INFO(refused.what);
    CHECK_THAT(refused.what, Contains("join() needs data_parallel_options::uneven_inputs = true on every rank"));
}

namespace {

// Each rank's gradients rounded to W by libtorch, reduced per layer in W by a plain reducer,
// and widened by libtorch: the documented bits of data_parallel_options::compress.
template <class Policy, class W>
void check_compression(int n, gradsync::compression compress, torch::ScalarType wire)
{
    const auto inputs = batches(1, n);
    std::vector<lenet> models = replicas(n);
    std::vector<std::vector<float>> got(static_cast<std::size_t>(n));
    std::vector<std::size_t> sizes;
    local_group group(n);
    group.run([&](local_communicator& comm) {
        const std::size_t r = std::size_t(comm.rank());
        gradsync::data_parallel_options options;
        options.compress = compress;
        options.measure_iterations = 0;
        gradsync::data_parallel<float, local_communicator, Policy> dp(comm, *models[r], options);
        dp.zero_grad();
        backward(models[r], inputs[0][r]);
        dp.synchronize();
        got[r] = gradients_of(models[r]);
        if (r == 0)
            sizes.assign(dp.layer_sizes().begin(), dp.layer_sizes().end());
    });
    std::vector<lenet> reference = replicas(n);
    std::vector<std::vector<W>> narrow;
    std::vector<std::vector<float>> local;
    for (int r = 0; r < n; ++r) {
        backward(reference[std::size_t(r)], inputs[0][std::size_t(r)]);
        const std::vector<float>& g = local.emplace_back(gradients_of(reference[std::size_t(r)]));
        const torch::Tensor rounded = torch::from_blob(const_cast<float*>(g.data()), {std::int64_t(g.size())}).to(wire);
        const W* w = static_cast<const W*>(rounded.data_ptr());
        narrow.emplace_back(w, w + g.size());
    }
    const auto reduced = reduce_by_group<Policy, W>(narrow, sizes, per_layer_plan(sizes.size()));
    const auto full = reduce_by_group<Policy>(local, sizes, per_layer_plan(sizes.size()));
    for (int r = 0; r < n; ++r) {
        std::vector<W> mine = reduced[std::size_t(r)];
        const torch::Tensor wide =
            torch::from_blob(mine.data(), {std::int64_t(mine.size())}, torch::TensorOptions().dtype(wire)).to(torch::kFloat);
        const std::vector<float> want(wide.data_ptr<float>(), wide.data_ptr<float>() + wide.numel());
        INFO(Policy::name << ", " << n << " ranks, " << c10::toString(wire) << " on the wire, rank " << r);
        CHECK(same_bits(got[std::size_t(r)], want));
        CHECK(!same_bits(got[std::size_t(r)], full[std::size_t(r)])); // it was rounded
    }
}

} // namespace

TEST_CASE("compressed gradients are rounded to fp16 or bf16, reduced in it and widened back", "[torch]")
{
    for (int n = 1; n <= 4; ++n) {
        check_compression<gradsync::sum, gradsync::half>(n, gradsync::compression::fp16, torch::kHalf);
        check_compression<gradsync::average, gradsync::bfloat16>(n, gradsync::compression::bf16, torch::kBFloat16);
        check_compression<gradsync::adasum, gradsync::bfloat16>(n, gradsync::compression::bf16, torch::kBFloat16);
        check_compression<gradsync::adasum, gradsync::half>(n, gradsync::compression::fp16, torch::kHalf);
    }
}

namespace {

// A classifier whose parameters are of type `type` and whose arithmetic is float, as mixed
// precision runs it: parameters and gradients in 16 bits, the products in 32.
struct low_precision_impl : torch::nn::Module {
    explicit low_precision_impl(torch::ScalarType type)
        : l1(register_module("l1", torch::nn::Linear(8, 32))), l2(register_module("l2", torch::nn::Linear(32, 3)))
    {
        to(type);
    }

    torch::Tensor forward(torch::Tensor x)
    {
        const auto f = [](const torch::Tensor& t) { return t.to(torch::kFloat); };
        x = torch::relu(torch::linear(x, f(l1->weight), f(l1->bias)));
        return torch::log_softmax(torch::linear(x, f(l2->weight), f(l2->bias)), 1);
    }

    torch::nn::Linear l1, l2;
};
TORCH_MODULE_IMPL(low_precision, low_precision_impl);

// Three Gaussian blobs in 8 dimensions.
batch blobs(int rows, std::uint64_t seed)
{
    torch::manual_seed(seed);
    const torch::Tensor y = torch::randint(0, 3, {rows});
    const torch::Tensor centres = torch::eye(3, 8) * 3.0;
    return {centres.index_select(0, y) + torch::randn({rows, 8}), y};
}

template <class T>
double trained_accuracy(torch::ScalarType type)
{
    constexpr int n = 2, steps = 150;
    std::vector<low_precision> models;
    for (int r = 0; r < n; ++r) {
        torch::manual_seed(21 + std::uint64_t(r)); // the construction's broadcast makes them equal
        models.push_back(low_precision(type));
    }
    std::vector<std::vector<batch>> data(n);
    for (int r = 0; r < n; ++r)
        for (int s = 0; s < steps; ++s)
            data[std::size_t(r)].push_back(blobs(16, 1000 * std::uint64_t(r) + std::uint64_t(s)));
    local_group group(n);
    group.run([&](local_communicator& comm) {
        const std::size_t r = std::size_t(comm.rank());
        gradsync::data_parallel_options options;
        options.check_every = 50;
        gradsync::data_parallel<T, local_communicator> dp(comm, *models[r], options);
        torch::optim::SGD sgd(models[r]->parameters(), torch::optim::SGDOptions(0.05));
        for (const batch& b : data[r]) {
            dp.zero_grad();
            torch::nll_loss(models[r]->forward(b.x), b.y).backward();
            dp.step(sgd);
        }
    });
    const batch test = blobs(3000, 424242);
    torch::NoGradGuard no_grad;
    return models[0]->forward(test.x).argmax(1).eq(test.y).to(torch::kDouble).mean().item<double>();
}

} // namespace

TEST_CASE("fp16 and bf16 modules train a short run to a sane accuracy", "[torch]")
{
    const double fp16 = trained_accuracy<gradsync::half>(torch::kHalf);
    const double bf16 = trained_accuracy<gradsync::bfloat16>(torch::kBFloat16);
    INFO("fp16 " << fp16 << ", bf16 " << bf16 << " (chance: 1/3)");
    CHECK(fp16 > 0.9);
    CHECK(bf16 > 0.9);
}
