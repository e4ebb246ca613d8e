// Elastic training as a user runs it: the example examples/torch/elastic_fashion_mnist.cpp
// (GRADSYNC_ELASTIC_TRAINER names the built program) trains LeNet on Fashion-MNIST in one
// process per host, started by the test in its host's network with its output to a file of
// its own, against a redis-server of the case's own (redis_server.hpp). The faults: a process
// SIGKILLed in the middle of a backward pass (the example's fault drill), its host starting it
// again, a cut link, two failures in a row, a failure while the others re-form, the store
// restarted, a stranger, a stale process, too few ranks left. Every case checks that the
// survivors finish every epoch with the same parameters, bit for bit (the hash each prints),
// and states the time from the fault to their next completed step; after the kill, those are
// also the parameters of three processes that resumed from the commit the survivors went back
// to (the example's --checkpoint and --resume) and ran on uninterrupted.
//
// Run alone, on this host's loopback (process i at 127.0.0.(i + 1)); with
// GRADSYNC_ELASTIC_ACROSS_HOSTS=1 (the test cluster's cluster.gloo.elastic_training) each on
// host i + 1, the server on the cluster's bridge (cluster_hosts.hpp); GRADSYNC_CLUSTER_SCRIPT
// names scripts/cluster.sh, which cuts a link.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include <gradsync/comm/gloo/redis_store.hpp>

#include "child_process.hpp"
#include "cluster_hosts.hpp"
#include "redis_server.hpp"
#include "scratch_dir.hpp"

namespace {

using namespace std::chrono_literals;
using gradsync_test::child_process;

const gradsync_test::cluster_hosts& hosts()
{
    static const gradsync_test::cluster_hosts h("GRADSYNC_ELASTIC_ACROSS_HOSTS");
    return h;
}

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// The deadline and lease every case gives: the goal for a recovery is deadline + 2 s.
constexpr long deadline_ms = 1500, lease_ms = 600;

// One training job: its server, and its processes (the i-th started on `host`, output in
// out[i]).
struct job {
    gradsync_test::redis_server server{hosts().root_address()};
    gradsync_test::scratch_dir dir{"gradsync_elastic_training_"};
    std::string prefix;
    std::vector<std::string> common;
    std::vector<std::filesystem::path> out;
    std::vector<std::unique_ptr<child_process>> processes;

    // `images` training images, 2 epochs, at least `min_ranks`, the first step once `start_ranks`
    // are in (the fault drills count steps from the start: a process still loading its data
    // while the others took step K would miss its drill).
    explicit job(std::string job_prefix, long images = 6000, int min_ranks = 2, int start_ranks = 4)
        : prefix(std::move(job_prefix))
    {
        common = {"--store", hosts().root_address() + ":" + std::to_string(server.port()), "--prefix", prefix,
                  "--epochs", "2", "--train-limit", std::to_string(images), "--min-ranks", std::to_string(min_ranks),
                  "--start-ranks", std::to_string(start_ranks),
                  "--lease-ms", std::to_string(lease_ms), "--deadline-ms", std::to_string(deadline_ms),
                  "--formation-timeout-ms", "10000"};
    }

    // Starts a process on `host` with the job's options and `extra`; returns its index.
    std::size_t start(int host, const std::vector<std::string>& extra = {}, std::string password = {})
    {
        std::vector<std::string> args{GRADSYNC_ELASTIC_TRAINER};
        args.insert(args.end(), common.begin(), common.end());
        args.insert(args.end(), {"--address", hosts().address(host)});
        args.insert(args.end(), extra.begin(), extra.end());
        if (password.empty())
            password = server.password();
        const std::size_t i = out.size();
        out.push_back(dir.file("process" + std::to_string(i)));
        const std::string file = out.back().string();
        processes.push_back(std::make_unique<child_process>([args, file, password, host] {
            hosts().enter(host);
            const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
            if (fd < 0 || ::dup2(fd, 1) < 0 || ::dup2(fd, 2) < 0)
                return std::string("cannot write ") + file;
            ::setenv("GRADSYNC_REDIS_PASSWORD", password.c_str(), 1);
            std::vector<char*> argv;
            for (const std::string& a : args)
                argv.push_back(const_cast<char*>(a.c_str()));
            argv.push_back(nullptr);
            ::execv(argv[0], argv.data());
            return std::string("cannot start ") + args[0] + ": " + std::strerror(errno);
        }));
        return i;
    }

