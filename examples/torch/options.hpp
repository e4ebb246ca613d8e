// train_fashion_mnist's command line: one run's training options, the two studies' options,
// and their checks; a refused option prints the usage and exits with status 2.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "accuracy_study.hpp"
#include "schedule_study.hpp"

namespace fashion_mnist {

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

inline constexpr const char* usage =
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

[[noreturn]] inline void refuse(const std::string& what)
{
    std::fprintf(stderr, "train_fashion_mnist: %s\n%s", what.c_str(), usage);
    std::exit(2);
}

inline double number(std::string_view flag, const char* text)
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
inline std::vector<study_column> columns(const std::vector<std::string>& items)
{
    std::vector<study_column> out;
    for (const std::string& item : items) {
        const std::size_t colon = item.find(':');
        out.push_back({item.substr(0, colon), colon == std::string::npos ? "gradients" : item.substr(colon + 1)});
    }
    return out;
}

inline options parse(int argc, char** argv)
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

} // namespace fashion_mnist
