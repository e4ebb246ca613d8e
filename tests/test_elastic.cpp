// elastic_group with a redis-server of each case's own (redis_server.hpp) and every member a
// child process (child_process.hpp): a member killed or stopped mid-step, a newcomer, too few
// members left; across hosts also a member whose link is cut. Each member runs steps of an
// exact allreduce (summed_exactly.hpp: its sums checked for the generation's size) and
// re-forms the group when a step fails, as a training loop does; it reports every step to a
// file of its own, from which the test learns when to strike and how long recovery took.
//
// Run alone, on this host's loopback (member i at 127.0.0.(i + 1)). With
// GRADSYNC_ELASTIC_ACROSS_HOSTS=1 (the test cluster's cluster.gloo.elastic, which runs the
// cases tagged hosts), member i on host i + 1 and the server on the cluster's bridge
// (cluster_hosts.hpp); GRADSYNC_CLUSTER_SCRIPT names scripts/cluster.sh, which cuts a link.
#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gradsync/elastic/group.hpp>

#include "child_process.hpp"
#include "cluster_hosts.hpp"
#include "redis_server.hpp"
#include "scratch_dir.hpp"
#include "summed_exactly.hpp"

extern "C" const char* __tsan_default_suppressions() { return "race:libgloo.so\n"; }

namespace {

using namespace std::chrono_literals;
using gradsync_test::child_process;
using gradsync_test::thrown;
using clock_type = std::chrono::steady_clock;

// A member's last step, as it wrote it: generation, size, steps done in this generation, and
// when (steady_clock, which every process of the host shares), in nanoseconds.
struct progress {
    std::uint64_t generation = 0;
    int size = 0;
    long steps = 0;
    long long at = 0;
};

progress read_progress(const std::filesystem::path& file)
{
    progress p;
    std::ifstream in(file);
    in >> p.generation >> p.size >> p.steps >> p.at;
    return p;
}

long long now_ns()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now().time_since_epoch()).count();
}

gradsync::elastic_options options_for(int min_ranks)
{
    gradsync::elastic_options o;
    o.prefix = "job";
    o.min_ranks = min_ranks;
    o.lease = 600ms;
    o.join_window = 100ms;
    o.formation_timeout = 3s;
    o.connect.timeout = 10s;
    o.communicator.deadline = 1500ms;
    return o;
}

// A member: joins, then runs steps until it has done `steps` in a generation of `size` ranks;
// a failed step re-forms the group. Writes its progress to `file` after every step, and when
// it completed its first step after a failure to `file`.recovered.
const gradsync_test::cluster_hosts& hosts()
{
    static const gradsync_test::cluster_hosts h("GRADSYNC_ELASTIC_ACROSS_HOSTS");
    return h;
}

std::string member(const gradsync_test::redis_server& server, gradsync::elastic_options options,
                   const std::filesystem::path& file, int host, int size, long steps)
{
    hosts().enter(host);
    options.connect.hostname = hosts().address(host);
    gradsync::redis_store store(server.options());
    gradsync::elastic_group group(store, options);
    long done = 0;
    bool failed = false;
    try {
        for (;;) {
            try {
                if (group.joiners_waiting()) {
                    group.reform();
                    done = 0;
                    continue;
                }
                if (std::string wrong =
                        gradsync_test::summed_exactly(group.comm(), group.rank(), group.size(), 4099);
                    !wrong.empty())
                    return "generation " + std::to_string(group.generation()) + ": " + wrong;
                ++done;
                if (failed) {
                    std::ofstream(file.string() + ".recovered") << now_ns();
                    failed = false;
                }
                std::ofstream(file) << group.generation() << ' ' << group.size() << ' ' << done << ' ' << now_ns();
                if (group.size() == size && done >= steps)
                    return "";
            } catch (const gradsync::membership_error&) {
                throw;
            } catch (const gradsync::usage_error&) {
                throw;
            } catch (const gradsync::error&) { // a peer lost: communication, deadline, aborted, or calls split by it
                failed = true;
                group.reform();
                done = 0;
            }
        }
    } catch (const gradsync::membership_error& e) {
        // A group whose reform() threw has no communicator left, and says so.
        throw gradsync::membership_error(e.what() + (", after it, comm(): " + thrown([&] { group.comm(); })));
    }
}

