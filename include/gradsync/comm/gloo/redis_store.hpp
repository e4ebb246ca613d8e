// redis_store: a store on a Redis server, which ranks on any host reach over TCP: the rendezvous
// of gloo_connect (a gloo::rendezvous::Store), and the keys a membership needs beyond it:
// counters that every client increments atomically, keys that expire unless renewed (a
// lease), keys created only if absent, keys listed by prefix and erased.
//
// Why not gloo's own RedisStore: it sends no password, so any client that reaches the server
// could plant a rank's address (docs/cluster.md, "Who may join"), it waits without a deadline
// of its own, and it has none of the membership operations. This client speaks the same
// protocol through hiredis, the library gloo's uses.
//
// Behaviour:
//   - every command runs under a lock, so threads may share one store (a lease renewed by a
//     background thread while the training thread waits on a key);
//   - a lost connection (the server restarted, a link cut) is made again and the command
//     retried until `timeout` has passed since the command began; then a communication_error
//     names the server and what failed. So a command may run twice: increment() may then
//     count twice, which callers that need a value once must allow (a generation number that
//     skips one);
//   - a password the server refuses, or none where it asks for one, is a usage_error;
//   - set() writes a key once, as gloo's FileStore does: a key that exists is a
//     communication_error naming it, so an address planted before a rank writes its own is
//     found instead of used;
//   - wait() polls, from 1 ms doubling to 32 ms between looks, and ends with a deadline_error
//     naming the keys still missing;
//   - keys written by set() expire after redis_options::lease where that is not zero, so a job
//     that dies leaves nothing in the server beyond the lease.
// The server keeps its keys in memory: one that restarts without persistence comes back
// empty, which the caller sees as keys that are gone (a lease to renew again, a key to wait
// for again).
#pragma once

#include <hiredis/hiredis.h>

#include <gloo/rendezvous/store.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <sys/time.h>

#include <gradsync/core/error.hpp>

namespace gradsync {

struct redis_options {
    std::string host = "127.0.0.1";
    int port = 6379;
    // Sent with AUTH once connected (the server's requirepass); empty: no AUTH.
    std::string password{};
    // Connecting and each command, retries included; and wait()'s deadline where the caller
    // gives none.
    std::chrono::milliseconds timeout{30000};
    // How long a key written by set() lives; 0: until erased.
    std::chrono::milliseconds lease{0};
};

class redis_store final : public gloo::rendezvous::Store {
public:
    using milliseconds = std::chrono::milliseconds;

    // Connects and authenticates at once, so a wrong address or password is named here.
    explicit redis_store(redis_options options) : options_(std::move(options))
    {
        if (options_.port < 1 || options_.port > 65535)
            throw usage_error(where() + ": the port must be 1 to 65535");
        if (options_.timeout.count() <= 0 || options_.lease.count() < 0)
            throw usage_error(where() + ": the timeout must be positive and the lease not negative");
        std::lock_guard lock(mutex_);
        connect(clock::now() + options_.timeout);
    }

    redis_store(const redis_store&) = delete;
    redis_store& operator=(const redis_store&) = delete;

    const redis_options& options() const noexcept { return options_; }

    // gloo::rendezvous::Store: writes key once (see above).
    void set(const std::string& key, const std::vector<char>& data) override
    {
        if (!create(key, std::string(data.begin(), data.end()), options_.lease))
            throw communication_error(where() + ": the key \"" + key +
                                      "\" was written already (by a second rank of the same number, a stale job "
                                      "under the same prefix, or another client of the server)");
    }

    // gloo::rendezvous::Store: waits for key, then reads it.
    std::vector<char> get(const std::string& key) override
    {
        wait({key}, options_.timeout);
        const std::optional<std::string> value = read(key);
        if (!value)
            throw communication_error(where() + ": the key \"" + key + "\" was erased while it was being read");
        return {value->begin(), value->end()};
    }

    void wait(const std::vector<std::string>& keys) override { wait(keys, options_.timeout); }