    // A process on each of hosts 1 to 4, each with `extra`; where fail_at is not negative, host
    // 4's SIGKILLs itself in the middle of that step's backward pass (the example's fault drill).
    void start_four(long fail_at = -1, const std::vector<std::string>& extra = {})
    {
        for (int host = 1; host <= 3; ++host)
            start(host, extra);
        std::vector<std::string> fourth = extra;
        if (fail_at >= 0)
            fourth.insert(fourth.end(), {"--fail-at-step", std::to_string(fail_at)});
        start(4, fourth);
    }

    std::string output(std::size_t i) const
    {
        std::ifstream in(out[i]);
        return {std::istreambuf_iterator<char>(in), {}};
    }

    // The t= of process i's first line that starts with `start`; NaN where there is none.
    double time_of(std::size_t i, const std::string& start) const
    {
        std::istringstream lines(output(i));
        for (std::string line; std::getline(lines, line);)
            if (line.rfind(start, 0) == 0 && line.find("t=") != std::string::npos)
                return std::stod(line.substr(line.rfind("t=") + 2));
        return std::nan("");
    }

    // Waits until one of the processes printed a line starting with `start` (a line rank 0
    // prints: which process is rank 0 depends on the order they joined in).
    void await(const std::string& start) const
    {
        const auto deadline = std::chrono::steady_clock::now() + 60s;
        const auto printed = [&](std::size_t i) {
            const std::string text = output(i);
            return text.rfind(start, 0) == 0 || text.find("\n" + start) != std::string::npos;
        };
        for (;;) {
            for (std::size_t i = 0; i < out.size(); ++i)
                if (printed(i))
                    return;
            REQUIRE(std::chrono::steady_clock::now() < deadline);
            std::this_thread::sleep_for(10ms);
        }
    }

    // The last generation process i said it was in ("joined: generation G", "restarted:
    // generation G"), plus `later`. The processes start together but may join in different
    // generations (one slower to start enters as a newcomer before the first step), so the
    // cases count from the generation a struck process was in.
    std::string generation_after(std::size_t i, int later = 1) const
    {
        std::istringstream lines(output(i));
        unsigned long last = 0;
        for (std::string line; std::getline(lines, line);)
            for (const char* start : {"joined: generation ", "restarted: generation "})
                if (line.rfind(start, 0) == 0)
                    last = std::stoul(line.substr(std::strlen(start)));
        return std::to_string(last + unsigned(later));
    }

    // Process i's result line as key=value pairs; empty where it printed none.
    std::map<std::string, std::string> result(std::size_t i) const
    {
        std::map<std::string, std::string> r;
        const std::string text = output(i);
        const std::size_t at = text.find("result ");
        if (at == std::string::npos)
            return r;
        std::istringstream words(text.substr(at + 7, text.find('\n', at) - at - 7));
        for (std::string w; words >> w;)
            if (const std::size_t eq = w.find('='); eq != std::string::npos)
                r[w.substr(0, eq)] = w.substr(eq + 1);
        return r;
    }

    // Ends process i (waiting up to `limit`) and returns how: "" for exit status 0.
    std::string finish(std::size_t i, std::chrono::milliseconds limit = 120s)
    {
        const std::string how = processes[i]->finish(limit);
        if (!how.empty() && how != "ended by signal 9")
            WARN("process " << i << ": " << how << "; its output:\n" << output(i));
        return how;
    }

