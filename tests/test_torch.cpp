// gradsync::data_parallel (<gradsync/torch.hpp>) over local_group threads, one LeNet-5 per
// rank, against references computed without it: each rank's own backward (autograd on its
// own, no hooks), then every group of the plan in effect reduced by a plain reducer of the
// group's layer sizes. Bit for bit for sum, average and Adasum on 1..8 ranks, while measuring
// (one group per layer) and after planning; every hook fires once per backward; replicas stay
// identical through SGD steps; modules that differ are refused on every rank, naming the
// first parameter that differs.
//
// One intra-op thread: each rank is a thread, and torch's pool would otherwise be shared and
// reorder nothing but the time. Rank code only records; CHECKs run on the main thread.
// libtorch first: it brings glog, whose CHECK macro Catch's must replace, not the other way.
#include "torch_harness.hpp"

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "outcome.hpp"

namespace {

using namespace gradsync_test;
using Catch::Matchers::Contains;

struct recorded {
    std::vector<std::vector<std::vector<float>>> reduced; // [step][rank]
    std::vector<gradsync::planner::merge_plan> plans;           // the plan each step ran
    std::vector<std::vector<std::uint64_t>> hooks;        // [rank] hook calls at the end
    std::vector<std::size_t> sizes;
};

// `use`, when not empty, is passed to use_plan() before the first step.
template <class Policy>
recorded run_data_parallel(int n, int steps, gradsync::data_parallel_options options,
                           const gradsync::planner::merge_plan& use = {})
{
    recorded rec;
    rec.reduced.assign(std::size_t(steps), std::vector<std::vector<float>>(std::size_t(n)));
    rec.plans.resize(std::size_t(steps));
    rec.hooks.resize(std::size_t(n));
    std::vector<lenet> models = replicas(n);
    const auto inputs = batches(steps, n);
    local_group group(n);
    group.run([&](local_communicator& comm) {
        const std::size_t r = std::size_t(comm.rank());
        gradsync::data_parallel<float, local_communicator, Policy> dp(comm, *models[r], options);
        if (!use.empty())
            dp.use_plan(use);
        for (int s = 0; s < steps; ++s) {
            dp.zero_grad();
            if (r == 0)
                rec.plans[std::size_t(s)] = dp.plan();
            backward(models[r], inputs[std::size_t(s)][r]);
            dp.synchronize();
            rec.reduced[std::size_t(s)][r] = gradients_of(models[r]);
        }
        rec.hooks[r].assign(dp.hook_calls().begin(), dp.hook_calls().end());
        if (r == 0)
            rec.sizes.assign(dp.layer_sizes().begin(), dp.layer_sizes().end());
    });
    return rec;
}

template <class Policy>
void check_against_reference(int n, const gradsync::data_parallel_options& options,
                             const gradsync::planner::merge_plan& use = {})
{
    constexpr int steps = 3;
    const recorded rec = run_data_parallel<Policy>(n, steps, options, use);
    std::vector<lenet> models = replicas(n);
    const auto inputs = batches(steps, n);
    for (int s = 0; s < steps; ++s) {
        std::vector<std::vector<float>> local;
        for (int r = 0; r < n; ++r) {
            for (torch::Tensor& p : models[std::size_t(r)]->parameters())
                p.mutable_grad() = torch::Tensor();
            backward(models[std::size_t(r)], inputs[std::size_t(s)][std::size_t(r)]);
            local.push_back(gradients_of(models[std::size_t(r)]));
        }
        const auto want = reduce_by_group<Policy>(local, rec.sizes, rec.plans[std::size_t(s)]);
        for (int r = 0; r < n; ++r) {
            INFO(Policy::name << ", " << n << " ranks, step " << s << ", rank " << r << ", "
                              << rec.plans[std::size_t(s)].size() << " groups");
            CHECK(same_bits(rec.reduced[std::size_t(s)][std::size_t(r)], want[std::size_t(r)]));
        }
    }
    for (const auto& h : rec.hooks)
        for (std::uint64_t calls : h)
            CHECK(calls == std::uint64_t(steps));
}


} // namespace

