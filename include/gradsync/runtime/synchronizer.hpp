// synchronizer: overlaps the merged-gradient allreduces of a merge plan with the backward
// pass (MG-WFBP Algorithm 2). Its contract (plan, collective construction, ready/wait,
// threads, errors, deadline) is docs/runtime.md.
//
//   gradsync::synchronizer<float, Comm, gradsync::average> sync(comm, layer_sizes, plan);
//   for each iteration:
//       backward: for l = L-1 down to 0: compute layer l's gradient, then sync.ready(l, grad_l);
//       sync.wait();   // every group reduced (or the first error rethrown)
//
// Cost per iteration: one allreduce per group, started as soon as the group's lowest layer
// is ready, so the iteration ends at max(end of backward, end of the last group's
// allreduce), as the planner's timeline simulates; two copies of a group whose layers are
// not adjacent in memory (through a fusion buffer sized once). Nothing allocates once the
// reducers are planned: they are built with the synchronizer, one per group.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <limits>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gradsync/collective/allreduce.hpp>
#include <gradsync/collective/verify.hpp>
#include <gradsync/comm/communicator.hpp>
#include <gradsync/core/error.hpp>
#include <gradsync/core/layout.hpp>
#include <gradsync/core/types.hpp>
#include <gradsync/plan/exchange.hpp>
#include <gradsync/plan/plan.hpp>
#include <gradsync/planner/merge_plan.hpp>
#include <gradsync/policy/reduction_policy.hpp>
#include <gradsync/policy/sum.hpp>
#include <gradsync/selector/automatic.hpp>
#include <gradsync/selector/plan_table.hpp>

namespace gradsync {

struct synchronizer_options {
    int tag = tags::synchronizer; // not reducer_options{}.tag: see the header comment
    pipeline_options pipeline{};
    // Longest time wait() may block; zero waits for ever. See "Deadline" above.
    std::chrono::nanoseconds deadline{0};
    // The buffer every layer's gradient lies in (reducer_options::shared).
    const shared_buffer* shared = nullptr;
};

// When the communication thread started and finished one group (copies included).
struct group_times {
    std::chrono::steady_clock::time_point start{};
    std::chrono::steady_clock::time_point end{};
};

template <element T, communicator C, reduction_policy Policy = sum, allreduce_algorithm Algorithm = automatic>
class synchronizer {
public:
    synchronizer(C& comm, std::span<const std::size_t> layer_sizes, planner::merge_plan plan, Policy = {},
                 Algorithm algorithm = {}, synchronizer_options options = {})
        : comm_(&comm), sizes_(layer_sizes.begin(), layer_sizes.end()), plan_(std::move(plan)),
          spans_(sizes_.size()), times_(plan_.size()), deadline_(options.deadline)
    {
        if (deadline_.count() < 0)
            throw usage_error("gradsync::synchronizer (" + where(comm) + "): the deadline must not be negative");
        const std::string problem = planner::plan_problem(plan_, sizes_.size());
        if constexpr (requires { comm.check_thread_support("gradsync::synchronizer"); })
            comm.check_thread_support("gradsync::synchronizer");
        agree(options, algorithm, problem.empty());
        if (!problem.empty())
            throw usage_error("gradsync::synchronizer (" + where(comm) + "): invalid plan: " + problem);

        std::size_t largest = 0;
        for (const std::vector<std::size_t>& group : plan_) {
            const std::span<const std::size_t> sizes = std::span(sizes_).subspan(group.front(), group.size());
            reducers_.emplace_back(comm, sizes, algorithm, reducer_options{options.tag, options.pipeline, options.shared});
            lowest_.push_back(group.front());
            largest = std::max(largest, reducers_.back().count());
        }
        fusion_.resize(largest);
        thread_ = std::thread([this] { communicate(); });
    }

    synchronizer(const synchronizer&) = delete;
    synchronizer& operator=(const synchronizer&) = delete;

    ~synchronizer()
    {
        std::unique_lock lock(mutex_);
        stop_ = true;
        work_.notify_one();
        const auto idle = [&] { return done_groups_ == ready_groups_; };
        bool stuck = false;
        if (timed_out_)
            stuck = !idle();
        else if (deadline_.count())
            stuck = !done_.wait_for(lock, deadline_, idle);
        lock.unlock();
        if constexpr (releasable<C>)
            if (stuck)
                comm_->release();
        thread_.join();
    }