    // The keys the job left in its store.
    std::vector<std::string> keys_left() const
    {
        gradsync::redis_store store(server.options());
        return store.keys_under(prefix + "/");
    }
};

// Processes `survivors` finished well, in one generation of their number: the generation
// given (or, where it is empty, the first survivor's), their ranks 0 .. n - 1, the same
// parameters; returns rank 0's test accuracy, and sets the generation.
double finished_together(job& j, const std::vector<std::size_t>& survivors, std::string& generation)
{
    for (std::size_t i : survivors)
        CHECK(j.finish(i) == "");
    if (generation.empty() && !j.result(survivors.front()).empty())
        generation = j.result(survivors.front()).at("generation");
    std::string parameters;
    std::vector<bool> ranks(survivors.size());
    for (std::size_t i : survivors) {
        const auto r = j.result(i);
        INFO("process " << i << ": " << j.output(i));
        REQUIRE(!r.empty());
        CHECK(r.at("generation") == generation);
        CHECK(r.at("ranks") == std::to_string(survivors.size()));
        ranks.at(std::size_t(std::stoi(r.at("rank")))) = true;
        if (parameters.empty())
            parameters = r.at("parameters");
        CHECK(r.at("parameters") == parameters);
    }
    CHECK(std::find(ranks.begin(), ranks.end(), false) == ranks.end());
    // Only the last generation's keys stay (and the generation's number): no lease, no key of
    // an earlier generation.
    for (const std::string& k : j.keys_left()) {
        INFO(k);
        CHECK((k == j.prefix + "/generation" || k.rfind(j.prefix + "/g" + generation + "/", 0) == 0));
    }
    return std::stod(j.result(survivors.front()).at("test_accuracy"));
}


// States, and checks against the goal, the time from `fault` (seconds on the monotonic clock)
// to each survivor's first completed step in `generation`.
void recovered(const job& j, const std::vector<std::size_t>& survivors, const std::string& generation, double fault,
               const char* what)
{
    for (std::size_t i : survivors) {
        const double ms = 1000 * (j.time_of(i, "resumed: generation " + generation + ",") - fault);
        WARN("process " << i << " (" << what << "): from the fault to its next step, in generation " << generation
                        << ": " << ms << " ms (deadline " << deadline_ms << " ms, lease " << lease_ms << " ms)");
        CHECK(ms > 0);
        CHECK(ms < deadline_ms + 2000);
    }
}

} // namespace

// The uninterrupted run to compare with starts from the commit the survivors went back to:
// the example writes it (--checkpoint), and three processes resume from it. Its data order
// and dropout follow from the position, so the two runs are the same computation.
TEST_CASE("elastic training: a process killed mid-backward: the survivors end as three that ran on from the same "
          "commit, bit for bit",
          "[hosts]")
{
    job j("kill");
    const std::string commit = j.dir.file("commit").string();
    j.start_four(40, {"--checkpoint", commit, "--checkpoint-step", "40"});
    CHECK(j.finish(3) == "ended by signal 9");
    std::string next = j.generation_after(3);
    const double killed = finished_together(j, {0, 1, 2}, next);
    recovered(j, {0, 1, 2}, next, j.time_of(3, "fault drill:"), "a kill mid-backward");

    job three("three", 6000, 3, 3);
    for (int host = 1; host <= 3; ++host)
        three.start(host, {"--resume", commit});
    std::string any;
    const double whole = finished_together(three, {0, 1, 2}, any);
    WARN("test accuracy: " << 100 * killed << "% with the kill, " << 100 * whole
                           << "% three that ran on from the same commit");
    CHECK(std::abs(killed - whole) <= 0.01);
    CHECK(j.result(0).at("parameters") == three.result(0).at("parameters"));
}

TEST_CASE("elastic training: the killed process's host starts it again and the job grows back to four", "[hosts]")
{
    job j("again");
    j.start_four(20);
    CHECK(j.finish(3) == "ended by signal 9");
    j.start(4);
    // The newcomer enters the survivors' re-formation where it came before its sealer wrote
    // the members, else the one after at a commit.
    std::string with;
    finished_together(j, {0, 1, 2, 4}, with);
    CHECK((with == j.generation_after(3) || with == j.generation_after(3, 2)));
    recovered(j, {0, 1, 2}, j.generation_after(3), j.time_of(3, "fault drill:"), "a kill mid-backward before a rejoin");
    CHECK(j.output(4).find("joined: generation " + with + ", rank 3 of 4") != std::string::npos);
}

