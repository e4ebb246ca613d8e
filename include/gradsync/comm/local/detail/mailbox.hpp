// The mailboxes behind local_group (comm/local/local.hpp): one posted send or receive
// (local_op), the posting-order queue that matches them (local_queue), each rank's state
// (local_rank_state): its queues, its pool of ops and the condition variable its waits sleep
// on, and what a group's ranks share (local_ranks).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace gradsync {

namespace detail {

// One posted send or receive. Owned by the posting rank's pool; linked into the mailbox of
// the receiving rank while unmatched.
struct local_op {
    bool is_send = false;
    int owner = 0;
    int peer = 0;
    int tag = 0;
    const std::byte* src = nullptr;
    std::byte* dst = nullptr;
    std::size_t size = 0;
    local_op* next = nullptr;
    std::atomic<int> state{0}; // 0 pending, 1 done, 2 failed
    std::string failure;
};

struct local_queue {
    local_op* head = nullptr;
    local_op* tail = nullptr;

    void push(local_op* op) noexcept
    {
        op->next = nullptr;
        (tail ? tail->next : head) = op;
        tail = op;
    }

    // Unlinks and returns the first op that satisfies pred, in posting order.
    template <class Pred>
    local_op* take(Pred pred) noexcept
    {
        local_op* prev = nullptr;
        for (local_op* op = head; op; prev = op, op = op->next) {
            if (!pred(op))
                continue;
            (prev ? prev->next : head) = op->next;
            if (tail == op)
                tail = prev;
            op->next = nullptr;
            return op;
        }
        return nullptr;
    }
};

struct local_rank_state {
    std::mutex mutex;       // guards sends and recvs
    local_queue sends;      // sends addressed to this rank, not yet matched
    local_queue recvs;      // receives posted by this rank, not yet matched
    std::mutex sleep_mutex; // with `woken`: the owner sleeps until one of its ops completes
    std::condition_variable woken;
    std::deque<local_op> pool; // stable addresses; touched only by the owning thread
    std::vector<local_op*> free_ops;
    std::size_t waits = 0; // completed waits in the current run(), for deadline messages
    std::atomic<bool> released{false}; // local_communicator::release()

    void wake() noexcept
    {
        { // taking the lock orders this wake after a sleeper's last check
            std::lock_guard lock(sleep_mutex);
        }
        woken.notify_all();
    }
};

// What the ranks of one group share: their mailboxes, and whether a rank's failure aborted
// the group (local_group::run sets it; every wait looks at it).
struct local_ranks {
    std::vector<std::unique_ptr<local_rank_state>> ranks;
    std::atomic<bool> aborted{false};

    local_rank_state& operator[](int rank) noexcept { return *ranks[std::size_t(rank)]; }
    int size() const noexcept { return int(ranks.size()); }

    void abort() noexcept
    {
        aborted.store(true, std::memory_order_release);
        for (auto& r : ranks)
            r->wake();
    }
};

} // namespace detail

} // namespace gradsync
