// train_demo's command line. Every option has a default; the defaults are the README's
// configuration. A bad option or value is a usage_error naming it.
#pragma once

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <gradsync/core/error.hpp>

#include "dataset.hpp"
#include "schedule_study.hpp"
#include "train.hpp"

namespace trainer {

struct demo_options {
    std::string study = "all"; // all, adasum, schedule, lr
    bool self_check = false;
    bool help = false;
    std::vector<int> ranks{1, 8, 16, 32};
    std::vector<double> lr_grid{0.005, 0.01, 0.02, 0.05};
    int schedule_ranks = 2;
    std::string out = "train_demo_out";
    task_options task;
    train_options train{{8, 256, 256, 128, 64, 16, 10}, 10, 16, {0.01, 0.9}, 7, 11};
    schedule_options schedule;
};

inline const char* demo_usage =
    "usage: train_demo [options]\n"
    "  --study all|adasum|schedule|lr  which study to run (all: adasum, then schedule)  [all]\n"
    "  --self-check                    check gradients, data parallelism and the task, then exit\n"
    "  --out DIR                       where profile.csv and timeline.svg go  [train_demo_out]\n"
    "training (both studies):\n"
    "  --widths W0,W1,...              layer widths, inputs first, classes last  [8,256,256,128,64,16,10]\n"
    "  --epochs N                      [10]\n"
    "  --local-batch N                 samples per rank and step  [16]\n"
    "  --lr X                          base learning rate (cosine schedule over the run)  [0.01]\n"
    "  --momentum X                    [0.9]\n"
    "  --seed N                        task seed  [1]\n"
    "  --train-samples N, --test-samples N, --label-noise X  [16384, 4096, 0.1]\n"
    "adasum study:\n"
    "  --ranks N,N,...                 rank counts (threads; under mpiexec: the world size)  [1,8,16,32]\n"
    "lr study (1 rank, accuracy on the validation set):\n"
    "  --lr-grid X,X,...               [0.005,0.01,0.02,0.05]\n"
    "schedule study:\n"
    "  --schedule-ranks N              ranks as threads (under mpiexec: the world size)  [2]\n"
    "  --schedule-batch N              samples per rank and step  [256]\n"
    "  --alpha SECONDS                 emulated latency per message  [0.002]\n"
    "  --beta SECONDS_PER_BYTE         emulated time per byte  [5e-08]\n"
    "  --rounds N                      rounds in which the plans take turns  [5]\n"
    "  --steps N                       measured steps of each plan per round  [5]\n";

// Ranks run as threads; far more than cores only measures the scheduler.
inline constexpr int max_ranks = 256;

namespace detail {

[[noreturn]] inline void bad_value(std::string_view option, std::string_view value, const char* what)
{
    throw gradsync::usage_error("train_demo: " + std::string(option) + " '" + std::string(value) + "': " + what);
}

template <class T>
T parse_number(std::string_view option, std::string_view text)
{
    T v{};
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || text.empty())
        bad_value(option, text, "not a number");
    if constexpr (std::is_floating_point_v<T>) {
        if (!std::isfinite(v) || v < 0)
            bad_value(option, text, "must be finite and non-negative");
    }
    return v;
}

inline std::size_t parse_positive(std::string_view option, std::string_view text)
{
    const auto v = parse_number<std::size_t>(option, text);
    if (v == 0)
        bad_value(option, text, "must be at least 1");
    return v;
}

template <class T>
std::vector<T> parse_list(std::string_view option, std::string_view text)
{
    std::vector<T> out;
    for (std::size_t start = 0;;) {
        const std::size_t comma = std::min(text.find(',', start), text.size());
        out.push_back(parse_number<T>(option, text.substr(start, comma - start)));
        if (comma == text.size())
            return out;
        start = comma + 1;
    }
}

} // namespace detail

