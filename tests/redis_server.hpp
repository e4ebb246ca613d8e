// A Redis server of the test's own: redis-server (Debian's redis-server package) on a free
// port of the address it is given (loopback by default), with a password and no persistence, in a scratch directory, as a child that
// the kernel kills if the test dies (PR_SET_PDEATHSIG: when the thread that started it ends,
// so start it from a thread that outlives it). stop() and start() restart it on the same port,
// empty, as a server that restarts without persistence comes back. The object's end stops it
// and removes its directory.
#pragma once

#include <chrono>
#include <csignal>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include <hiredis/hiredis.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gradsync/comm/gloo/redis_store.hpp>

#include "scratch_dir.hpp"

namespace gradsync_test {

class redis_server {
public:
    explicit redis_server(std::string address = "127.0.0.1")
        : dir_("gradsync_redis_"), address_(std::move(address)),
          password_("pw" + std::to_string(std::random_device{}()))
    {
        for (int attempt = 0; attempt < 8 && !pid_; ++attempt) {
            port_ = free_port(address_);
            start();
        }
        if (!pid_)
            throw std::runtime_error("redis_server: redis-server did not start on " + address_ +
                                     " (is Debian's redis-server installed?); its log ends: " + log_end());
    }
    ~redis_server() { stop(); }
    redis_server(const redis_server&) = delete;
    redis_server& operator=(const redis_server&) = delete;

    int port() const noexcept { return port_; }
    const std::string& password() const noexcept { return password_; }

    gradsync::redis_options options(std::chrono::milliseconds timeout = std::chrono::seconds(10)) const
    {
        return {.host = address_, .port = port_, .password = password_, .timeout = timeout};
    }

    // Starts the server on port(); returns once it answers, or leaves pid() 0 where it exited.
    void start()
    {
        const std::string conf = (dir_.path() / "redis.conf").string();
        {
            std::ofstream out(conf);
            out << "port " << port_ << "\nbind " << address_ << "\nprotected-mode yes\nrequirepass " << password_
                << "\nsave \"\"\nappendonly no\ndir " << dir_.path().string() << "\nlogfile "
                << (dir_.path() / "redis.log").string() << "\n";
        }
        ::chmod(conf.c_str(), 0600);
        const pid_t parent = ::getpid();
        const pid_t child = ::fork();
        if (child == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (::getppid() != parent)
                ::_exit(1);
            ::execlp("redis-server", "redis-server", conf.c_str(), static_cast<char*>(nullptr));
            ::_exit(127);
        }
        pid_ = child;
        for (int tries = 0; tries < 500; ++tries) {
            if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
                pid_ = 0;
                return;
            }
            if (answers())
                return;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        stop();
    }

    // Stops the server and waits for it to end.
    void stop()
    {
        if (!pid_)
            return;
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        pid_ = 0;
    }

private:
    static int free_port(const std::string& address)
    {
        const int s = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        ::inet_pton(AF_INET, address.c_str(), &a.sin_addr);
        socklen_t length = sizeof a;
        ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
        ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &length);
        ::close(s);
        return ntohs(a.sin_port);
    }

    std::string log_end() const
    {
        std::ifstream in(dir_.path() / "redis.log");
        std::string line, last;
        while (std::getline(in, line))
            if (!line.empty())
                last = line;
        return last.empty() ? "(nothing)" : last;
    }

    bool answers() const
    {
        redisContext* c = redisConnectWithTimeout(address_.c_str(), port_, timeval{0, 200000});
        bool up = false;
        if (c && !c->err) {
            auto* r = static_cast<redisReply*>(redisCommand(c, "AUTH %s", password_.c_str()));
            up = r && r->type == REDIS_REPLY_STATUS;
            if (r)
                freeReplyObject(r);
        }
        if (c)
            redisFree(c);
        return up;
    }

    scratch_dir dir_;
    std::string address_;
    std::string password_;
    int port_ = 0;
    pid_t pid_ = 0;
};

} // namespace gradsync_test