    void wait(const std::vector<std::string>& keys, const milliseconds& timeout) override
    {
        if (keys.empty())
            return;
        const auto deadline = clock::now() + timeout;
        milliseconds pause(1);
        for (;;) {
            std::vector<std::string> command{"EXISTS"};
            command.insert(command.end(), keys.begin(), keys.end());
            if (run(command, deadline).integer == std::int64_t(keys.size()))
                return;
            if (clock::now() >= deadline)
                throw deadline_error(where() + ": waited " + std::to_string(timeout.count()) + " ms for " +
                                     missing(keys));
            std::this_thread::sleep_for(std::min(pause, std::chrono::duration_cast<milliseconds>(
                                                            std::max(deadline - clock::now(), clock::duration(0)))));
            pause = std::min(pause * 2, milliseconds(32));
        }
    }

    // The key's value, or nothing where it does not exist.
    std::optional<std::string> read(const std::string& key) { return run({"GET", key}).text; }

    // Writes key only where it does not exist, to expire after `lease` (0: never). Returns
    // whether it was written.
    bool create(const std::string& key, const std::string& value, milliseconds lease = milliseconds(0))
    {
        std::vector<std::string> command{"SET", key, value, "NX"};
        with_lease(command, lease);
        return run(command).text.has_value();
    }

    // Writes key whether or not it exists, to expire after `lease` (0: never).
    void write(const std::string& key, const std::string& value, milliseconds lease = milliseconds(0))
    {
        std::vector<std::string> command{"SET", key, value};
        with_lease(command, lease);
        run(command);
    }

    // Gives key `lease` more to live from now; false where it no longer exists.
    bool renew(const std::string& key, milliseconds lease)
    {
        if (lease.count() <= 0)
            throw usage_error(where() + ": renew(\"" + key + "\") needs a positive lease");
        return run({"PEXPIRE", key, std::to_string(lease.count())}).integer == 1;
    }

    // Adds by to the counter at key (0 where absent), atomically; returns the new value.
    std::int64_t increment(const std::string& key, std::int64_t by = 1)
    {
        return run({"INCRBY", key, std::to_string(by)}).integer;
    }

    // Erases the keys; returns how many existed.
    std::size_t erase(const std::vector<std::string>& keys)
    {
        if (keys.empty())
            return 0;
        std::vector<std::string> command{"DEL"};
        command.insert(command.end(), keys.begin(), keys.end());
        return std::size_t(run(command).integer);
    }