TEST_CASE("reduced gradients equal a per-group allreduce of the same gradients, bit for bit", "[torch]")
{
    gradsync::data_parallel_options options;
    options.measure_iterations = 2; // steps 0 and 1 one group per layer, step 2 planned
    options.cost = {5e-4, 1e-9};    // a slow link: the plan merges layers
    for (int n = 1; n <= 8; ++n) {
        check_against_reference<gradsync::sum>(n, options);
        check_against_reference<gradsync::average>(n, options);
        check_against_reference<gradsync::adasum>(n, options);
    }
}

TEST_CASE("the first plan merges layers when the link is slow, and a calibrated cost plans too", "[torch]")
{
    gradsync::data_parallel_options slow;
    slow.measure_iterations = 1;
    slow.cost = {1.0, 0.0}; // one allreduce costs a second: one group
    const recorded merged = run_data_parallel<gradsync::average>(2, 2, slow);
    CHECK(merged.plans[0].size() == merged.sizes.size()); // measuring: one group per layer
    CHECK(merged.plans[1].size() == 1);
    gradsync::data_parallel_options calibrated;
    calibrated.measure_iterations = 1;
    check_against_reference<gradsync::average>(2, calibrated);
}

TEST_CASE("use_plan() runs the plan given from the next iteration, and only between iterations", "[torch]")
{
    gradsync::data_parallel_options options;
    options.measure_iterations = 5; // would measure through every step but for use_plan()
    const gradsync::planner::merge_plan two{{5, 6, 7, 8, 9}, {0, 1, 2, 3, 4}};
    const recorded rec = run_data_parallel<gradsync::adasum>(3, 2, options, two);
    for (const gradsync::planner::merge_plan& p : rec.plans)
        CHECK(p == two);
    check_against_reference<gradsync::adasum>(3, options, two);

    std::vector<lenet> models = replicas(1);
    const auto inputs = batches(1, 1);
    outcome mid_iteration, bad_plan;
    local_group group(1);
    group.run([&](local_communicator& comm) {
        gradsync::data_parallel<float, local_communicator> dp(comm, *models[0]);
        gradsync_test::record(bad_plan, false, [&] { dp.use_plan({{0, 1}}); });
        dp.zero_grad();
        backward(models[0], inputs[0][0]);
        gradsync_test::record(mid_iteration, false, [&] { dp.use_plan(two); });
        dp.synchronize();
    });
    INFO(mid_iteration.what);
    CHECK_THAT(mid_iteration.what, Contains("use_plan() between iterations"));
    INFO(bad_plan.what);
    CHECK(kind_name(bad_plan.k) == std::string(kind_name(kind::usage)));
    CHECK_THAT(bad_plan.what, Contains("layers 2..9"));
}

