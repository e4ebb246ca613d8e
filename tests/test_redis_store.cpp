// redis_store against a real redis-server (redis_server.hpp): gloo's store contract, the
// membership operations, passwords, a server that is down or restarts, and gloo_connect's
// ranks (processes) meeting through it.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gradsync/comm/gloo/gloo.hpp>
#include <gradsync/comm/gloo/redis_store.hpp>
#include <gradsync/comm/gloo/rendezvous.hpp>

#include "child_process.hpp"
#include "cluster_hosts.hpp"
#include "redis_server.hpp"
#include "summed_exactly.hpp"
#include "thrown.hpp"

extern "C" const char* __tsan_default_suppressions() { return "race:libgloo.so\n"; }

namespace {

using namespace std::chrono_literals;
using gradsync::redis_store;
using gradsync_test::run_processes;
using gradsync_test::thrown;

} // namespace

TEST_CASE("redis_store: gloo's store contract: set once, get waits, wait names what is missing", "[redis]")
{
    gradsync_test::redis_server server;
    redis_store store(server.options(2s));
    store.set("job/a", {'x', '\0', 'y'}); // binary values survive
    CHECK(store.get("job/a") == std::vector<char>{'x', '\0', 'y'});

    const std::string twice = thrown([&] { store.set("job/a", {'z'}); });
    CHECK(twice.rfind("communication_error:", 0) == 0);
    CHECK(twice.find("\"job/a\" was written already") != std::string::npos);
    CHECK(store.get("job/a") == std::vector<char>{'x', '\0', 'y'});

    std::thread later([&] {
        std::this_thread::sleep_for(100ms);
        redis_store other(server.options());
        other.set("job/b", {'1'});
    });
    const auto start = std::chrono::steady_clock::now();
    CHECK(store.get("job/b") == std::vector<char>{'1'});
    CHECK(std::chrono::steady_clock::now() - start >= 100ms);
    later.join();

    const auto waited_from = std::chrono::steady_clock::now();
    const std::string missing = thrown([&] { store.wait({"job/a", "job/c", "job/d"}, 300ms); });
    CHECK(std::chrono::steady_clock::now() - waited_from >= 300ms);
    CHECK(missing.rfind("deadline_error:", 0) == 0);
    CHECK(missing.find("\"job/c\", \"job/d\" (still missing)") != std::string::npos);
    CHECK(missing.find(":" + std::to_string(server.port())) != std::string::npos);
}

TEST_CASE("redis_store: membership operations: create, write, leases, counters, keys by prefix", "[redis]")
{
    gradsync_test::redis_server server;
    redis_store store(server.options());

    CHECK(store.create("m/lease", "1", 300ms));
    CHECK_FALSE(store.create("m/lease", "2"));
    CHECK(store.read("m/lease") == "1");
    CHECK(store.renew("m/lease", 5000ms));
    std::this_thread::sleep_for(500ms);
    CHECK(store.read("m/lease") == "1"); // renewed past its first lease

    store.write("m/short", "a", 100ms);
    store.write("m/short", "b", 100ms); // write replaces
    CHECK(store.read("m/short") == "b");
    std::this_thread::sleep_for(600ms);
    CHECK_FALSE(store.read("m/short").has_value());
    CHECK_FALSE(store.renew("m/short", 100ms));

    CHECK(store.increment("m/count") == 1);
    CHECK(store.increment("m/count", 41) == 42);

    // A prefix with the glob's own characters is taken literally.
    store.write("m/[x]*/1", "");
    store.write("m/[x]*/2", "");
    store.write("m/x/3", "");
    CHECK(store.keys_under("m/[x]*/") == std::vector<std::string>{"m/[x]*/1", "m/[x]*/2"});
    CHECK(store.keys_under("nothing/").empty());
    CHECK(store.erase({"m/[x]*/1", "m/[x]*/2", "m/none"}) == 2);
    CHECK(store.keys_under("m/[x]*/").empty());

    CHECK(thrown([&] { store.renew("m/count", 0ms); }).rfind("usage_error:", 0) == 0);
    CHECK(thrown([&] { store.create("m/neg", "", -1ms); }).rfind("usage_error:", 0) == 0);
}

TEST_CASE("redis_store: keys set by gloo's contract expire after redis_options::lease", "[redis]")
{
    gradsync_test::redis_server server;
    gradsync::redis_options options = server.options();
    options.lease = 200ms;
    redis_store store(options);
    store.set("leased", {'1'});
    CHECK(store.read("leased") == "1");
    std::this_thread::sleep_for(700ms);
    CHECK_FALSE(store.read("leased").has_value());
}