// Hidden where the cases run alone: a link to cut needs the test cluster.
TEST_CASE("elastic training: a process whose link is cut is left out", "[.hosts]")
{
    REQUIRE(hosts().across());
    const char* script = std::getenv("GRADSYNC_CLUSTER_SCRIPT");
    REQUIRE(script != nullptr);
    job j("cut", 12000);
    j.start_four();
    j.await("epoch 1/2 done");
    const std::string link = std::string(script) + " link 4 ";
    const double cut = now_s();
    REQUIRE(std::system((link + "down").c_str()) == 0);
    std::string next = j.generation_after(3);
    const double accuracy = finished_together(j, {0, 1, 2}, next);
    REQUIRE(std::system((link + "up").c_str()) == 0);
    recovered(j, {0, 1, 2}, next, cut, "a cut link");
    CHECK(accuracy > 0.5);
    CHECK(j.finish(3) == "exited with status 1");
}

TEST_CASE("elastic training: two failures in a row", "[hosts]")
{
    job j("twice");
    j.start(1);
    j.start(2);
    j.start(3, {"--fail-at-step", "60"});
    j.start(4, {"--fail-at-step", "20"});
    CHECK(j.finish(3) == "ended by signal 9");
    CHECK(j.finish(2) == "ended by signal 9");
    std::string next = j.generation_after(2);
    finished_together(j, {0, 1}, next);
    recovered(j, {0, 1}, next, j.time_of(2, "fault drill:"), "the second of two kills");
}

TEST_CASE("elastic training: a process killed while the others re-form", "[hosts]")
{
    job j("reforming");
    j.start_four(20);
    CHECK(j.finish(3) == "ended by signal 9");
    std::this_thread::sleep_for(200ms); // the others wait for its lease to run out
    const double struck = now_s();
    j.processes[2]->signal(SIGKILL);
    CHECK(j.finish(2) == "ended by signal 9");
    // The next generation without both, or with the second (dead before connecting) and then
    // the one after.
    std::string last;
    finished_together(j, {0, 1}, last);
    CHECK((last == j.generation_after(3) || last == j.generation_after(3, 2)));
    recovered(j, {0, 1}, last, struck, "a kill while re-forming");
}

TEST_CASE("elastic training: the store restarted empty: the job goes on and still re-forms", "[hosts]")
{
    job j("restart", 12000);
    j.start_four();
    j.await("epoch 1/2 done");
    j.server.stop();
    std::this_thread::sleep_for(300ms);
    j.server.start();
    std::this_thread::sleep_for(700ms); // the leases, written again by their threads
    const double struck = now_s();
    j.processes[3]->signal(SIGKILL);
    CHECK(j.finish(3) == "ended by signal 9");
    std::string next = j.generation_after(3);
    finished_together(j, {0, 1, 2}, next);
    recovered(j, {0, 1, 2}, next, struck, "a kill after the store restarted");
}

TEST_CASE("elastic training: a stranger and a stale process are refused by name", "[hosts]")
{
    job j("stale", 12000);
    j.start_four();
    const std::size_t stranger = j.start(4, {}, "not-the-password");
    CHECK(j.finish(stranger) == "exited with status 1");
    CHECK(j.output(stranger).find("elastic_fashion_mnist: gradsync::redis_store") != std::string::npos);
    j.await("epoch 1/2 done");
    j.processes[3]->signal(SIGSTOP);
    std::this_thread::sleep_for(std::chrono::milliseconds(deadline_ms + 1000)); // past its lease and the deadline
    j.processes[3]->signal(SIGCONT);
    CHECK(j.finish(3) == "exited with status 1");
    std::string next = j.generation_after(3);
    CHECK(j.output(3).find("of generation " + j.generation_after(3, 0) + ", but generation " + next +
                           " was formed without it") != std::string::npos);
    finished_together(j, {0, 1, 2}, next);
}

TEST_CASE("elastic training: below min_ranks every survivor names it", "[hosts]")
{
    job j("few", 6000, 4);
    j.start_four(20);
    CHECK(j.finish(3) == "ended by signal 9");
    for (std::size_t i = 0; i < 3; ++i) {
        CHECK(j.finish(i) == "exited with status 1");
        CHECK(j.output(i).find("generation 2 was not formed: 3 living candidates, fewer than min_ranks 4") !=
              std::string::npos);
    }
}
