// tuned: measures six candidates over a reducer's first calls and keeps automatic's choice
// unless another candidate was measurably faster: automatic's three algorithms, each with
// its sends posted first and with its receives first; and, where the rule shares memory and
// the ranks can (one host), shared_memory as a seventh, which is then automatic's choice. How
// it measures and decides (rounds in alternating order, each candidate's median and a
// distribution-free 95 % interval, summed over the ranks so that every rank keeps the same
// one) is docs/algorithms.md, "tuned".
//
// Cost: the chosen candidate's (see its header), every call after the first C*rounds (C
// candidates, 6 or 7); those run the candidates in turn, then one allreduce of 3*C doubles on
// the call's tag.
//
// Preconditions: rounds >= 2 (else a usage_error on every rank; below 7 the interval covers
// the median less often than 95 %). Elementwise policies in host memory, the only row
// selector/plan_table.hpp gives it (Adasum's algorithms combine in different trees). The ring
// and shared memory round in other orders than the recursive algorithms (docs/semantics.md),
// so calls during tuning, and runs that keep different candidates, may round differently.
// Building it is collective where the rule shares memory (the shared region). Until it has
// chosen it holds every candidate's scratch (recursive doubling's two hold the whole vector
// each).
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include <gradsync/algorithm/recursive_doubling.hpp>
#include <gradsync/algorithm/recursive_halving.hpp>
#include <gradsync/algorithm/ring.hpp>
#include <gradsync/algorithm/shared_memory.hpp>
#include <gradsync/core/codes.hpp>
#include <gradsync/core/error.hpp>
#include <gradsync/core/hash.hpp>
#include <gradsync/plan/plan.hpp>
#include <gradsync/policy/sum.hpp>
#include <gradsync/selector/automatic.hpp>

namespace gradsync {

struct tuned {
    static constexpr std::uint32_t code = codes::tuned;
    static constexpr const char* name = "tuned";
    int rounds = 20;  // calls per candidate while tuning; at least 2
    automatic rule{}; // its choice stays unless another candidate is measurably faster

    // Its shared_memory candidate reads the data where it lies.
    bool reads_shared_buffer() const noexcept { return rule.reads_shared_buffer(); }

    // Fingerprint of rounds and the rule, which every rank must share (checked by the
    // reducer).
    std::uint64_t parameter() const noexcept
    {
        return detail::mix_in(detail::mix(std::uint64_t(std::int64_t(rounds))), rule.parameter());
    }
};

// A candidate of tuned: an algorithm's code and the posting order it ran with.
struct tuned_candidate {
    std::uint32_t algorithm;
    posting_order order;
};

// The candidates are automatic's (make_candidate, automatic.hpp).
template <element T, communicator C, class Policy, class Memory = host_memory>
class tuned_plan : public plan_types<tuned, C, std::span<T>> {
    static_assert(std::is_same_v<Memory, host_memory>, "gradsync::tuned_plan runs in host memory");

    using shared_plan = plan_of<T, C, shared_memory, Policy>;

public:
    static constexpr std::size_t message_candidates = 6, most_candidates = 7;

    // Candidate k: algorithm k / 2, receives first where k is odd; 6 is shared_memory (its
    // posting order unused: it posts no message).
    static constexpr std::uint32_t codes[] = {recursive_doubling::code, recursive_halving::code, ring::code,
                                              shared_memory::code};
    static constexpr tuned_candidate candidate(std::size_t k) noexcept
    {
        return {codes[k / 2], k % 2 ? posting_order::receives_first : posting_order::sends_first};
    }

    tuned_plan(C& comm, const layer_layout& layout, const plan_options<tuned>& options)
        : count_(layout.total()), rounds_(checked_rounds(options.algorithm.rounds))
    {
        if (options.algorithm.rule.share_memory && comm.size() > 1)
            build_if_shared(shared_, comm, layout, options_for(options, shared_memory{}));
        candidates_ = shared_ ? most_candidates : message_candidates;
        preferred_ = shared_ ? message_candidates : candidate_of(comm, options.algorithm.rule, count_);
        times_.resize(candidates_ * rounds_);
        sums_.emplace(comm, layer_layout(3 * candidates_, {}), options_for<recursive_doubling>(options));
        for (std::size_t k = 0; k < message_candidates; ++k) {
            pipeline_options pipeline = options.pipeline;
            pipeline.order = candidate(k).order;
            plans_[k].emplace(make_candidate<T, C, Policy>(comm, layout, candidate(k).algorithm, pipeline));
        }
    }

    std::size_t count() const noexcept { return count_; }
    std::size_t scratch_bytes() const noexcept
    {
        std::size_t bytes = sums_->scratch_bytes() + (shared_ ? shared_->scratch_bytes() : 0);
        for (const auto& p : plans_)
            if (p)
                bytes += std::visit([](const auto& q) { return q.scratch_bytes(); }, *p);
        return bytes;
    }

