// data_parallel's model change (Adasum on each rank's Adam step, the Adasum paper's Figure 3)
// two ways, in one interleaved run: after_backward, the local step and the changes' reduction
// after backward (one group); overlapped, each parameter's local step in its hook and the
// changes' merged reductions overlapping backward (overlap(), planned from its own measured
// profile). Two ranks as threads of this process, LeNet (examples/torch/lenet.hpp) with a
// batch of GRADSYNC_BENCH_BATCH images each (32 by default), over an emulated link (delay_communicator: GRADSYNC_BENCH_ALPHA seconds
// per message, 1e-3 by default, and GRADSYNC_BENCH_BETA seconds per byte, 1e-7: 10 MB/s, the
// schedule study's link, on which communication outweighs LeNet's backward).
//
// Google Benchmark runs on rank 0's thread; before each benchmark it tells rank 1 which side
// and how many steps (a barrier of the two threads), both make as many untimed steps first,
// and a step is timed from zero_grad() to the return of step(). Each side is registered once
// per repetition (GRADSYNC_BENCH_REPS, 7 by default), repetitions outermost, so the sides
// interleave in time; the closing table gives medians and ratio = after_backward's time /
// overlapped's time. Both sides are checked to keep the ranks' parameters bitwise equal.
#include <gradsync/torch.hpp>

#include <gradsync/comm/delay/delay.hpp>
#include <gradsync/comm/local/local.hpp>

#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "median_table.hpp"
#include "torch/lenet.hpp"

namespace {

using gradsync::delay_communicator;
using gradsync::local_communicator;
using link_comm = delay_communicator<local_communicator>;
using data_parallel = gradsync::data_parallel<float, link_comm, gradsync::adasum>;

constexpr int ranks = 2;
const std::vector<std::string> sides = {"after_backward", "overlapped"};

double env_or(const char* name, double fallback)
{
    const char* v = std::getenv(name);
    return v ? std::atof(v) : fallback;
}

// One rank's trainer for one side: its module, optimizer, data_parallel and a fixed batch.
struct trainer {
    trainer(link_comm& comm, bool overlapped, std::uint64_t seed, std::int64_t batch)
        : model(seed), adam(model->parameters(), torch::optim::AdamOptions(1e-3)),
          dp(comm, *model, options()), x(torch::randn({batch, 1, 28, 28})), y(torch::randint(0, 10, {batch}))
    {
        if (overlapped)
            dp.overlap(adam);
    }

    static gradsync::data_parallel_options options()
    {
        gradsync::data_parallel_options o;
        o.reduce = gradsync::reduction_target::model_change;
        o.measure_iterations = 5;
        return o;
    }

    void step()
    {
        dp.zero_grad();
        torch::nll_loss(model->forward(x), y).backward();
        dp.step(adam);
    }

    gradsync_examples::lenet model;
    torch::optim::Adam adam;
    data_parallel dp;
    torch::Tensor x, y;
};

struct command {
    std::size_t side = 0;
    benchmark::IterationCount warm = 0, steps = 0;
    bool quit = false;
};

command next;
std::barrier<> meet(ranks);
std::vector<std::vector<std::unique_ptr<trainer>>> trainers(ranks); // [rank][side]

void run_steps(std::size_t rank, std::size_t side, benchmark::IterationCount steps)
{
    for (benchmark::IterationCount i = 0; i < steps; ++i)
        trainers[rank][side]->step();
}

void bench_side(benchmark::State& state, std::size_t side)
{
    next = {side, gradsync_bench::warm_up_calls(state), state.max_iterations, false};
    meet.arrive_and_wait(); // rank 1 reads the command
    run_steps(0, side, next.warm);
    meet.arrive_and_wait();
    for (auto _ : state)
        trainers[0][side]->step();
    meet.arrive_and_wait();
}

std::vector<std::uint8_t> parameter_bytes(torch::nn::Module& m)
{
    std::vector<std::uint8_t> out;
    for (const torch::Tensor& p : m.parameters()) {
        const auto* b = static_cast<const std::uint8_t*>(p.data_ptr());
        out.insert(out.end(), b, b + p.numel() * p.element_size());
    }
    return out;
}

} // namespace

int main(int argc, char** argv)
{
    torch::set_num_threads(1);
    benchmark::Initialize(&argc, argv);
    const gradsync::emulated_link link{env_or("GRADSYNC_BENCH_ALPHA", 1e-3), env_or("GRADSYNC_BENCH_BETA", 1e-7)};
    const int repetitions = int(env_or("GRADSYNC_BENCH_REPS", 7));
    const auto batch = std::int64_t(env_or("GRADSYNC_BENCH_BATCH", 32));
    std::size_t model_bytes = 0;
    gradsync_bench::median_table table;
    bool same = true;
    std::string plan_text, profile_text;
    gradsync::local_group group(ranks);
    group.run([&](local_communicator& inner) {
        const std::size_t rank = std::size_t(inner.rank());
        link_comm comm(inner, link);
        torch::manual_seed(1); // the construction's broadcast would make them equal anyway
        for (std::size_t s = 0; s < sides.size(); ++s)
            trainers[rank].push_back(std::make_unique<trainer>(comm, s == 1, 1 + rank, batch));
        if (rank == 0) {
            for (const torch::Tensor& p : trainers[0][0]->model->parameters())
                model_bytes += std::size_t(p.numel()) * sizeof(float);
            for (int rep = 0; rep < repetitions; ++rep)
                for (std::size_t s = 0; s < sides.size(); ++s)
                    benchmark::RegisterBenchmark(gradsync_bench::bench_name(sides[s], model_bytes, rep).c_str(),
                                                 bench_side, s)
                        ->Iterations(20)
                        ->Unit(benchmark::kMillisecond)
                        ->UseRealTime();
            benchmark::RunSpecifiedBenchmarks(&table);
            next.quit = true;
            meet.arrive_and_wait();
        } else {
            for (;;) {
                meet.arrive_and_wait();
                const command c = next;
                if (c.quit)
                    break;
                run_steps(rank, c.side, c.warm);
                meet.arrive_and_wait();
                run_steps(rank, c.side, c.steps);
                meet.arrive_and_wait();
            }
        }
        if (rank == 0) {
            const data_parallel& dp = trainers[0][1]->dp;
            for (const std::vector<std::size_t>& g : dp.plan())
                plan_text += " " + std::to_string(g.back()) + ".." + std::to_string(g.front());
            for (const auto& layer : dp.profile())
                profile_text += " " + std::to_string(layer.backward_s * 1e3).substr(0, 5);
        }
        for (std::size_t s = 0; s < sides.size(); ++s) {
            meet.arrive_and_wait();
            const bool differs = parameter_bytes(*trainers[rank][s]->model) != parameter_bytes(*trainers[0][s]->model);
            meet.arrive_and_wait();
            if (differs)
                same = false;
        }
        trainers[rank].clear();
    });
    if (!same) {
        std::fprintf(stderr, "bench_torch_model_change: the ranks' parameters differ after the run\n");
        return 1;
    }
    std::printf("\nLeNet, %d ranks, batch %lld each, Adasum on the model change with Adam, link alpha %.3g s, "
                "beta %.3g s/B\n",
                ranks, static_cast<long long>(batch), link.alpha, link.beta);
    std::printf("overlapped's plan (groups of layers, communication order):%s\n", plan_text.c_str());
    std::printf("its measured profile (backward ms per layer):%s\n", profile_text.c_str());
    table.print(sides, "after_backward", {model_bytes}, 1.0);
    benchmark::Shutdown();
    return 0;
}
