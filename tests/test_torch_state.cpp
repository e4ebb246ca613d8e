// data_parallel's module state over local_group threads: the same start from modules built
// from different seeds, BatchNorm buffers kept equal (copied from rank 0, or averaged)
// against each rank's own forward, a checkpoint restored on rank 0 plus broadcast_state()
// against an uninterrupted run, the replica check naming a perturbed parameter, and options
// that differ between ranks refused by name.
#include "torch_harness.hpp"

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "outcome.hpp"

namespace {

using namespace gradsync_test;
using Catch::Matchers::Contains;

// A convolution, BatchNorm (buffers running_mean, running_var, num_batches_tracked) and a
// linear layer.
struct normed_impl : torch::nn::Module {
    normed_impl()
        : conv(register_module("conv", torch::nn::Conv2d(1, 4, 3))),
          norm(register_module("norm", torch::nn::BatchNorm2d(4))),
          fc(register_module("fc", torch::nn::Linear(4 * 6 * 6, 10)))
    {
    }

    torch::Tensor forward(torch::Tensor x)
    {
        x = torch::relu(norm->forward(conv->forward(x)));
        return torch::log_softmax(fc->forward(x.flatten(1)), 1);
    }

    torch::nn::Conv2d conv;
    torch::nn::BatchNorm2d norm;
    torch::nn::Linear fc;
};
TORCH_MODULE_IMPL(normed, normed_impl);

// Every parameter (trainable or not) and buffer of a module, flat, as bytes.
std::vector<std::uint8_t> state_bytes(torch::nn::Module& m)
{
    std::vector<std::uint8_t> out;
    const auto append = [&](const torch::Tensor& t) {
        const torch::Tensor c = t.contiguous();
        const auto* p = static_cast<const std::uint8_t*>(c.data_ptr());
        out.insert(out.end(), p, p + c.numel() * c.element_size());
    };
    for (const torch::Tensor& p : m.parameters())
        append(p);
    for (const torch::Tensor& b : m.buffers())
        append(b);
    return out;
}

std::vector<float> buffer_floats(torch::nn::Module& m)
{
    std::vector<torch::Tensor> floats;
    for (const torch::Tensor& b : m.buffers())
        if (b.scalar_type() == torch::kFloat)
            floats.push_back(b);
    return flat_of(floats);
}

std::vector<normed> normed_models(int n, bool same)
{
    std::vector<normed> m;
    for (int r = 0; r < n; ++r) {
        torch::manual_seed(same ? 3 : 3 + std::uint64_t(r));
        m.push_back(normed());
    }
    return m;
}

} // namespace

TEST_CASE("modules built from different seeds are bitwise identical after construction", "[torch]")
{
    for (int n = 1; n <= 6; ++n)
        for (bool copy : {true, false}) {
            std::vector<normed> models = normed_models(n, false);
            {
                torch::NoGradGuard no_grad; // buffers that differ too
                for (int r = 0; r < n; ++r)
                    models[std::size_t(r)]->norm->running_mean.fill_(float(r));
            }
            const std::vector<std::uint8_t> rank0 = state_bytes(*models[0]);
            std::vector<std::vector<std::uint8_t>> after(static_cast<std::size_t>(n));
            local_group group(n);
            group.run([&](local_communicator& comm) {
                const std::size_t r = std::size_t(comm.rank());
                gradsync::data_parallel_options options;
                options.broadcast_start = copy;
                gradsync::data_parallel<float, local_communicator> dp(comm, *models[r], options);
                after[r] = state_bytes(*models[r]);
            });
            for (int r = 0; r < n; ++r) {
                INFO(n << " ranks, rank " << r << (copy ? ", broadcast_start" : ", no broadcast_start"));
                CHECK((after[std::size_t(r)] == rank0) == (copy || r == 0));
            }
        }
}