    // The number of candidates: 7 where shared memory is one, else 6.
    std::size_t candidates() const noexcept { return candidates_; }
    // The candidate kept, once tuning has ended.
    std::optional<tuned_candidate> chosen() const noexcept
    {
        if (chosen_ == none)
            return std::nullopt;
        return candidate(chosen_);
    }
    // The candidate kept unless another is measurably faster: rule's algorithm with the
    // transport's posting order, or shared_memory.
    tuned_candidate preferred() const noexcept { return candidate(preferred_); }
    // Each candidate's median call time in seconds, and the bottom and top of its
    // confidence interval, each summed over the ranks (zero until tuning has ended).
    std::span<const double> measured() const noexcept { return std::span(stats_).first(candidates_); }
    std::span<const double> measured_low() const noexcept { return std::span(stats_).subspan(candidates_, candidates_); }
    std::span<const double> measured_high() const noexcept
    {
        return std::span(stats_).subspan(2 * candidates_, candidates_);
    }
    // The calls tuning takes.
    std::size_t tuning_calls() const noexcept { return candidates_ * rounds_; }

    void run(C& comm, std::span<T> data, int tag)
    {
        if (chosen_ != none) {
            run_candidate(chosen_, comm, data, tag);
            return;
        }
        const std::size_t round = calls_ / candidates_, turn = calls_ % candidates_;
        const std::size_t k = round % 2 ? candidates_ - 1 - turn : turn;
        const auto start = clock_of<C>::now();
        run_candidate(k, comm, data, tag);
        times_[k * rounds_ + round] = std::chrono::duration<double>(clock_of<C>::now() - start).count();
        if (++calls_ == tuning_calls())
            choose(comm, tag);
    }

private:
    static std::size_t checked_rounds(int rounds)
    {
        if (rounds < 2)
            throw usage_error("gradsync::tuned: rounds is " + std::to_string(rounds) +
                              "; it must be at least 2 (a candidate's first call is not counted)");
        return std::size_t(rounds);
    }

    void run_candidate(std::size_t k, C& comm, std::span<T> data, int tag)
    {
        if (k == message_candidates)
            shared_->run(comm, data, tag);
        else
            std::visit([&](auto& p) { p.run(comm, data, tag); }, *plans_[k]);
    }

    // The index of rule's candidate.
    static std::size_t candidate_of(C& comm, const automatic& rule, std::size_t count)
    {
        const std::uint32_t code = rule.choose(count * sizeof(T), count, comm.size(),
                                               ranks_per_host_for(comm, rule, count * sizeof(T)));
        const std::size_t k = std::size_t(std::find(std::begin(codes), std::end(codes) - 1, code) - std::begin(codes));
        return 2 * std::min<std::size_t>(k, 2) + (receives_first(comm) ? 1 : 0);
    }

    // Every message of the call's plan was posted before the sums', and messages of one
    // pair and tag match in posting order, so the sums can share the call's tag.
    void choose(C& comm, int tag)
    {
        const std::size_t n = rounds_ - 1;
        const std::size_t l = std::size_t(std::max(1.0, std::floor((double(n) - 1.96 * std::sqrt(double(n))) / 2)));
        for (std::size_t k = 0; k < candidates_; ++k) {
            const auto first = times_.begin() + std::ptrdiff_t(k * rounds_ + 1), last = first + std::ptrdiff_t(n);
            std::sort(first, last);
            stats_[k] = first[std::ptrdiff_t((n - 1) / 2)];
            stats_[candidates_ + k] = first[std::ptrdiff_t(l - 1)];
            stats_[2 * candidates_ + k] = first[std::ptrdiff_t(n - l)];
        }
        sums_->run(comm, std::span<double>(stats_).first(3 * candidates_), tag);
        const auto median = measured(), low = measured_low(), high = measured_high();
        const std::size_t fastest = std::size_t(std::min_element(median.begin(), median.end()) - median.begin());
        chosen_ = high[fastest] < low[preferred_] ? fastest : preferred_;
        for (std::size_t k = 0; k < message_candidates; ++k)
            if (k != chosen_)
                plans_[k].reset();
        if (chosen_ != message_candidates)
            shared_.reset();
    }

    static constexpr std::size_t none = most_candidates;

    std::size_t count_, rounds_;
    std::optional<shared_plan> shared_;
    std::size_t candidates_ = message_candidates;
    std::vector<double> times_; // [candidate][round], seconds
    std::size_t preferred_ = 0;
    std::array<double, 3 * most_candidates> stats_{}; // medians, bottoms, tops (3 * candidates_ used)
    std::optional<plan_of<double, C, recursive_doubling, sum>> sums_;
    std::array<std::optional<candidate_plan<T, C, Policy>>, message_candidates> plans_;
    std::size_t calls_ = 0, chosen_ = none;
};

} // namespace gradsync