// Each rank's own Adam step, then the changes reduced in one group and added to the
// parameters before the step: the reference for reduction_target::model_change.
template <class Policy>
void check_model_change(int n)
{
    constexpr int steps = 3;
    const auto inputs = batches(steps, n);
    const auto adam = [](lenet& m) { return torch::optim::Adam(m->parameters(), torch::optim::AdamOptions(1e-3)); };
    std::vector<lenet> models = replicas(n);
    std::vector<std::vector<std::vector<float>>> got(steps, std::vector<std::vector<float>>(std::size_t(n)));
    outcome synchronize_call, replan_call;
    std::vector<std::size_t> sizes;
    gradsync::planner::merge_plan plan;
    local_group group(n);
    group.run([&](local_communicator& comm) {
        const std::size_t r = std::size_t(comm.rank());
        torch::optim::Adam optimizer = adam(models[r]);
        gradsync::data_parallel_options options;
        options.reduce = gradsync::reduction_target::model_change;
        gradsync::data_parallel<float, local_communicator, Policy> dp(comm, *models[r], options);
        if (r == 0) {
            sizes.assign(dp.layer_sizes().begin(), dp.layer_sizes().end());
            plan = dp.plan();
        }
        for (int s = 0; s < steps; ++s) {
            dp.zero_grad();
            backward(models[r], inputs[std::size_t(s)][r]);
            if (s == 0 && r == 0) {
                gradsync_test::record(synchronize_call, false, [&] { dp.synchronize(); });
                gradsync_test::record(replan_call, false, [&] { dp.replan(); });
            }
            dp.step(optimizer);
            got[std::size_t(s)][r] = flat_of(models[r]->parameters());
        }
    });
    CHECK(plan.size() == 1);
    CHECK_THAT(synchronize_call.what, Contains("call step(optimizer), not synchronize()"));
    CHECK_THAT(replan_call.what, Contains("replan() between iterations"));

    std::vector<lenet> ref = replicas(n);
    std::vector<torch::optim::Adam> optimizers;
    for (lenet& m : ref)
        optimizers.push_back(adam(m));
    const std::vector<float> start = flat_of(ref[0]->parameters());
    for (int s = 0; s < steps; ++s) {
        std::vector<std::vector<torch::Tensor>> before(static_cast<std::size_t>(n));
        std::vector<std::vector<float>> change;
        for (int r = 0; r < n; ++r) {
            const std::vector<torch::Tensor> params = ref[std::size_t(r)]->parameters();
            for (const torch::Tensor& p : params) {
                p.mutable_grad() = torch::Tensor();
                before[std::size_t(r)].push_back(p.detach().clone());
            }
            backward(ref[std::size_t(r)], inputs[std::size_t(s)][std::size_t(r)]);
            optimizers[std::size_t(r)].step();
            std::vector<torch::Tensor> d;
            for (std::size_t i = 0; i < params.size(); ++i)
                d.push_back(params[i].detach().sub(before[std::size_t(r)][i]));
            change.push_back(flat_of(d));
        }
        const auto reduced = reduce_by_group<Policy>(change, sizes, plan);
        for (int r = 0; r < n; ++r) {
            torch::NoGradGuard no_grad;
            std::size_t at = 0;
            const std::vector<torch::Tensor> params = ref[std::size_t(r)]->parameters();
            for (std::size_t i = 0; i < params.size(); ++i) {
                float* d = const_cast<float*>(reduced[std::size_t(r)].data()) + at;
                params[i].copy_(before[std::size_t(r)][i]).add_(torch::from_blob(d, params[i].sizes()));
                at += std::size_t(params[i].numel());
            }
            INFO(Policy::name << ", " << n << " ranks, step " << s << ", rank " << r);
            CHECK(same_bits(got[std::size_t(s)][std::size_t(r)], flat_of(params)));
            CHECK(same_bits(got[std::size_t(s)][std::size_t(r)], got[std::size_t(s)][0]));
        }
    }
    CHECK(!same_bits(got[steps - 1][0], start));
}

TEST_CASE("model change: each rank's Adam step, the changes reduced and applied, bit for bit", "[torch]")
{
    for (int n = 1; n <= 4; ++n) {
        check_model_change<gradsync::adasum>(n);
        check_model_change<gradsync::average>(n);
    }
}

// The model change with each parameter's local step in its hook (overlap()) against the
// change after backward, both under one plan: the same bits, every step, every rank.
template <class Policy, class Optimizer, class Options>
void check_overlap(int n, const Options& optimizer_options, const gradsync::planner::merge_plan& plan)
{
    constexpr int steps = 3;
    const auto inputs = batches(steps, n);
    std::vector<std::vector<std::vector<std::vector<float>>>> got(2); // [overlapped][step][rank]
    for (int overlapped = 0; overlapped < 2; ++overlapped) {
        got[std::size_t(overlapped)].assign(steps, std::vector<std::vector<float>>(std::size_t(n)));
        std::vector<lenet> models = replicas(n);
        local_group group(n);
        group.run([&](local_communicator& comm) {
            const std::size_t r = std::size_t(comm.rank());
            Optimizer optimizer(models[r]->parameters(), optimizer_options);
            gradsync::data_parallel_options options;
            options.reduce = gradsync::reduction_target::model_change;
            gradsync::data_parallel<float, local_communicator, Policy> dp(comm, *models[r], options);
            if (overlapped)
                dp.overlap(optimizer);
            dp.use_plan(plan);
            for (int s = 0; s < steps; ++s) {
                dp.zero_grad();
                backward(models[r], inputs[std::size_t(s)][r]);
                dp.step(optimizer);
                got[std::size_t(overlapped)][std::size_t(s)][r] = flat_of(models[r]->parameters());
            }
        });
    }
    for (int s = 0; s < steps; ++s)
        for (int r = 0; r < n; ++r) {
            INFO(Policy::name << ", " << n << " ranks, " << plan.size() << " groups, step " << s << ", rank " << r);
            CHECK(same_bits(got[1][std::size_t(s)][std::size_t(r)], got[0][std::size_t(s)][std::size_t(r)]));
            CHECK(same_bits(got[1][std::size_t(s)][std::size_t(r)], got[1][std::size_t(s)][0]));
        }
}

