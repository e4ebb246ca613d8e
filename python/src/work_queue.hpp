// work_queue: the backend's calls run in the order they were made, one at a time, on one
// thread of the group's own, as torch's gloo backend runs them on its workers: the caller
// (DDP's autograd hook, or the user's async_op=True) gets a Work at once and goes on, so
// communication overlaps backward. A Work completes, and its future with it, when its call
// has ended on this rank; a call that throws completes it with that error.
//
// A send or a receive ends in two steps: the queue posts it and goes on, and waits for it only
// when something needs it to be over: a call after it that is not a send or receive (calls
// stay in order), or its Work asked about (wait, is_completed, its future). Waiting sooner,
// as soon as the queue is empty, would let a rank wait for its isend before its irecv, posted
// a moment later by the same Python thread, had reached the queue: with its peer doing the
// same, neither receive would ever be posted. The waits run in the order of the calls.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace gradsync::python {

// What the queue's thread and its deferred works share: the works may outlive the queue.
struct queue_state {
    std::mutex mutex;
    std::condition_variable wake;
    bool stopping = false;
    bool wanted = false; // a deferred work was asked about: wait for the deferred ones

    void want()
    {
        {
            const std::lock_guard lock(mutex);
            wanted = true;
        }
        wake.notify_one();
    }
};

class queued_work final : public c10d::Work {
public:
    queued_work(c10d::OpType type, std::vector<at::Tensor> outputs, std::weak_ptr<queue_state> deferred_in = {})
        : c10d::Work(-1, type), outputs_(std::move(outputs)),
          future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))),
          deferred_in_(std::move(deferred_in))
    {
    }

    std::vector<at::Tensor> result() override { return outputs_; }

    bool isCompleted() override
    {
        asked();
        return c10d::Work::isCompleted();
    }
    bool wait(std::chrono::milliseconds timeout) override
    {
        asked();
        return c10d::Work::wait(timeout);
    }
    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override
    {
        asked();
        return future_;
    }

    // The future first: DDP chains on it, and a user waiting on the Work then finds both done.
    void complete(std::exception_ptr failure)
    {
        if (failure)
            future_->setError(failure);
        else
            future_->markCompleted(c10::IValue(outputs_));
        finish(failure);
    }

private:
    void asked()
    {
        if (const auto state = deferred_in_.lock())
            state->want();
    }

    std::vector<at::Tensor> outputs_;
    c10::intrusive_ptr<c10::ivalue::Future> future_;
    std::weak_ptr<queue_state> deferred_in_;
};

class work_queue {
public:
    // What a call returns: the wait of a send or receive it posted, or an empty function.
    using rest = std::function<void()>;

    work_queue() : state_(std::make_shared<queue_state>()), thread_([this] { serve(); }) {}

    work_queue(const work_queue&) = delete;
    work_queue& operator=(const work_queue&) = delete;

    // Runs what is queued and waits for what it posted, then stops.
    ~work_queue()
    {
        {
            const std::lock_guard lock(state_->mutex);
            state_->stopping = true;
        }
        state_->wake.notify_one();
        thread_.join();
    }

    // defers: call posts a send or receive and returns its wait; otherwise it runs to its end.
    c10::intrusive_ptr<c10d::Work> push(c10d::OpType type, std::vector<at::Tensor> outputs, std::function<rest()> call,
                                        bool defers = false)
    {
        auto work = c10::make_intrusive<queued_work>(type, std::move(outputs),
                                                     defers ? std::weak_ptr<queue_state>(state_) : std::weak_ptr<queue_state>());
        {
            const std::lock_guard lock(state_->mutex);
            calls_.push_back({work, std::move(call), defers});
        }
        state_->wake.notify_one();
        return work;
    }

private:
    struct entry {
        c10::intrusive_ptr<queued_work> work;
        std::function<rest()> call;
        bool defers = false;
    };
    struct waiting {
        c10::intrusive_ptr<queued_work> work;
        rest wait;
    };

    static void complete(const c10::intrusive_ptr<queued_work>& work, const std::function<void()>& step)
    {
        std::exception_ptr failure;
        try {
            step();
        } catch (...) {
            failure = std::current_exception();
        }
        work->complete(failure);
    }

    void finish_waiting()
    {
        for (waiting& w : waiting_)
            complete(w.work, w.wait);
        waiting_.clear();
    }

    void serve()
    {
        for (;;) {
            entry next;
            {
                std::unique_lock lock(state_->mutex);
                state_->wake.wait(lock, [this] { return state_->stopping || state_->wanted || !calls_.empty(); });
                if (calls_.empty()) {
                    state_->wanted = false;
                    const bool stopping = state_->stopping;
                    lock.unlock();
                    finish_waiting();
                    if (stopping)
                        return;
                    continue;
                }
                next = std::move(calls_.front());
                calls_.pop_front();
            }
            if (!next.defers) {
                finish_waiting();
                complete(next.work, [&] { next.call(); });
                continue;
            }
            rest second;
            std::exception_ptr failure;
            try {
                second = next.call();
            } catch (...) {
                failure = std::current_exception();
            }
            if (failure)
                next.work->complete(failure);
            else
                waiting_.push_back({next.work, std::move(second)});
        }
    }

    std::shared_ptr<queue_state> state_;
    std::deque<entry> calls_;      // under state_->mutex
    std::vector<waiting> waiting_; // the group's thread's alone
    std::thread thread_;           // last: it starts serving once the members above exist
};

} // namespace gradsync::python
