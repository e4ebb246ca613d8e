// The trainer's self-check (train_demo --self-check; CTest runs it). Every check compares
// the trainer with a reference computed plainly here:
//   gradient      backward() against central differences of the loss, for every parameter
//                 of a small fixed network;
//   hand-over     backward() hands layers L-1 ... 0 over once each, as spans of the right
//                 layer of the gradient buffer;
//   data parallel one step of 4 thread ranks through the synchronizer with Sum, for one
//                 group per layer, one group, and a mixed plan: every rank holds the sum
//                 of the 4 local-batch gradients, each computed alone on a fresh replica,
//                 and the ranks' weights are bitwise identical after the update;
//   task          the same options give the same data, labels are in range, no class is
//                 rarer than half its share, and epoch orders are permutations.
// Prints one line per check and returns whether all passed.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include <gradsync/comm/local/local.hpp>
#include <gradsync/planner/profile.hpp>
#include <gradsync/planner/single.hpp>
#include <gradsync/planner/wfbp.hpp>
#include <gradsync/policy/sum.hpp>
#include <gradsync/runtime/synchronizer.hpp>

#include "dataset.hpp"
#include "mlp.hpp"
#include "random.hpp"
#include "replica.hpp"
#include "train.hpp"

namespace trainer {

namespace detail {

inline bool report_check(const char* name, const std::string& failure)
{
    if (failure.empty())
        std::printf("  ok      %s\n", name);
    else
        std::printf("  FAILED  %s: %s\n", name, failure.c_str());
    return failure.empty();
}

inline std::string check_gradient()
{
    mlp m({5, 7, 6, 3}, 3);
    random_source rng(5);
    for (float& p : m.parameters())
        p += float(0.1 * rng.normal());
    const std::size_t batch = 4;
    std::vector<float> x(batch * 5);
    for (float& v : x)
        v = float(rng.normal());
    const std::vector<std::uint32_t> y{0, 1, 2, 1};
    std::vector<float> grad(m.parameter_count()), scratch(m.parameter_count());
    const auto loss = [&](std::vector<float>& g) {
        m.forward(x, batch);
        return m.backward(y, g, [](std::size_t, std::span<float>) {});
    };
    loss(grad);
    const float eps = 1e-2f;
    for (std::size_t i = 0; i < m.parameter_count(); ++i) {
        const float keep = m.parameters()[i];
        m.parameters()[i] = keep + eps;
        const double up = loss(scratch);
        m.parameters()[i] = keep - eps;
        const double down = loss(scratch);
        m.parameters()[i] = keep;
        const double numeric = (up - down) / (2.0 * double(eps));
        if (std::abs(numeric - double(grad[i])) > 1e-3 + 1e-2 * std::abs(numeric))
            return "parameter " + std::to_string(i) + ": backward gives " + std::to_string(grad[i]) +
                ", central differences " + std::to_string(numeric);
    }
    return {};
}

inline std::string check_hand_over()
{
    mlp m({4, 6, 5, 3}, 2);
    std::vector<float> x(2 * 4, 0.5f), grad(m.parameter_count());
    const std::vector<std::uint32_t> y{1, 2};
    std::vector<std::size_t> order;
    std::string failure;
    m.forward(x, 2);
    m.backward(y, grad, [&](std::size_t l, std::span<float> g) {
        order.push_back(l);
        if (l >= m.layer_sizes().size() || g.data() != m.layer(std::span<float>(grad), l).data() ||
            g.size() != m.layer_sizes()[l])
            failure = "layer " + std::to_string(l) + " was handed over with the wrong span";
    });
    std::vector<std::size_t> expected(m.layer_sizes().size());
    for (std::size_t i = 0; i < expected.size(); ++i)
        expected[i] = expected.size() - 1 - i;
    if (failure.empty() && order != expected)
        failure = "layers were not handed over exactly once each, last layer first";
    return failure;
}

inline std::string check_data_parallel(const task& data)
{
    const std::vector<std::size_t> widths{data.train.inputs(), 24, 40, 12, data.train.classes()};
    const std::size_t ranks = 4, local_batch = 8;
    const sgd_options opt{0.05, 0.9};
    const std::size_t layers = 2 * (widths.size() - 1);
    const std::vector<std::vector<std::vector<std::size_t>>> plans{
        gradsync::planner::wfbp(gradsync::planner::profile(layers)),
        gradsync::planner::single(gradsync::planner::profile(layers)),
        {{5, 6, 7}, {1, 2, 3, 4}, {0}}};
    const std::vector<std::size_t> order = epoch_order(data.train.size(), 9, 0);
    const auto local = [&](std::size_t r) {
        return std::span<const std::size_t>(order).subspan(r * local_batch, local_batch);
    };

    // Reference: each local gradient on a fresh replica alone, summed in double.
    std::vector<double> sum;
    local_only none;
    for (std::size_t r = 0; r < ranks; ++r) {
        replica one(widths, 4, opt);
        one.step(data.train, local(r), none, 0.0);
        sum.resize(one.gradient().size());
        for (std::size_t i = 0; i < sum.size(); ++i)
            sum[i] += double(one.gradient()[i]);
    }

    for (std::size_t p = 0; p < plans.size(); ++p) {
        std::vector<std::vector<float>> grads(ranks), weights(ranks);
        gradsync::local_group group{int(ranks)};
        group.run([&](gradsync::local_communicator& comm) {
            const std::size_t r = std::size_t(comm.rank());
            replica mine(widths, 4, opt);
            gradsync::synchronizer<float, gradsync::local_communicator, gradsync::sum> sync(
                comm, mine.model().layer_sizes(), plans[p]);
            mine.step(data.train, local(r), sync, 0.0);
            grads[r].assign(mine.gradient().begin(), mine.gradient().end());
            weights[r].assign(mine.model().parameters().begin(), mine.model().parameters().end());
        });
        double scale = 0;
        for (double v : sum)
            scale = std::max(scale, std::abs(v));
        for (std::size_t r = 0; r < ranks; ++r) {
            if (weights[r] != weights[0])
                return "plan " + std::to_string(p) + ": rank " + std::to_string(r) + "'s weights differ from rank 0's";
            for (std::size_t i = 0; i < sum.size(); ++i)
                if (std::abs(double(grads[r][i]) - sum[i]) > 1e-5 * scale)
                    return "plan " + std::to_string(p) + ": rank " + std::to_string(r) + " holds " +
                        std::to_string(grads[r][i]) + " for gradient element " + std::to_string(i) +
                        ", the sum of the local gradients is " + std::to_string(sum[i]);
        }
    }
    return {};
}

inline std::string check_task(const task_options& o)
{
    const task a = make_task(o), b = make_task(o);
    for (const auto& [x, y] : {std::pair{&a.train, &b.train}, std::pair{&a.validation, &b.validation},
                               std::pair{&a.test, &b.test}})
        for (std::size_t i = 0; i < x->size(); ++i)
            if (x->label(i) != y->label(i) || !std::ranges::equal(x->sample(i), y->sample(i)))
                return "two tasks made from the same options differ at sample " + std::to_string(i);
    std::vector<std::size_t> count(o.classes, 0);
    for (std::size_t i = 0; i < a.test.size(); ++i) {
        if (a.test.label(i) >= o.classes)
            return "test label " + std::to_string(a.test.label(i)) + " is out of range";
        ++count[a.test.label(i)];
    }
    for (std::size_t c = 0; c < o.classes; ++c)
        if (count[c] * o.classes * 2 < a.test.size())
            return "class " + std::to_string(c) + " holds only " + std::to_string(count[c]) + " of " +
                std::to_string(a.test.size()) + " test samples";
    for (std::size_t epoch : {0, 1, 7}) {
        std::vector<std::size_t> e = epoch_order(a.train.size(), 3, epoch);
        std::sort(e.begin(), e.end());
        for (std::size_t i = 0; i < e.size(); ++i)
            if (e[i] != i)
                return "the order of epoch " + std::to_string(epoch) + " is not a permutation";
    }
    return {};
}

} // namespace detail

inline bool self_check(task_options o)
{
    o.train_samples = 512;
    o.validation_samples = 64;
    o.test_samples = 2048;
    const task data = make_task(o);
    bool ok = detail::report_check("gradient: backward matches central differences", detail::check_gradient());
    ok &= detail::report_check("hand-over: layers L-1 ... 0, once each", detail::check_hand_over());
    ok &= detail::report_check("data parallel: 4 ranks with Sum give the sum of the local gradients",
                               detail::check_data_parallel(data));
    ok &= detail::report_check("task: deterministic, balanced, permutations", detail::check_task(o));
    return ok;
}

} // namespace trainer