TEST_CASE("model change overlapped with backward: each parameter's local step in its hook, the same bits",
          "[torch]")
{
    const gradsync::planner::merge_plan one{{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}};
    const gradsync::planner::merge_plan each = per_layer_plan(10);
    for (int n = 1; n <= 4; ++n)
        for (const gradsync::planner::merge_plan& plan : {one, each}) {
            check_overlap<gradsync::adasum, torch::optim::Adam>(n, torch::optim::AdamOptions(1e-3), plan);
            check_overlap<gradsync::adasum, torch::optim::SGD>(n, torch::optim::SGDOptions(0.05).momentum(0.9),
                                                               plan);
            check_overlap<gradsync::average, torch::optim::SGD>(n, torch::optim::SGDOptions(0.05).momentum(0.9),
                                                                plan);
        }
    std::vector<lenet> models = replicas(1);
    outcome gradients, other;
    local_group one_rank(1);
    one_rank.run([&](local_communicator& comm) {
        torch::optim::SGD sgd(models[0]->parameters(), torch::optim::SGDOptions(0.01));
        torch::optim::SGD another(models[0]->parameters(), torch::optim::SGDOptions(0.01));
        gradsync::data_parallel<float, local_communicator> plain(comm, *models[0]);
        record(gradients, false, [&] { plain.overlap(sgd); });
    });
    one_rank.run([&](local_communicator& comm) {
        torch::optim::SGD sgd(models[0]->parameters(), torch::optim::SGDOptions(0.01));
        torch::optim::SGD another(models[0]->parameters(), torch::optim::SGDOptions(0.01));
        gradsync::data_parallel_options options;
        options.reduce = gradsync::reduction_target::model_change;
        gradsync::data_parallel<float, local_communicator> dp(comm, *models[0], options);
        dp.overlap(sgd);
        dp.zero_grad();
        backward(models[0], batches(1, 1)[0][0]);
        record(other, false, [&] { dp.step(another); });
    });
    INFO(gradients.what);
    CHECK_THAT(gradients.what, Contains("overlap() is for reduce = reduction_target::model_change"));
    INFO(other.what);
    CHECK_THAT(other.what, Contains("step() with another optimizer than the one given to overlap()"));
}