    // Layer `layer`'s gradient is written. Layers come in backward order, L-1 down to 0, each
    // once per iteration (empty layers too); the span holds the layer's elements and stays
    // untouched until wait() returns.
    void ready(std::size_t layer, std::span<T> gradient)
    {
        bool complete = false;
        {
            std::lock_guard lock(mutex_);
            usable("ready()");
            const std::size_t layers = sizes_.size();
            if (layer >= layers)
                refuse("ready(" + std::to_string(layer) + "): there are only " + std::to_string(layers) + " layers");
            if (pending_ == 0)
                refuse("ready(" + std::to_string(layer) + "): every layer of this iteration is already ready; call "
                                                         "wait() first");
            if (layer != pending_ - 1)
                refuse("ready(" + std::to_string(layer) + "): layers must be ready in backward order, expected layer " +
                       std::to_string(pending_ - 1) +
                       (layer >= pending_ ? " (layer " + std::to_string(layer) + " is already ready)" : std::string()));
            if (gradient.size() != sizes_[layer])
                refuse("ready(" + std::to_string(layer) + "): the gradient holds " + std::to_string(gradient.size()) +
                       " elements, layer " + std::to_string(layer) + " has " + std::to_string(sizes_[layer]));
            spans_[layer] = gradient;
            --pending_;
            if (layer == lowest_[ready_groups_]) {
                ++ready_groups_;
                complete = true;
            }
        }
        if (complete)
            work_.notify_one();
    }

    // Blocks until every group of this iteration is reduced, then rethrows the iteration's
    // first error, if any. Every layer must be ready.
    void wait()
    {
        std::unique_lock lock(mutex_);
        usable("wait()");
        if (pending_ != 0)
            refuse("wait(): layer " + std::to_string(pending_ - 1) + " is not ready yet");
        const auto finished = [&] { return done_groups_ == plan_.size(); };
        if (deadline_.count() == 0)
            done_.wait(lock, finished);
        else if (!done_.wait_for(lock, deadline_, finished)) {
            const std::vector<std::size_t>& group = plan_[done_groups_];
            failure_ = "wait(): in iteration " + std::to_string(iteration_) + ", group " + std::to_string(done_groups_) +
                " of " + std::to_string(plan_.size()) + " (layers " + std::to_string(group.front()) + ".." +
                std::to_string(group.back()) + ") did not finish its allreduce within " +
                std::to_string(std::chrono::duration<double>(deadline_).count()) + " s";
            broken_ = true;
            timed_out_ = true;
            throw deadline_error("gradsync::synchronizer (" + where(*comm_) + "): " + failure_);
        }
        ++iteration_;
        pending_ = sizes_.size();
        ready_groups_ = 0;
        done_groups_ = 0;
        if (error_) {
            broken_ = true;
            std::rethrow_exception(error_);
        }
    }

    // Start and end of every group's allreduce in the last iteration (group order; zero for
    // groups skipped after an error). Valid between wait() and the next ready().
    std::span<const group_times> last_times() const
    {
        std::lock_guard lock(mutex_);
        if (pending_ != sizes_.size())
            refuse("last_times(): an iteration is in progress; call wait() first");
        return times_;
    }

    const planner::merge_plan& plan() const noexcept { return plan_; }
    std::span<const std::size_t> layer_sizes() const noexcept { return sizes_; }

private:
    using reducer_type = reducer<T, C, Policy, Algorithm>;

    [[noreturn]] void refuse(const std::string& what) const
    {
        throw usage_error("gradsync::synchronizer (" + where(*comm_) + "): " + what);
    }

    void usable(const char* call) const
    {
        if (broken_)
            refuse(std::string(call) + ": refused, an earlier iteration failed (" + failure_ +
                   "); the communicator may be out of step with the other ranks");
    }

    // Ranks must agree on everything the reducers do not see: the number of layers, how
    // they are grouped, and whether the plan is valid. A rank whose plan is invalid still
    // takes part, so that every rank throws instead of some waiting for it.
    void agree(const synchronizer_options& options, const Algorithm& algorithm, bool valid)
    {
        std::vector<std::size_t> described{sizes_.size()};
        described.insert(described.end(), sizes_.begin(), sizes_.end());
        described.push_back(valid ? 1 : 0);
        for (const std::vector<std::size_t>& group : plan_) {
            described.push_back(group_mark);
            described.insert(described.end(), group.begin(), group.end());
        }
        const layer_layout layout(0, sizes_);
        signature s = call_signature<T, Policy>(*comm_, layout.total(), layout,
                                                reducer_options{options.tag, options.pipeline, options.shared}.for_plan(algorithm),
                                                options.tag);
        s.value[signature::layers] = sizes_.size();
        s.value[signature::layout_fingerprint] = layer_layout(0, described).fingerprint();
        s.detail_length = described.size();
        try {
            verify_agreement(*comm_, s, "gradsync::synchronizer", described, plan_difference);
        } catch (const mismatch_error&) {
            if (valid)
                throw;
        }
    }

    static constexpr std::size_t group_mark = std::numeric_limits<std::size_t>::max();

