// The synthetic classification task: inputs x ~ N(0, I), labels from a random "teacher"
// network, argmax of W2 tanh(W1 x) + c. The tanh layer bends the class boundaries, so no
// linear classifier separates the classes (softmax regression reaches about 70% test
// accuracy on the default task, the trainer's MLP about 85%); a fraction of the training
// labels is replaced by a uniformly drawn class (label noise), so the training set is not
// separable by the teacher either. Validation and test labels are the teacher's own, so
// their accuracy measures how well a model learned the teacher function. The validation
// set is for choosing hyper-parameters; the test set only reports.
//
// The teacher's output offsets c are set from a separate sample so that every class holds
// about the same share of the inputs. Everything is drawn from one seed: the same
// task_options give bit-identical data on every run, rank and platform.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <gradsync/core/error.hpp>

#include "random.hpp"

namespace trainer {

struct task_options {
    std::size_t inputs = 8;
    std::size_t teacher_hidden = 32;
    std::size_t classes = 10;
    std::size_t train_samples = 16384;
    std::size_t validation_samples = 4096;
    std::size_t test_samples = 4096;
    double label_noise = 0.1;  // share of training labels replaced by a random class
    double teacher_gain = 2.0; // scale of the teacher's hidden pre-activations: larger bends more
    std::uint64_t seed = 1;
};

// Row-major samples: features().size() == size() * inputs.
class dataset {
public:
    dataset(std::size_t inputs, std::size_t classes) : inputs_(inputs), classes_(classes) {}

    void add(std::span<const float> x, std::uint32_t label)
    {
        features_.insert(features_.end(), x.begin(), x.end());
        labels_.push_back(label);
    }

    std::size_t size() const noexcept { return labels_.size(); }
    std::size_t inputs() const noexcept { return inputs_; }
    std::size_t classes() const noexcept { return classes_; }
    std::span<const float> sample(std::size_t i) const noexcept
    {
        return std::span<const float>(features_).subspan(i * inputs_, inputs_);
    }
    std::uint32_t label(std::size_t i) const noexcept { return labels_[i]; }

private:
    std::size_t inputs_;
    std::size_t classes_;
    std::vector<float> features_;
    std::vector<std::uint32_t> labels_;
};

struct task {
    dataset train;
    dataset validation;
    dataset test;
};

class teacher {
public:
    teacher(const task_options& o, random_source& rng)
        : o_(o), w1_(o.teacher_hidden * o.inputs), w2_(o.classes * o.teacher_hidden), offset_(o.classes, 0.0)
    {
        for (double& w : w1_)
            w = rng.normal() * o.teacher_gain / std::sqrt(double(o.inputs));
        for (double& w : w2_)
            w = rng.normal() / std::sqrt(double(o.teacher_hidden));
        balance(rng);
    }

    std::vector<double> logits(std::span<const float> x) const
    {
        std::vector<double> h(o_.teacher_hidden), z(offset_);
        for (std::size_t j = 0; j < h.size(); ++j) {
            double s = 0;
            for (std::size_t i = 0; i < x.size(); ++i)
                s += w1_[j * x.size() + i] * double(x[i]);
            h[j] = std::tanh(s);
        }
        for (std::size_t c = 0; c < z.size(); ++c)
            for (std::size_t j = 0; j < h.size(); ++j)
                z[c] += w2_[c * h.size() + j] * h[j];
        return z;
    }

    std::uint32_t label(std::span<const float> x) const
    {
        const std::vector<double> z = logits(x);
        return std::uint32_t(std::max_element(z.begin(), z.end()) - z.begin());
    }

private:
    // Nudges the offsets towards equal class shares: each round raises the offset of
    // classes below their share and lowers the others, by an amount that shrinks.
    void balance(random_source& rng)
    {
        const std::size_t n = 4096;
        std::vector<std::vector<double>> z(n);
        std::vector<float> x(o_.inputs);
        for (auto& row : z) {
            for (float& v : x)
                v = float(rng.normal());
            row = logits(x);
        }
        for (int round = 0; round < 200; ++round) {
            std::vector<std::size_t> count(o_.classes, 0);
            for (const auto& row : z) {
                std::size_t best = 0;
                for (std::size_t c = 1; c < o_.classes; ++c)
                    if (row[c] + offset_[c] > row[best] + offset_[best])
                        best = c;
                ++count[best];
            }
            const double step = 0.5 / (1.0 + round / 10.0);
            for (std::size_t c = 0; c < o_.classes; ++c) {
                const double share = double(count[c]) * double(o_.classes) / double(n);
                offset_[c] += step * (1.0 - share);
            }
        }
    }

    task_options o_;
    std::vector<double> w1_, w2_, offset_;
};

inline task make_task(const task_options& o)
{
    if (o.inputs == 0 || o.teacher_hidden == 0 || o.classes < 2 || o.train_samples == 0 ||
        o.validation_samples == 0 || o.test_samples == 0)
        throw gradsync::usage_error("trainer::make_task: the input and teacher widths and the train, validation and "
                                    "test sample counts must be positive, and there must be at least 2 classes");
    if (!(o.label_noise >= 0 && o.label_noise <= 1))
        throw gradsync::usage_error("trainer::make_task: label noise " + std::to_string(o.label_noise) +
                                    " is not a share between 0 and 1");
    random_source rng(o.seed);
    const teacher t(o, rng);
    task result{dataset(o.inputs, o.classes), dataset(o.inputs, o.classes), dataset(o.inputs, o.classes)};
    std::vector<float> x(o.inputs);
    const auto draw = [&](dataset& d, std::size_t n, double noise) {
        for (std::size_t i = 0; i < n; ++i) {
            for (float& v : x)
                v = float(rng.normal());
            std::uint32_t y = t.label(x);
            if (noise > 0 && rng.uniform() < noise)
                y = std::uint32_t(rng.below(o.classes));
            d.add(x, y);
        }
    };
    draw(result.train, o.train_samples, o.label_noise);
    draw(result.validation, o.validation_samples, 0);
    draw(result.test, o.test_samples, 0);
    return result;
}

} // namespace trainer