inline demo_options parse_demo_options(int argc, const char* const* argv)
{
    constexpr std::array<std::string_view, 19> valued{
        "--study",  "--out",   "--widths",         "--epochs",         "--local-batch", "--lr",     "--momentum",
        "--seed",   "--train-samples", "--test-samples", "--label-noise", "--ranks",     "--lr-grid",
        "--schedule-ranks", "--schedule-batch", "--alpha", "--beta", "--rounds", "--steps"};
    demo_options o;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg == "--self-check") {
            o.self_check = true;
            continue;
        }
        if (arg == "--help" || arg == "-h") {
            o.help = true;
            continue;
        }
        if (std::find(valued.begin(), valued.end(), arg) == valued.end())
            throw gradsync::usage_error("train_demo: unknown option '" + std::string(arg) + "' (see --help)");
        if (i + 1 >= argc)
            throw gradsync::usage_error("train_demo: " + std::string(arg) + " needs a value (see --help)");
        const std::string_view v = argv[++i];
        using detail::parse_number, detail::parse_positive;
        if (arg == "--study") {
            if (v != "all" && v != "adasum" && v != "schedule" && v != "lr")
                detail::bad_value(arg, v, "expected all, adasum, schedule or lr");
            o.study = v;
        } else if (arg == "--out") {
            o.out = v;
        } else if (arg == "--widths") {
            const auto w = detail::parse_list<std::size_t>(arg, v);
            if (w.size() < 2 || std::find(w.begin(), w.end(), std::size_t(0)) != w.end())
                detail::bad_value(arg, v, "needs at least an input and an output width, all positive");
            o.train.widths = w;
        } else if (arg == "--epochs") {
            o.train.epochs = parse_positive(arg, v);
        } else if (arg == "--local-batch") {
            o.train.local_batch = parse_positive(arg, v);
        } else if (arg == "--lr") {
            o.train.sgd.learning_rate = parse_number<double>(arg, v);
        } else if (arg == "--momentum") {
            o.train.sgd.momentum = parse_number<double>(arg, v);
        } else if (arg == "--seed") {
            o.task.seed = parse_number<std::uint64_t>(arg, v);
        } else if (arg == "--train-samples") {
            o.task.train_samples = parse_positive(arg, v);
        } else if (arg == "--test-samples") {
            o.task.test_samples = parse_positive(arg, v);
        } else if (arg == "--label-noise") {
            o.task.label_noise = parse_number<double>(arg, v);
        } else if (arg == "--ranks") {
            o.ranks = detail::parse_list<int>(arg, v);
            if (std::find_if(o.ranks.begin(), o.ranks.end(), [](int r) { return r < 1 || r > max_ranks; }) !=
                o.ranks.end())
                detail::bad_value(arg, v, "rank counts must be between 1 and 256");
        } else if (arg == "--lr-grid") {
            o.lr_grid = detail::parse_list<double>(arg, v);
        } else if (arg == "--schedule-ranks") {
            const std::size_t n = parse_positive(arg, v);
            if (n > std::size_t(max_ranks))
                detail::bad_value(arg, v, "must be between 1 and 256");
            o.schedule_ranks = int(n);
        } else if (arg == "--schedule-batch") {
            o.schedule.local_batch = parse_positive(arg, v);
        } else if (arg == "--alpha") {
            o.schedule.link.alpha = parse_number<double>(arg, v);
        } else if (arg == "--beta") {
            o.schedule.link.beta = parse_number<double>(arg, v);
        } else if (arg == "--rounds") {
            o.schedule.rounds = parse_positive(arg, v);
        } else { // --steps, the last of `valued`
            o.schedule.steps_per_round = parse_positive(arg, v);
        }
    }
    if (o.train.widths.front() != o.task.inputs)
        throw gradsync::usage_error("train_demo: --widths must start with the task's " +
                                    std::to_string(o.task.inputs) + " inputs");
    if (o.train.widths.back() != o.task.classes)
        throw gradsync::usage_error("train_demo: --widths must end with the task's " +
                                    std::to_string(o.task.classes) + " classes");
    return o;
}

} // namespace trainer
