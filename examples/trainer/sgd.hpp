// Stochastic gradient descent with heavy-ball momentum and a cosine learning-rate
// schedule over the run:
//     v <- momentum v + g,   w <- w - lr(p) v,   lr(p) = lr0 (1 + cos(pi p)) / 2
// where p in [0, 1] is the share of the run's training samples already seen. The schedule
// is a function of data seen, not of steps, so one schedule serves every rank count: with
// N ranks a step sees N local batches and p advances N times as fast per step.
//
// A velocity below 1e-30 is set to 0: it moves no weight, and once a network has died
// (every ReLU off, every gradient 0) its decaying velocity would otherwise sink into the
// subnormal range, where x86 arithmetic is about a hundred times slower.
#pragma once

#include <cmath>
#include <cstddef>
#include <numbers>
#include <span>
#include <string>
#include <vector>

#include <gradsync/core/error.hpp>

namespace trainer {

struct sgd_options {
    double learning_rate = 0.05;
    double momentum = 0.9;
};

inline double cosine_learning_rate(double base, double progress)
{
    return base * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

class sgd {
public:
    sgd(std::size_t parameters, sgd_options o) : o_(o), velocity_(parameters, 0.0f)
    {
        if (!(o.learning_rate > 0 && std::isfinite(o.learning_rate) && o.momentum >= 0 && o.momentum < 1))
            throw gradsync::usage_error("trainer::sgd: learning rate " + std::to_string(o.learning_rate) +
                                        " must be positive and finite, momentum " + std::to_string(o.momentum) +
                                        " in [0, 1)");
    }

    void step(std::span<float> params, std::span<const float> grad, double progress)
    {
        const float lr = float(cosine_learning_rate(o_.learning_rate, progress));
        const float mu = float(o_.momentum);
        for (std::size_t i = 0; i < params.size(); ++i) {
            const float v = mu * velocity_[i] + grad[i];
            velocity_[i] = std::abs(v) < 1e-30f ? 0.0f : v;
            params[i] -= lr * velocity_[i];
        }
    }

private:
    sgd_options o_;
    std::vector<float> velocity_;
};

} // namespace trainer