    // What differs between two ranks' described layer sizes and plans (agree()): the first
    // layer, else the first group.
    static std::string plan_difference(std::span<const std::size_t> first, std::span<const std::size_t> other,
                                       int other_rank)
    {
        const std::size_t layers = first[0]; // equal on every rank: compared before
        if (!std::equal(first.begin(), first.begin() + std::ptrdiff_t(layers + 1), other.begin()))
            return detail::layer_size_difference(first.subspan(1, layers), other.subspan(1, layers), other_rank);
        const auto groups = [&](std::span<const std::size_t> d) {
            std::vector<std::span<const std::size_t>> g;
            for (std::size_t i = layers + 2; i < d.size(); ++i) {
                const std::size_t end = std::size_t(std::find(d.begin() + std::ptrdiff_t(i + 1), d.end(), group_mark) - d.begin());
                g.push_back(d.subspan(i + 1, end - i - 1));
                i = end - 1;
            }
            return g;
        };
        const auto mine = groups(first), theirs = groups(other);
        const auto named = [](std::span<const std::size_t> g) {
            if (g.empty())
                return std::string("empty");
            return g.size() == 1 ? "layer " + std::to_string(g.front())
                                 : "layers " + std::to_string(g.front()) + ".." + std::to_string(g.back());
        };
        const std::string rank = "rank " + std::to_string(other_rank);
        for (std::size_t g = 0; g < std::min(mine.size(), theirs.size()); ++g)
            if (!std::equal(mine[g].begin(), mine[g].end(), theirs[g].begin(), theirs[g].end()))
                return "the plan: group " + std::to_string(g) + " is " + named(mine[g]) + " on rank 0 and " +
                    named(theirs[g]) + " on " + rank;
        return "the plan: rank 0's has " + std::to_string(mine.size()) + " groups, " + rank + "'s " +
            std::to_string(theirs.size());
    }

    void communicate()
    {
        std::unique_lock lock(mutex_);
        for (;;) {
            work_.wait(lock, [&] { return done_groups_ < ready_groups_ || stop_; });
            if (done_groups_ == ready_groups_)
                return; // stopping, and no complete group left
            const std::size_t g = done_groups_;
            const bool skip = error_ != nullptr;
            lock.unlock();
            std::exception_ptr failed;
            if (skip) {
                times_[g] = {};
            } else {
                try {
                    reduce(g);
                } catch (...) {
                    failed = std::current_exception();
                }
            }
            lock.lock();
            if (failed) {
                error_ = failed;
                failure_ = describe(failed);
            }
            ++done_groups_;
            done_.notify_all(); // wait() waits for the last group, the destructor for the thread to be idle
        }
    }

    void reduce(std::size_t g)
    {
        using clock = std::chrono::steady_clock;
        const std::vector<std::size_t>& group = plan_[g];
        reducer_type& r = reducers_[g];
        times_[g].start = clock::now();
        if (const std::span<T> whole = adjacent(group); whole.size() == r.count()) {
            r(whole);
        } else {
            std::size_t at = 0;
            for (std::size_t l : group) {
                std::copy(spans_[l].begin(), spans_[l].end(), fusion_.begin() + std::ptrdiff_t(at));
                at += spans_[l].size();
            }
            const std::span<T> fused(fusion_.data(), at);
            r(fused);
            at = 0;
            for (std::size_t l : group) {
                std::copy_n(fused.begin() + std::ptrdiff_t(at), spans_[l].size(), spans_[l].begin());
                at += spans_[l].size();
            }
        }
        times_[g].end = clock::now();
    }

    // The group's layers as one span when they lie back to back in forward order (empty
    // layers may sit anywhere); an empty span otherwise.
    std::span<T> adjacent(const std::vector<std::size_t>& group) const
    {
        T* begin = nullptr;
        std::size_t count = 0;
        for (std::size_t l : group) {
            const std::span<T> s = spans_[l];
            if (s.empty())
                continue;
            if (!begin)
                begin = s.data();
            else if (s.data() != begin + count)
                return {};
            count += s.size();
        }
        return begin ? std::span<T>(begin, count) : std::span<T>();
    }

    static std::string describe(const std::exception_ptr& e)
    {
        try {
            std::rethrow_exception(e);
        } catch (const std::exception& x) {
            return x.what();
        } catch (...) {
            return "an exception that is not a std::exception";
        }
    }

    C* comm_;
    std::vector<std::size_t> sizes_;
    planner::merge_plan plan_;
    std::deque<reducer_type> reducers_; // reducers neither move nor copy
    std::vector<std::size_t> lowest_;   // lowest layer of each group: readying it completes the group
    std::vector<T> fusion_;
    std::vector<std::span<T>> spans_;
    std::vector<group_times> times_;
    std::chrono::nanoseconds deadline_;
    std::size_t iteration_ = 0; // iterations completed, for deadline messages

    mutable std::mutex mutex_;
    std::condition_variable work_; // wakes the communication thread
    std::condition_variable done_; // wakes wait()
    std::size_t pending_ = sizes_.size(); // layers of this iteration not yet ready
    std::size_t ready_groups_ = 0;        // groups complete, in plan order
    std::size_t done_groups_ = 0;         // groups reduced or skipped
    bool stop_ = false;
    bool broken_ = false;
    bool timed_out_ = false; // wait() ran past the deadline; the thread may be stuck
    std::exception_ptr error_;
    std::string failure_;
    std::thread thread_;
};

} // namespace gradsync