TEST_CASE("BatchNorm buffers are rank 0's, or the ranks' mean, after every iteration", "[torch]")
{
    constexpr int n = 3, steps = 3;
    const auto inputs = [] {
        torch::manual_seed(11);
        std::vector<std::vector<batch>> b(steps);
        for (auto& step : b)
            for (int r = 0; r < n; ++r) // each rank's data on its own scale: the statistics differ
                step.push_back({torch::randn({4, 1, 8, 8}) * float(r + 1) + float(r), torch::randint(0, 10, {4})});
        return b;
    }();
    for (gradsync::buffer_sync mode : {gradsync::buffer_sync::broadcast, gradsync::buffer_sync::average}) {
        std::vector<normed> models = normed_models(n, true);
        std::vector<std::vector<std::vector<float>>> own(steps, std::vector<std::vector<float>>(n));
        std::vector<std::vector<std::vector<float>>> kept(steps, std::vector<std::vector<float>>(n));
        std::vector<std::vector<std::int64_t>> tracked(n);
        local_group group(n);
        group.run([&](local_communicator& comm) {
            const std::size_t r = std::size_t(comm.rank());
            gradsync::data_parallel_options options;
            options.buffers = mode;
            gradsync::data_parallel<float, local_communicator> dp(comm, *models[r], options);
            torch::optim::SGD sgd(models[r]->parameters(), torch::optim::SGDOptions(0.01));
            for (int s = 0; s < steps; ++s) {
                dp.zero_grad();
                const batch& b = inputs[std::size_t(s)][r];
                torch::nll_loss(models[r]->forward(b.x), b.y).backward();
                own[std::size_t(s)][r] = buffer_floats(*models[r]); // this rank's own statistics
                dp.step(sgd);
                kept[std::size_t(s)][r] = buffer_floats(*models[r]);
                tracked[r].push_back(models[r]->norm->num_batches_tracked.item<std::int64_t>());
            }
        });
        for (int s = 0; s < steps; ++s) {
            std::vector<std::vector<float>> want(n, own[std::size_t(s)][0]);
            if (mode == gradsync::buffer_sync::average) {
                want = own[std::size_t(s)];
                local_group reference(n);
                reference.run([&](local_communicator& comm) {
                    gradsync::allreduce(comm, std::span<float>(want[std::size_t(comm.rank())]), gradsync::average{});
                });
            }
            for (int r = 0; r < n; ++r) {
                INFO((mode == gradsync::buffer_sync::average ? "average" : "broadcast") << ", step " << s << ", rank "
                                                                                      << r);
                CHECK(same_bits(kept[std::size_t(s)][std::size_t(r)], want[std::size_t(r)]));
                CHECK(tracked[std::size_t(r)][std::size_t(s)] == s + 1);
            }
            CHECK(!same_bits(own[std::size_t(s)][0], own[std::size_t(s)][1])); // they did differ
        }
    }
}

TEST_CASE("a checkpoint restored on rank 0 and broadcast_state() continue as an uninterrupted run", "[torch]")
{
    constexpr int n = 3, before = 2, after = 2;
    const auto inputs = batches(before + after, n);
    const auto adam = [](torch::nn::Module& m) {
        return torch::optim::Adam(m.parameters(), torch::optim::AdamOptions(1e-3));
    };
    const auto train = [&](gradsync::data_parallel<float, local_communicator>& dp, lenet& m,
                           torch::optim::Optimizer& o, std::size_t r, int from, int to) {
        for (int s = from; s < to; ++s) {
            dp.zero_grad();
            backward(m, inputs[std::size_t(s)][r]);
            dp.step(o);
        }
    };
    // Uninterrupted, with rank 0's model and optimizer saved after `before` steps.
    std::vector<lenet> models = replicas(n);
    std::vector<std::vector<float>> uninterrupted(n);
    std::string model_file, optimizer_file;
    {
        local_group group(n);
        group.run([&](local_communicator& comm) {
            const std::size_t r = std::size_t(comm.rank());
            torch::optim::Adam o = adam(*models[r]);
            gradsync::data_parallel<float, local_communicator> dp(comm, *models[r]);
            train(dp, models[r], o, r, 0, before);
            if (r == 0) {
                std::ostringstream m, s;
                torch::save(models[r], m);
                torch::save(o, s);
                model_file = m.str();
                optimizer_file = s.str();
            }
            train(dp, models[r], o, r, before, before + after);
            uninterrupted[r] = flat_of(models[r]->parameters());
        });
    }
    // Restarted: fresh modules from other seeds and fresh optimizers; only rank 0 reads the files.
    std::vector<std::vector<float>> restored(n);
    local_group group(n);
    group.run([&](local_communicator& comm) {
        const std::size_t r = std::size_t(comm.rank());
        lenet m;
        {
            static std::mutex seed;
            std::lock_guard lock(seed);
            torch::manual_seed(100 + r);
            m = lenet();
        }
        torch::optim::Adam o = adam(*m);
        if (r == 0) {
            std::istringstream ms(model_file), os(optimizer_file);
            torch::load(m, ms);
            torch::load(o, os);
        }
        gradsync::data_parallel<float, local_communicator> dp(comm, *m); // copies rank 0's parameters
        dp.broadcast_state(o);
        train(dp, m, o, r, before, before + after);
        restored[r] = flat_of(m->parameters());
    });
    for (int r = 0; r < n; ++r) {
        INFO("rank " << r);
        CHECK(same_bits(restored[std::size_t(r)], uninterrupted[std::size_t(r)]));
    }
}

