// The accuracy study of train_fashion_mnist (docs/torch.md, "The study"): one run per column
// (a policy and what it reduces: the gradients or the model change), rank count and seed with
// the schedule unchanged, then a table of the test accuracy (mean and range over the seeds) on
// stdout, every run in runs.csv and accuracy.svg in the output directory. At one rank every
// policy reduces a vector to itself, so one rank runs once per seed and reduction, as Average.
// (The model change differs from the gradients' run only by rounding: x0 + (x1 - x0) need not
// be x1 in floating point.)
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "../line_chart.hpp"
#include "output.hpp"

namespace gradsync_examples {

// A column of the table: a policy (sum, average, adasum) and what it reduces (gradients,
// model_change).
struct study_column {
    std::string policy, reduce;
};

struct accuracy_setting {
    int epochs = 0, batch = 0; // for the titles
    double lr = 0;
    std::vector<std::uint64_t> seeds, rank_counts;
    std::vector<study_column> columns;
    std::filesystem::path out;
};

struct run_outcome {
    double test_accuracy = 0, train_loss = 0, seconds = 0;
};

// run(column, ranks, seed) trains one run and returns rank 0's outcome.
using run_function = std::function<run_outcome(const study_column&, int, std::uint64_t)>;

namespace accuracy_detail {

inline std::string title(const study_column& c)
{
    const std::string policy = c.policy == "sum" ? "Sum" : c.policy == "average" ? "Average" : "Adasum";
    return c.reduce == "model_change" ? policy + " (model change)" : policy;
}

struct spread {
    double mean = 0, low = 0, high = 0; // percent
};

inline spread spread_of(const std::vector<double>& v)
{
    double sum = 0;
    for (double a : v)
        sum += a;
    return {100 * sum / double(v.size()), 100 * *std::min_element(v.begin(), v.end()),
            100 * *std::max_element(v.begin(), v.end())};
}

using table = std::map<std::pair<std::string, std::uint64_t>, spread>; // (title, ranks)

// Mean test accuracy against ranks, one line per column (the policy's colour, dashed for the
// model change), whiskers from the lowest seed to the highest.
inline void write_chart(const table& t, const accuracy_setting& s, const std::filesystem::path& file)
{
    line_chart chart;
    chart.title = "LeNet on Fashion-MNIST, " + std::to_string(s.epochs) + " epochs, the one-rank schedule at every N";
    chart.x_label = "ranks N (batch " + std::to_string(s.batch) + " per rank)";
    chart.y_label = "test accuracy (%), mean and range over seeds";
    for (std::uint64_t n : s.rank_counts)
        chart.x.push_back(double(n));
    const std::map<std::string, const char*> colours{{"sum", "#d62728"}, {"average", "#1f77b4"}, {"adasum", "#2ca02c"}};
    for (const study_column& c : s.columns) {
        chart_series line{title(c), colours.at(c.policy), {}, c.reduce == "model_change"};
        for (std::uint64_t n : s.rank_counts) {
            const spread& a = t.at({title(c), n});
            line.y.push_back(a.mean);
            line.low.push_back(a.low);
            line.high.push_back(a.high);
        }
        chart.series.push_back(std::move(line));
    }
    std::ofstream out = open_output(file);
    write_line_chart_svg(out, chart);
    close_output(out, file);
}

} // namespace accuracy_detail

inline void accuracy_study(const accuracy_setting& s, const run_function& run)
{
    std::map<std::pair<std::string, std::uint64_t>, std::vector<double>> accuracy; // per seed
    const std::filesystem::path csv_file = s.out / "runs.csv", chart_file = s.out / "accuracy.svg";
    std::ofstream csv = open_output(csv_file);
    csv << "policy,reduce,ranks,seed,test_accuracy,train_loss,seconds\n";
    const std::size_t total = s.seeds.size() * s.rank_counts.size() * s.columns.size();
    std::size_t done = 0;
    for (std::uint64_t seed : s.seeds)
        for (std::uint64_t n : s.rank_counts) {
            // At one rank, the run of a reduction stands for every column of that reduction.
            const auto stands_for = [n](const study_column& run, const study_column& c) {
                return c.reduce == run.reduce && (n == 1 || c.policy == run.policy);
            };
            std::vector<study_column> runs = s.columns;
            if (n == 1) {
                runs.clear();
                for (const study_column& c : s.columns)
                    if (std::none_of(runs.begin(), runs.end(), [&](const study_column& r) { return stands_for(r, c); }))
                        runs.push_back({"average", c.reduce});
            }
            for (const study_column& column : runs) {
                const run_outcome r = run(column, int(n), seed);
                for (const study_column& c : s.columns) {
                    if (!stands_for(column, c))
                        continue;
                    accuracy[{accuracy_detail::title(c), n}].push_back(r.test_accuracy);
                    csv << c.policy << ',' << c.reduce << ',' << n << ',' << seed << ',' << r.test_accuracy << ','
                        << r.train_loss << ',' << r.seconds << '\n';
                    ++done;
                }
                std::printf("study: %zu of %zu results\n", done, total);
            }
        }
    close_output(csv, csv_file);

    accuracy_detail::table t;
    for (const auto& [key, per_seed] : accuracy)
        t[key] = accuracy_detail::spread_of(per_seed);
    std::printf("\ntest accuracy (%%) after %d epochs, peak rate %g, batch %d per rank: mean (min..max) over seeds",
                s.epochs, s.lr, s.batch);
    for (std::uint64_t seed : s.seeds)
        std::printf(" %llu", static_cast<unsigned long long>(seed));
    std::printf("\n\n| ranks |");
    for (const study_column& c : s.columns)
        std::printf(" %s |", accuracy_detail::title(c).c_str());
    std::printf("\n|---:|");
    for (std::size_t k = 0; k < s.columns.size(); ++k)
        std::printf("---|");
    std::printf("\n");
    for (std::uint64_t n : s.rank_counts) {
        std::printf("| %llu |", static_cast<unsigned long long>(n));
        for (const study_column& c : s.columns) {
            const accuracy_detail::spread& a = t.at({accuracy_detail::title(c), n});
            std::printf(" %.2f (%.2f..%.2f) |", a.mean, a.low, a.high);
        }
        std::printf("\n");
    }
    accuracy_detail::write_chart(t, s, chart_file);
    std::printf("\nthe runs: %s; the chart: %s\n", csv_file.string().c_str(), chart_file.string().c_str());
}

} // namespace gradsync_examples
