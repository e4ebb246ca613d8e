// local_group: N ranks as threads of one process, for tests, examples and single-node use.
// Each rank's communicator, and how messages meet: comm/local/local_communicator.hpp.
//
// Failure: if a rank's function throws, the group is aborted: every rank blocked in wait()
// (or arriving there later) throws aborted_error, and run() rethrows the first exception
// that was not such a release.
#pragma once

#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gradsync/comm/local/detail/mailbox.hpp>
#include <gradsync/comm/local/local_communicator.hpp>
#include <gradsync/core/error.hpp>

namespace gradsync {

class local_group {
public:
    explicit local_group(int size, local_options options = {}) : options_(options)
    {
        if (options.deadline.count() < 0)
            throw usage_error("gradsync::local_group: the deadline must not be negative");
        if (size < 1)
            throw usage_error("gradsync::local_group: size must be at least 1, got " + std::to_string(size));
        for (int r = 0; r < size; ++r)
            ranks_.ranks.push_back(std::make_unique<detail::local_rank_state>());
    }

    int size() const noexcept { return ranks_.size(); }
    const local_options& options() const noexcept { return options_; }

    // Runs f(local_communicator&) on every rank, one thread each, and returns when all have
    // returned. Rethrows the first exception a rank threw (others are released, not hung).
    void run(const std::function<void(local_communicator&)>& f);

private:
    local_options options_;
    detail::local_ranks ranks_;
};

inline void local_group::run(const std::function<void(local_communicator&)>& f)
{
    ranks_.aborted.store(false);
    std::mutex first_mutex;
    std::exception_ptr first;
    bool first_is_release = false;
    auto body = [&](int r) {
        local_communicator comm(ranks_, options_, r);
        try {
            f(comm);
        } catch (...) {
            const std::exception_ptr e = std::current_exception();
            bool release = false;
            try {
                std::rethrow_exception(e);
            } catch (const aborted_error&) {
                release = true;
            } catch (...) {
            }
            {
                std::lock_guard lock(first_mutex);
                if (!first || (first_is_release && !release)) {
                    first = e;
                    first_is_release = release;
                }
            }
            ranks_.abort();
        }
    };
    {
        std::vector<std::jthread> threads;
        threads.reserve(std::size_t(size()));
        for (int r = 1; r < size(); ++r)
            threads.emplace_back(body, r);
        body(0);
    }
    for (auto& r : ranks_.ranks) {
        r->sends = {};
        r->recvs = {};
        r->waits = 0;
        r->released.store(false);
    }
    ranks_.aborted.store(false);
    if (first)
        std::rethrow_exception(first);
}

} // namespace gradsync