TEST_CASE("redis_store: increments from four processes at once are counted exactly once each", "[redis]")
{
    gradsync_test::redis_server server;
    const auto outcomes = run_processes(4, [&](int) {
        redis_store store(server.options());
        for (int i = 0; i < 500; ++i)
            store.increment("counter");
        return std::string();
    });
    CHECK(outcomes == std::vector<std::string>(4));
    CHECK(redis_store(server.options()).read("counter") == "2000");
}

TEST_CASE("redis_store: threads share one store", "[redis]")
{
    gradsync_test::redis_server server;
    redis_store store(server.options());
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t)
        threads.emplace_back([&] {
            for (int i = 0; i < 300; ++i)
                store.increment("shared");
        });
    for (std::thread& t : threads)
        t.join();
    CHECK(store.read("shared") == "900");
}

TEST_CASE("redis_store: a refused or missing password is a usage_error naming the server", "[redis]")
{
    gradsync_test::redis_server server;
    gradsync::redis_options wrong = server.options();
    wrong.password = "not-" + server.password();
    const std::string refused = thrown([&] { redis_store store(wrong); });
    INFO(refused);
    CHECK(refused.rfind("usage_error:", 0) == 0);
    CHECK(refused.find("127.0.0.1:" + std::to_string(server.port())) != std::string::npos);
    CHECK(refused.find("refused the password") != std::string::npos);

    gradsync::redis_options none = server.options();
    none.password.clear();
    redis_store anonymous(none); // connecting needs no password; the first command does
    const std::string needed = thrown([&] { anonymous.read("k"); });
    INFO(needed);
    CHECK(needed.rfind("usage_error:", 0) == 0);
    CHECK(needed.find("redis_options::password") != std::string::npos);

    CHECK(thrown([&] { redis_store store({.port = 0}); }).rfind("usage_error:", 0) == 0);
}

TEST_CASE("redis_store: a server that is not there is named once the timeout has passed", "[redis]")
{
    int port = 0;
    {
        gradsync_test::redis_server server;
        port = server.port();
    }
    const auto start = std::chrono::steady_clock::now();
    const std::string outcome = thrown([&] { redis_store store({.port = port, .timeout = 400ms}); });
    INFO(outcome);
    CHECK(std::chrono::steady_clock::now() - start >= 400ms);
    CHECK(outcome.rfind("communication_error:", 0) == 0);
    CHECK(outcome.find("127.0.0.1:" + std::to_string(port) + ": cannot reach the server") != std::string::npos);
}

TEST_CASE("redis_store: a wait outlives a restart of the server, which comes back empty", "[redis]")
{
    gradsync_test::redis_server server;
    redis_store store(server.options(10s));
    store.write("before", "1");
    std::vector<char> got;
    std::string failure;
    std::thread waiter([&] { failure = thrown([&] { got = store.get("after"); }); });
    std::this_thread::sleep_for(100ms);
    server.stop(); // restarted from this thread: the server dies with the thread that started it
    std::this_thread::sleep_for(300ms);
    server.start();
    redis_store(server.options()).set("after", {'2'});
    waiter.join();
    CHECK(failure == "");
    CHECK(got == std::vector<char>{'2'});
    CHECK_FALSE(store.read("before").has_value());
}

// Run alone, on loopback; with GRADSYNC_REDIS_ACROSS_HOSTS=1 (the test cluster's
// cluster.gloo.redis, which runs only this case), rank r on host r + 1 and the server on the
// cluster's bridge (cluster_hosts.hpp).
TEST_CASE("redis_store: gloo_connect's ranks meet through it and reduce exactly", "[redis][hosts]")
{
    const gradsync_test::cluster_hosts hosts("GRADSYNC_REDIS_ACROSS_HOSTS");
    gradsync_test::redis_server server(hosts.root_address());
    const int n = 3;
    const auto outcomes = run_processes(n, [&](int rank) {
        hosts.enter(rank + 1);
        redis_store store(server.options(20s));
        gradsync::gloo_connect_options connect;
        connect.hostname = hosts.address(rank + 1);
        connect.timeout = 20s;
        connect.prefix = "job7";
        gradsync::gloo_communicator comm(gradsync::gloo_connect(store, rank, n, connect));
        return gradsync_test::summed_exactly(comm, rank, n, 100003);
    });
    CHECK(outcomes == std::vector<std::string>(n));
    // The ranks met in this server, under their prefix.
    const std::vector<std::string> keys = redis_store(server.options()).keys_under("job7/connected/");
    CHECK(keys == std::vector<std::string>{"job7/connected/0", "job7/connected/1", "job7/connected/2"});
}
