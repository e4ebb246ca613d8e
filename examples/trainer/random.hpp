// A small deterministic random source (splitmix64). The standard distributions may differ
// between library implementations; these draws are the same everywhere, so the task, the
// initial weights and the sample order are identical on every platform and rank count.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numbers>

namespace trainer {

class random_source {
public:
    explicit random_source(std::uint64_t seed) : state_(seed) {}

    std::uint64_t next() noexcept
    {
        std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }

    // Uniform in [0, 1), 53 random bits.
    double uniform() noexcept { return double(next() >> 11) * 0x1.0p-53; }

    // Uniform integer in [0, n); n > 0. The modulo bias (n / 2^64) is far below anything
    // this program can observe.
    std::size_t below(std::size_t n) noexcept { return std::size_t(next() % n); }

    // Standard normal (Box-Muller; the second value is dropped to keep the stream simple).
    double normal() noexcept
    {
        const double u = 1.0 - uniform(); // (0, 1]: log stays finite
        return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * std::numbers::pi * uniform());
    }

private:
    std::uint64_t state_;
};

} // namespace trainer
