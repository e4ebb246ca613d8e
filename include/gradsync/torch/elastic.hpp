// Elastic training of a libtorch module over an elastic_group, in the manner of Horovod
// Elastic's hvd.elastic.run: elastic_state keeps, as of the last commit(), what a step needs to
// be redone (the module's parameters and buffers, the optimizer's state, the position in the
// data); elastic_run calls the training loop and, when a call in it fails because a member is
// lost, brings every survivor back to one committed state, re-forms the group and calls the
// loop again. Newcomers enter at a commit(). docs/elastic.md, "Training", is the manual.
//
// Cost: commit() copies the parameters and buffers once (memory to memory), serializes the
// optimizer's state (libtorch's archive, in memory) and asks whether a newcomer waits (rank 0:
// one round trip to the store; every rank: an allreduce of one element). Each (re)start of the
// loop: a broadcast of the parameters and buffers, one of the serialized optimizer state and
// one of the position, from rank 0.
//
// Preconditions: every member commits at the same steps (commit() is collective); the loop
// builds its data_parallel (and any reducer) on the communicator it is given, so that they
// go with it; gradsync's errors leave the loop (a catch of them inside it must rethrow).
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <cstdint>
#include <span>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gradsync/collective/broadcast.hpp>
#include <gradsync/comm/gloo/gloo.hpp>
#include <gradsync/core/error.hpp>
#include <gradsync/elastic/group.hpp>
#include <gradsync/torch/agreement.hpp>
#include <gradsync/torch/state.hpp>

namespace gradsync {

// Where the training stands. The data rule: each epoch is one order of the training samples,
// the same on every rank (the loop's, from a seed and the epoch); each step takes the next
// size × batch samples of it, rank r the r-th run of `batch`. The position counts samples, so
// that after a change of membership the next step takes the samples that follow, split over
// the new size: within an epoch none is taken twice and none is skipped, but for the last
// fewer than size × batch (the epoch ends there, as with a sampler's drop_last).
struct elastic_position {
    std::int64_t epoch = 0;
    std::int64_t sample = 0; // samples of this epoch's order taken, by all ranks together
    std::int64_t step = 0;   // steps taken since the start: the clock of a learning-rate schedule

    // Whether a step of `size` ranks, `batch` each, fits in what is left of `samples`.
    bool step_left(int size, std::int64_t batch, std::int64_t samples) const
    {
        return sample + std::int64_t(size) * batch <= samples;
    }
    // The first sample, in the epoch's order, of `rank`'s batch of the next step.
    std::int64_t first(int rank, std::int64_t batch) const { return sample + std::int64_t(rank) * batch; }
    // Past a step of `size` ranks, `batch` each.
    void advance(int size, std::int64_t batch)
    {
        sample += std::int64_t(size) * batch;
        ++step;
    }
    void next_epoch()
    {
        ++epoch;
        sample = 0;
    }
};

namespace elastic_detail {

// Thrown by commit() where a newcomer waits: elastic_run re-forms the group and calls the loop
// again. Not an exception of the standard's or gradsync's, so that no handler of the loop's
// for those takes it.
struct members_changed {};

} // namespace elastic_detail

class elastic_state {
public:
    // The module's parameters (all of them) and buffers and the optimizer's state, as they are
    // now, and `from` (a checkpoint's position, where the run resumes from one) become the
    // first commit. Local: no member waits for another.
    elastic_state(elastic_group& group, torch::nn::Module& module, torch::optim::Optimizer& optimizer,
                  elastic_position from = {})
        : position(from), group_(&group), optimizer_(&optimizer)
    {
        for (const auto& item : module.named_parameters(true))
            tensors_.add(item.key(), item.value());
        for (const auto& item : module.named_buffers(true))
            tensors_.add(item.key(), item.value());
        for (const at::Tensor& t : tensors_.tensors)
            saved_.push_back(t.detach().clone());
        save();
    }

    elastic_state(const elastic_state&) = delete;
    elastic_state& operator=(const elastic_state&) = delete;

    elastic_position position;
    // How many times in a row the loop may fail without a commit between: a failure that
    // every generation repeats (a deadline shorter than a step) leaves elastic_run then.
    int restart_limit = 5;