    // Every key that begins with prefix, in no order.
    std::vector<std::string> keys_under(const std::string& prefix)
    {
        std::string pattern;
        for (char c : prefix) {
            if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\')
                pattern += '\\';
            pattern += c;
        }
        pattern += '*';
        std::vector<std::string> found;
        std::string cursor = "0";
        do {
            reply page = run({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
            cursor = page.items.at(0);
            found.insert(found.end(), page.items.begin() + 1, page.items.end());
        } while (cursor != "0");
        std::sort(found.begin(), found.end());
        found.erase(std::unique(found.begin(), found.end()), found.end()); // SCAN may return a key twice
        return found;
    }

private:
    using clock = std::chrono::steady_clock;

    struct context_free {
        void operator()(redisContext* c) const noexcept { redisFree(c); }
    };
    struct reply_free {
        void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
    };

    // What a command answered: a string (none for nil), an integer, or, for SCAN, the cursor
    // then the keys.
    struct reply {
        std::optional<std::string> text;
        std::int64_t integer = 0;
        std::vector<std::string> items;
    };

    std::string where() const { return "gradsync::redis_store " + options_.host + ":" + std::to_string(options_.port); }

    static timeval timeval_of(clock::duration d)
    {
        const auto us = std::max<std::int64_t>(1000, std::chrono::duration_cast<std::chrono::microseconds>(d).count());
        return {static_cast<time_t>(us / 1000000), static_cast<suseconds_t>(us % 1000000)};
    }

    static void with_lease(std::vector<std::string>& command, milliseconds lease)
    {
        if (lease.count() < 0)
            throw usage_error("gradsync::redis_store: a lease must not be negative");
        if (lease.count() > 0) {
            command.push_back("PX");
            command.push_back(std::to_string(lease.count()));
        }
    }

    // Which of keys are missing, for a wait's error: asked of the server for at most a second
    // more, so a server gone at the deadline does not double the wait.
    std::string missing(const std::vector<std::string>& keys)
    {
        const auto deadline = clock::now() + std::min(options_.timeout, milliseconds(1000));
        std::string names;
        std::size_t absent = 0;
        for (const std::string& key : keys) {
            try {
                if (run({"EXISTS", key}, deadline).integer)
                    continue;
            } catch (const communication_error&) {
                return "the keys (the server could not be asked which were missing)";
            }
            if (++absent <= 4)
                names += (names.empty() ? "\"" : ", \"") + key + "\"";
        }
        if (absent > 4)
            names += " and " + std::to_string(absent - 4) + " more";
        return absent ? "the keys " + names + " (still missing)" : "keys that appeared as the wait ended";
    }

    // Connects (again) and authenticates, retrying a server that cannot be reached until
    // deadline. Called with mutex_ held.
    void connect(clock::time_point deadline)
    {
        std::string failure;
        for (;;) {
            context_.reset(redisConnectWithTimeout(options_.host.c_str(), options_.port,
                                                   timeval_of(deadline - clock::now())));
            if (!context_)
                failure = "no memory for a connection";
            else if (context_->err)
                failure = context_->errstr;
            else {
                redisSetTimeout(context_.get(), timeval_of(options_.timeout));
                redisEnableKeepAlive(context_.get());
                if (options_.password.empty())
                    return;
                const char* argv[] = {"AUTH", options_.password.c_str()};
                const std::size_t lengths[] = {4, options_.password.size()};
                std::unique_ptr<redisReply, reply_free> answer(
                    static_cast<redisReply*>(redisCommandArgv(context_.get(), 2, argv, lengths)));
                if (answer && answer->type != REDIS_REPLY_ERROR)
                    return;
                if (answer)
                    throw usage_error(where() + ": the server refused the password (" + answer->str + ")");
                failure = context_->errstr;
            }
            context_.reset();
            if (clock::now() >= deadline)
                throw communication_error(where() + ": cannot reach the server: " + failure);
            std::this_thread::sleep_for(milliseconds(50));
        }
    }

    reply run(const std::vector<std::string>& command) { return run(command, clock::now() + options_.timeout); }

    reply run(const std::vector<std::string>& command, clock::time_point deadline)
    {
        std::vector<const char*> argv;
        std::vector<std::size_t> lengths;
        for (const std::string& part : command) {
            argv.push_back(part.data());
            lengths.push_back(part.size());
        }
        std::lock_guard lock(mutex_);
        for (;;) {
            if (!context_)
                connect(deadline);
            std::unique_ptr<redisReply, reply_free> answer(static_cast<redisReply*>(
                redisCommandArgv(context_.get(), int(argv.size()), argv.data(), lengths.data())));
            if (answer) {
                if (answer->type != REDIS_REPLY_ERROR)
                    return reply_of(*answer);
                const std::string text(answer->str, answer->len);
                if (text.rfind("NOAUTH", 0) == 0 || text.rfind("WRONGPASS", 0) == 0)
                    throw usage_error(where() + ": " + command[0] + " refused: " + text +
                                      (options_.password.empty() ? " (the server needs a password: redis_options::password)"
                                                                 : ""));
                if (text.rfind("LOADING", 0) != 0)
                    throw communication_error(where() + ": " + command[0] + " failed: " + text);
            }
            const std::string failure = answer ? "the server is loading its data" : context_->errstr;
            context_.reset();
            if (clock::now() >= deadline)
                throw communication_error(where() + ": " + command[0] + " failed: " + failure);
            std::this_thread::sleep_for(milliseconds(50));
        }
    }

    static reply reply_of(const redisReply& r)
    {
        reply out;
        switch (r.type) {
        case REDIS_REPLY_STRING:
        case REDIS_REPLY_STATUS: out.text.emplace(r.str, r.len); break;
        case REDIS_REPLY_INTEGER: out.integer = r.integer; break;
        case REDIS_REPLY_ARRAY: // SCAN: [cursor, [keys...]]
            for (std::size_t i = 0; i < r.elements; ++i) {
                const redisReply& e = *r.element[i];
                if (e.type == REDIS_REPLY_ARRAY)
                    for (std::size_t j = 0; j < e.elements; ++j)
                        out.items.emplace_back(e.element[j]->str, e.element[j]->len);
                else
                    out.items.emplace_back(e.str, e.len);
            }
            break;
        default: break; // nil
        }
        return out;
    }

    redis_options options_;
    std::mutex mutex_;
    std::unique_ptr<redisContext, context_free> context_;
};

} // namespace gradsync