TEST_CASE("replicas stay bitwise identical through SGD steps", "[torch]")
{
    constexpr int n = 4, steps = 4;
    for (bool adasum : {false, true}) {
        std::vector<lenet> models = replicas(n);
        const auto inputs = batches(steps, n);
        std::vector<std::vector<float>> params(n);
        local_group group(n);
        group.run([&](local_communicator& comm) {
            const std::size_t r = std::size_t(comm.rank());
            torch::optim::SGD sgd(models[r]->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
            const auto train = [&](auto& dp) {
                for (int s = 0; s < steps; ++s) {
                    dp.zero_grad();
                    backward(models[r], inputs[std::size_t(s)][r]);
                    dp.synchronize();
                    sgd.step();
                }
            };
            if (adasum) {
                gradsync::data_parallel<float, local_communicator, gradsync::adasum> dp(comm, *models[r]);
                train(dp);
            } else {
                gradsync::data_parallel<float, local_communicator, gradsync::average> dp(comm, *models[r]);
                train(dp);
            }
            params[r] = flat_of(models[r]->parameters());
        });
        const std::vector<float> start = flat_of(replicas(1)[0]->parameters());
        CHECK(!same_bits(params[0], start)); // they trained
        for (int r = 1; r < n; ++r) {
            INFO((adasum ? "adasum" : "average") << ", rank " << r);
            CHECK(same_bits(params[std::size_t(r)], params[0]));
        }
    }
}

TEST_CASE("a second backward before synchronize() is refused by the hooks", "[torch]")
{
    std::vector<lenet> models = replicas(1);
    const auto inputs = batches(2, 1);
    outcome second;
    local_group group(1);
    group.run([&](local_communicator& comm) {
        gradsync::data_parallel<float, local_communicator> dp(comm, *models[0]);
        dp.zero_grad();
        backward(models[0], inputs[0][0]);
        gradsync_test::record(second, false, [&] { backward(models[0], inputs[1][0]); });
    });
    INFO(second.what);
    CHECK_THAT(second.what, Contains("produced twice before synchronize()"));
}

TEST_CASE("modules that differ are refused on every rank, naming the first parameter that differs", "[torch]")
{
    struct difference {
        int fc1_out;
        bool fewer;
        std::string says;
    };
    for (const difference& d :
         {difference{100, false, "parameter 4 (fc1.weight) is Float [120, 400] on rank 0 and Float [100, 400] on rank 2"},
          difference{120, true, "rank 0 has 10 parameters that require a gradient, rank 2 has 8"}}) {
        constexpr int n = 3;
        std::vector<lenet> models = replicas(n);
        torch::manual_seed(1);
        models[2] = lenet(d.fc1_out);
        if (d.fewer)
            for (auto& p : models[2]->fc3->parameters())
                p.set_requires_grad(false);
        std::vector<outcome> o(n);
        local_group group(n);
        group.run([&](local_communicator& comm) {
            gradsync_test::record(o[std::size_t(comm.rank())], false, [&] {
                gradsync::data_parallel<float, local_communicator> dp(comm, *models[std::size_t(comm.rank())]);
            });
        });
        for (const outcome& r : o) {
            INFO(r.what);
            CHECK(kind_name(r.k) == std::string(kind_name(kind::mismatch)));
            CHECK_THAT(r.what, Contains(d.says));
        }
    }
    std::vector<outcome> wrong_type(1);
    local_group one(1);
    one.run([&](local_communicator& comm) {
        lenet m;
        m->to(torch::kDouble);
        gradsync_test::record(wrong_type[0], false,
                              [&] { gradsync::data_parallel<float, local_communicator> dp(comm, *m); });
    });
    INFO(wrong_type[0].what);
    CHECK(kind_name(wrong_type[0].k) == std::string(kind_name(kind::usage)));
    CHECK_THAT(wrong_type[0].what, Contains("parameter 0 (conv1.weight) is of type Double"));
}

TEST_CASE("the gradients lie in memory the ranks share, a grad kept outlives the data_parallel", "[torch][shared]")
{
    // Threads of one group share memory unless told not to; the flat buffer is then a
    // shared_buffer's slot, and a grad tensor holds it after the data_parallel is gone (a
    // read of unmapped memory would end the test). Ranks that disagree on sharing are refused.
    constexpr int n = 2;
    for (bool share : {true, false}) {
        std::vector<lenet> models = replicas(n);
        const auto inputs = batches(1, n);
        std::vector<int> shared(n, -1);
        std::vector<std::vector<float>> reduced(n), kept(n);
        local_group group(n);
        group.run([&](local_communicator& comm) {
            const std::size_t r = std::size_t(comm.rank());
            at::Tensor grad;
            {
                gradsync::data_parallel<float, local_communicator> dp(comm, *models[r], {},
                                                                      gradsync::automatic{.share_memory = share});
                shared[r] = dp.gradients_shared();
                dp.zero_grad();
                backward(models[r], inputs[0][r]);
                dp.synchronize();
                reduced[r] = gradients_of(models[r]);
                grad = models[r]->parameters().back().grad();
            }
            for (auto& p : models[r]->parameters())
                p.mutable_grad() = torch::Tensor();
            kept[r].assign(grad.data_ptr<float>(), grad.data_ptr<float>() + grad.numel());
        });
        for (std::size_t r = 0; r < n; ++r) {
            INFO("share_memory " << share << ", rank " << r);
            CHECK(shared[r] == int(share));
            CHECK(same_bits(kept[r], std::vector<float>(reduced[r].end() - std::ptrdiff_t(kept[r].size()),
                                                        reduced[r].end())));
            CHECK(same_bits(reduced[r], reduced[0]));
        }
    }
    std::vector<lenet> models = replicas(n);
    std::vector<outcome> o(n);
    local_group group(n);
    group.run([&](local_communicator& comm) {
        gradsync_test::record(o[std::size_t(comm.rank())], false, [&] {
            gradsync::data_parallel<float, local_communicator> dp(
                comm, *models[std::size_t(comm.rank())], {}, gradsync::automatic{.share_memory = comm.rank() == 0});
        });
    });
    for (const outcome& r : o) {
        INFO(r.what);
        CHECK(kind_name(r.k) == std::string(kind_name(kind::mismatch)));
        CHECK_THAT(r.what, Contains("whether the algorithm shares memory"));
    }
}