TEST_CASE("the replica check names a parameter perturbed on one rank, on every rank", "[torch]")
{
    constexpr int n = 4;
    std::vector<lenet> models = replicas(n);
    const auto inputs = batches(3, n);
    std::vector<outcome> o(n);
    std::vector<int> completed(n, 0);
    local_group group(n);
    group.run([&](local_communicator& comm) {
        const std::size_t r = std::size_t(comm.rank());
        gradsync::data_parallel_options options;
        options.check_every = 1;
        gradsync::data_parallel<float, local_communicator> dp(comm, *models[r], options);
        torch::optim::SGD sgd(models[r]->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
        record(o[r], false, [&] {
            for (int s = 0; s < 3; ++s) {
                if (s == 2 && r == 2) {
                    torch::NoGradGuard no_grad;
                    models[r]->fc1->bias[7] += 1e-6f;
                }
                dp.zero_grad();
                backward(models[r], inputs[std::size_t(s)][r]);
                dp.step(sgd);
                ++completed[r];
            }
        });
    });
    for (int r = 0; r < n; ++r) {
        INFO("rank " << r << ": " << o[std::size_t(r)].what);
        CHECK(completed[std::size_t(r)] == 2); // steps 0 and 1 passed the check
        CHECK(kind_name(o[std::size_t(r)].k) == std::string(kind_name(kind::mismatch)));
        CHECK_THAT(o[std::size_t(r)].what,
                   Contains("replicas differ after 3 iterations: parameter 5 (fc1.bias) differs from rank 0's; "
                            "ranks that differ: 2"));
    }
}

TEST_CASE("options that decide the collectives must agree, and bad ones are refused by name", "[torch]")
{
    constexpr int n = 2;
    std::vector<lenet> models = replicas(n);
    std::vector<outcome> o(n);
    local_group group(n);
    group.run([&](local_communicator& comm) {
        gradsync::data_parallel_options options;
        options.uneven_inputs = comm.rank() == 1;
        record(o[std::size_t(comm.rank())], false, [&] {
            gradsync::data_parallel<float, local_communicator> dp(comm, *models[std::size_t(comm.rank())], options);
        });
    });
    for (const outcome& r : o) {
        INFO(r.what);
        CHECK(kind_name(r.k) == std::string(kind_name(kind::mismatch)));
        CHECK_THAT(r.what, Contains("ranks disagree on data_parallel_options::uneven_inputs: 0 on rank 0, 1 on rank 1"));
    }
    struct bad {
        gradsync::data_parallel_options options;
        const char* says;
    };
    std::vector<bad> cases(3);
    cases[0].options.accumulate = 0;
    cases[0].says = "data_parallel_options::accumulate is 0; it must be at least 1";
    cases[1].options.local_steps = 2;
    cases[1].says = "local_steps needs reduce = reduction_target::model_change";
    cases[2].options.check_every = -1;
    cases[2].says = "data_parallel_options::check_every is -1";
    for (const bad& c : cases) {
        outcome refused;
        local_group one(1);
        one.run([&](local_communicator& comm) {
            record(refused, false, [&] { gradsync::data_parallel<float, local_communicator> dp(comm, *models[0], c.options); });
        });
        INFO(refused.what);
        CHECK(kind_name(refused.k) == std::string(kind_name(kind::usage)));
        CHECK_THAT(refused.what, Contains(c.says));
    }
}