    // Collective, at a step boundary: keeps the state as it is now (the step done, the position
    // advanced past it) and, where a newcomer waits, leaves the loop for elastic_run to re-form
    // the group with it.
    void commit()
    {
        save();
        if (group_->joiners_waiting())
            throw elastic_detail::members_changed{};
    }

    elastic_group& group() noexcept { return *group_; }
    std::uint64_t commits() const noexcept { return commits_; }
    // Why the loop was last restarted: the failure it left with (its what()), "newcomers" where
    // it re-formed for them at a commit, empty where it has not restarted.
    const std::string& restarted_after() const noexcept { return restarted_after_; }

private:
    template <class Loop>
    friend void elastic_run(elastic_state& state, Loop&& loop);

    void save()
    {
        torch::NoGradGuard no_grad;
        for (std::size_t i = 0; i < saved_.size(); ++i)
            saved_[i].copy_(tensors_.tensors[i]);
        torch::serialize::OutputArchive archive;
        optimizer_->save(archive);
        std::ostringstream out;
        archive.save_to(out);
        optimizer_bytes_ = out.str();
        saved_position_ = position;
        ++commits_;
        failures_in_a_row_ = 0;
    }

    // After `failure`, back to the last commit (false, and nothing done, past restart_limit
    // failures in a row).
    bool back_to_commit(const error& failure)
    {
        if (++failures_in_a_row_ > restart_limit)
            return false;
        restarted_after_ = failure.what();
        restore();
        return true;
    }

    // Back to the last commit, on this member alone.
    void restore()
    {
        torch::NoGradGuard no_grad;
        for (std::size_t i = 0; i < saved_.size(); ++i)
            tensors_.tensors[i].copy_(saved_[i]);
        torch::serialize::InputArchive archive;
        std::istringstream in(optimizer_bytes_);
        archive.load_from(in);
        optimizer_->load(archive);
        position = saved_position_;
    }

    // Every member takes rank 0's state: the parameters, buffers, optimizer state and position.
    // Collective over the generation.
    void copy_from_rank0(gloo_communicator& comm)
    {
        torch_binding::module_state<gloo_communicator>(comm, {&tensors_}).copy_from(0);
        torch_binding::copy_optimizer_state(comm, *optimizer_, "gradsync::elastic_run (" + group_->id() + "): ");
        std::int64_t at[3] = {position.epoch, position.sample, position.step};
        broadcast(comm, std::as_writable_bytes(std::span<std::int64_t>(at)), 0);
        position = {at[0], at[1], at[2]};
    }

    elastic_group* group_;
    torch::optim::Optimizer* optimizer_;
    torch_binding::named_tensors tensors_{"tensor", "parameters and buffers", {}, {}};
    std::vector<at::Tensor> saved_;
    std::string optimizer_bytes_;
    elastic_position saved_position_;
    std::uint64_t commits_ = 0;
    int failures_in_a_row_ = 0;
    std::string restarted_after_;
};

// Runs loop(comm) on the current generation's communicator until it returns. Where a call in
// it fails because a member is lost (communication_error, deadline_error included, or
// aborted_error), every survivor goes back to its last commit, the group re-forms, and the
// loop starts again from rank 0's state (the lowest surviving rank's); where commit() found a
// newcomer, the group re-forms with it and the loop starts again from rank 0's state, which
// the newcomer receives. A failure after state.restart_limit failures with no commit between
// leaves, as does any other error: membership_error (stale, or too few ranks),
// usage_error and mismatch_error (the program's, which a new generation would repeat), and
// what is not gradsync's.
template <class Loop>
void elastic_run(elastic_state& state, Loop&& loop)
{
    elastic_group& group = state.group();
    for (;;) {
        try {
            state.copy_from_rank0(group.comm());
            loop(group.comm());
            return;
        } catch (const elastic_detail::members_changed&) {
            state.restarted_after_ = "newcomers";
        } catch (const communication_error& e) {
            if (!state.back_to_commit(e))
                throw;
        } catch (const aborted_error& e) {
            if (!state.back_to_commit(e))
                throw;
        }
        group.reform();
    }
}

} // namespace gradsync