// Waits until every file's member has done `steps` in generation `generation`.
void await(const std::vector<std::filesystem::path>& files, std::uint64_t generation, long steps)
{
    const auto deadline = clock_type::now() + 60s;
    for (const auto& f : files)
        while (true) {
            const progress p = read_progress(f);
            if (p.generation == generation && p.steps >= steps)
                break;
            REQUIRE(clock_type::now() < deadline);
            std::this_thread::sleep_for(5ms);
        }
}

// From `struck` (now_ns()) to the member's first completed step after the failure.
double recovery_ms(const std::filesystem::path& file, long long struck)
{
    long long at = 0;
    std::ifstream(file.string() + ".recovered") >> at;
    return double(at - struck) / 1e6;
}

// A job: its server, its members' files, and its members (member i on host i + 1).
struct job {
    gradsync_test::redis_server server{hosts().root_address()};
    gradsync_test::scratch_dir dir{"gradsync_elastic_"};
    gradsync::elastic_options options;
    std::vector<std::filesystem::path> files;
    std::vector<std::unique_ptr<child_process>> members;

    explicit job(int min_ranks) : options(options_for(min_ranks)) {}

    // Starts a member that runs until it has done `steps` in a generation of `size`.
    void start(int size, long steps)
    {
        const std::size_t i = files.size();
        files.push_back(dir.file("member" + std::to_string(i)));
        members.push_back(std::make_unique<child_process>(
            [this, i, size, steps] { return member(server, options, files[i], int(i) + 1, size, steps); }));
    }

    // Starts n members and waits until they have done `warm` steps in generation 1.
    void start_all(int n, int size, long steps, long warm)
    {
        for (int i = 0; i < n; ++i)
            start(size, steps);
        await(files, 1, warm);
    }

    // Kills member i, waits for it, and returns when it was struck.
    long long kill(int i)
    {
        const long long struck = now_ns();
        members[i]->signal(SIGKILL);
        CHECK(members[i]->finish(10s) == "ended by signal 9");
        return struck;
    }
};

} // namespace

// Checks that members 0 .. alive-1 ended well, all in one generation of `alive` ranks, the
// generation given (or, where it is 0, any after the first), and says how long each took from
// the last fault, at `struck`, to its next completed step.
void survivors_went_on(job& j, int alive, std::uint64_t generation, const char* fault, long long struck)
{
    std::uint64_t last = 0;
    for (int i = 0; i < alive; ++i) {
        CHECK(j.members[i]->finish(60s) == "");
        const progress p = read_progress(j.files[i]);
        CHECK((generation ? p.generation == generation : p.generation > 1));
        CHECK((i == 0 || p.generation == last));
        last = p.generation;
        CHECK(p.size == alive);
        WARN("member " << i << " (" << fault << "): from the fault to its next step, in generation " << p.generation
                       << ": " << recovery_ms(j.files[i], struck) << " ms (deadline 1500 ms, lease 600 ms)");
    }
}

TEST_CASE("elastic_group: a member killed mid-step costs the others one re-formation", "[elastic][hosts]")
{
    job j(2);
    const int n = hosts().across() ? 4 : 3;
    j.start_all(n, n - 1, 30, 20);
    survivors_went_on(j, n - 1, 2, "a kill", j.kill(n - 1));
    gradsync::redis_store store(j.server.options());
    CHECK(store.keys_under("job/alive/").empty()); // every member took its lease away, or it expired
}

