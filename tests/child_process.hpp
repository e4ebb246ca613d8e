// A test's rank as a child process: body() runs in a fork and its outcome comes back through a
// pipe ("" where it returned "" and exited 0; what it threw, as thrown.hpp words it; or how the
// process ended). The test may signal it (kill, stop, continue) and must finish() it, which
// waits up to a limit and then kills it: nothing outlives the test.
#pragma once

#include <algorithm>
#include <chrono>
#include <csignal>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "thrown.hpp"

namespace gradsync_test {

class child_process {
public:
    explicit child_process(const std::function<std::string()>& body)
    {
        int fds[2];
        if (::pipe(fds) != 0)
            throw std::runtime_error("child_process: no pipe");
        pid_ = ::fork();
        if (pid_ == 0) {
            ::close(fds[0]);
            const std::string outcome = thrown([&] {
                const std::string said = body();
                if (!said.empty())
                    throw std::runtime_error(said);
            });
            if (!outcome.empty() && ::write(fds[1], outcome.data(), outcome.size()) < 0)
                ::_exit(2);
            ::_exit(outcome.empty() ? 0 : 1);
        }
        ::close(fds[1]);
        pipe_ = fds[0];
    }
    ~child_process()
    {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
        if (pipe_ >= 0)
            ::close(pipe_);
    }
    child_process(const child_process&) = delete;
    child_process& operator=(const child_process&) = delete;

    void signal(int sig) const { ::kill(pid_, sig); }

    // Waits until the child ends or `limit` passes (then kills it); returns its outcome.
    std::string finish(std::chrono::milliseconds limit)
    {
        const auto deadline = std::chrono::steady_clock::now() + limit;
        int status = 0;
        bool late = false;
        while (::waitpid(pid_, &status, WNOHANG) == 0) {
            if (std::chrono::steady_clock::now() > deadline) {
                ::kill(pid_, SIGKILL);
                ::waitpid(pid_, &status, 0);
                late = true;
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        pid_ = -1;
        std::string said;
        char text[4096];
        for (ssize_t got; (got = ::read(pipe_, text, sizeof text)) > 0;)
            said.append(text, std::size_t(got));
        if (late)
            return "still running at the limit" + (said.empty() ? "" : " (" + said + ")");
        if (!said.empty())
            return said;
        if (WIFSIGNALED(status))
            return "ended by signal " + std::to_string(WTERMSIG(status));
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            return "exited with status " + std::to_string(WEXITSTATUS(status));
        return "";
    }

private:
    pid_t pid_ = -1;
    int pipe_ = -1;
};

// Runs body(rank) in n child processes and returns their outcomes.
inline std::vector<std::string> run_processes(int n, const std::function<std::string(int)>& body,
                                              std::chrono::milliseconds limit = std::chrono::seconds(60))
{
    std::vector<std::unique_ptr<child_process>> children;
    for (int rank = 0; rank < n; ++rank)
        children.push_back(std::make_unique<child_process>([&body, rank] { return body(rank); }));
    std::vector<std::string> outcomes;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (auto& child : children)
        outcomes.push_back(child->finish(
            std::max(std::chrono::milliseconds(1), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                       deadline - std::chrono::steady_clock::now()))));
    return outcomes;
}

} // namespace gradsync_test