// Hidden where the cases run alone: a link to cut needs the test cluster.
TEST_CASE("elastic_group: a member whose link is cut is left out, and cannot come back in", "[.hosts]")
{
    REQUIRE(hosts().across());
    const char* script = std::getenv("GRADSYNC_CLUSTER_SCRIPT");
    REQUIRE(script != nullptr);
    job j(2);
    j.start_all(4, 3, 30, 20);
    const std::string link = std::string(script) + " link 4 ";
    const long long struck = now_ns();
    REQUIRE(std::system((link + "down").c_str()) == 0);
    survivors_went_on(j, 3, 2, "a cut link", struck);
    REQUIRE(std::system((link + "up").c_str()) == 0);
    // Cut off from the store too, it names the store once its timeout has passed, or, where
    // the link came back first, itself as stale.
    const std::string cut = j.members[3]->finish(60s);
    INFO(cut);
    CHECK((cut.find("cannot reach the server") != std::string::npos ||
           cut.find("stale: rank 3 of generation 1") != std::string::npos));
}

TEST_CASE("elastic_group: two failures in a row, each costing one re-formation", "[elastic][hosts]")
{
    job j(2);
    j.start_all(4, 2, 20, 10);
    j.kill(3);
    await({j.files[0], j.files[1], j.files[2]}, 2, 5);
    survivors_went_on(j, 2, 3, "the second of two kills", j.kill(2));
}

TEST_CASE("elastic_group: a member killed while the others re-form", "[elastic][hosts]")
{
    job j(2);
    j.start_all(4, 2, 20, 10);
    j.kill(3);
    std::this_thread::sleep_for(200ms); // the others wait for its lease to run out, to form generation 2
    survivors_went_on(j, 2, 0, "a kill while re-forming", j.kill(2));
}

TEST_CASE("elastic_group: the store restarted empty, the members go on and still re-form", "[elastic][hosts]")
{
    job j(2);
    const int n = hosts().across() ? 4 : 3;
    j.start_all(n, n - 1, 20, 10);
    j.server.stop();
    std::this_thread::sleep_for(300ms);
    j.server.start();
    await(j.files, 1, 15); // rank 0 asks the store at every boundary: the steps went on
    std::this_thread::sleep_for(700ms); // the leases, written again by their threads
    survivors_went_on(j, n - 1, 2, "a kill after the store restarted", j.kill(n - 1));
}

TEST_CASE("elastic_group: a newcomer enters at the members' next boundary", "[elastic]")
{
    job j(2);
    j.start_all(2, 3, 20, 10);
    j.start(3, 20);
    for (int i = 0; i < 3; ++i) {
        CHECK(j.members[i]->finish(60s) == "");
        const progress p = read_progress(j.files[i]);
        CHECK(p.generation == 2);
        CHECK(p.size == 3);
    }
}

TEST_CASE("elastic_group: below min_ranks every survivor names it", "[elastic]")
{
    job j(3);
    j.start_all(3, 3, 1000000, 5);
    j.kill(0);
    for (int i = 1; i < 3; ++i) {
        const std::string outcome = j.members[i]->finish(30s);
        INFO(outcome);
        CHECK(outcome.rfind("membership_error:", 0) == 0);
        CHECK(outcome.find("generation 2 was not formed: 2 living candidates, fewer than min_ranks 3") != std::string::npos);
    }
}

TEST_CASE("elastic_group: a member stopped past its lease is stale when it comes back", "[elastic]")
{
    job j(2);
    j.start_all(3, 2, 30, 5);
    j.members[2]->signal(SIGSTOP);
    await({j.files[0], j.files[1]}, 2, 1); // the others formed generation 2 without it
    j.members[2]->signal(SIGCONT);
    const std::string stale = j.members[2]->finish(30s);
    INFO(stale);
    CHECK(stale.rfind("membership_error:", 0) == 0);
    CHECK(stale.find("stale: rank 2 of generation 1, but generation 2 was formed without it") != std::string::npos);
    CHECK(stale.find("after it, comm(): usage_error: ") != std::string::npos);
    for (int i = 0; i < 2; ++i)
        CHECK(j.members[i]->finish(60s) == "");
}
