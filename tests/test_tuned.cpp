// automatic's rule: recursive doubling while the bytes a host's link carries in its steps
// (M, or k*M where k of N ranks share each host) stay within small_bytes, on the rule's own
// arithmetic and on a reducer over ranks that report hosts of k (or uneven hosts: k = 1).
// tuned over local_group: every call, while tuning and after, gives the exact result of
// integer-valued data on every rank with the same bits; tuning ends after 6 * rounds calls
// with the same candidate on every rank; on an emulated link that charges per message the
// candidate with the fewest messages (recursive doubling) is kept over the rule's recursive
// halving, and the times it measured (medians and their intervals) are at least the link's
// charge; where no candidate is measurably faster than the rule's (recursive doubling's
// other posting order costs the same), the rule's is kept; a wrong rounds is an error on
// every rank. Rank code only records; CHECKs run on the main thread.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <gradsync/gradsync.hpp>

#include "outcome.hpp"
#include "reference.hpp"

namespace {

using gradsync::local_communicator;
using gradsync::local_group;
using gradsync::tuned;
using gradsync_test::run_ranks;

static_assert(gradsync::has_plan<float, local_communicator, tuned, gradsync::sum>);
static_assert(gradsync::has_plan<gradsync::half, local_communicator, tuned, gradsync::average>);
static_assert(!gradsync::has_plan<float, local_communicator, tuned, gradsync::adasum>,
              "Adasum's candidates do not give the same result as each other");

// What one rank saw of one reducer: its results per call, and its choice after each call.
template <class T>
struct rank_record {
    std::vector<std::vector<T>> results;
    std::vector<std::optional<gradsync::tuned_candidate>> chosen;
    std::vector<double> measured;
    std::size_t tuning = 0, candidates = 0;
    std::uint32_t preferred = 0;
};

bool same(const std::optional<gradsync::tuned_candidate>& a, const std::optional<gradsync::tuned_candidate>& b)
{
    return a.has_value() == b.has_value() && (!a || (a->algorithm == b->algorithm && a->order == b->order));
}

template <class T, class Policy>
void check_every_call(int n, std::size_t count, int rounds)
{
    // Threads share memory: shared_memory is a seventh candidate, and automatic's choice.
    const std::size_t candidates = n > 1 ? 7 : 6, tuning = candidates * std::size_t(rounds), calls = tuning + 3;
    std::vector<rank_record<T>> seen(static_cast<std::size_t>(n));
    local_group group(n);
    const std::string escaped = run_ranks(group, [&](local_communicator& comm) {
        auto& mine = seen[std::size_t(comm.rank())];
        gradsync::reducer<T, local_communicator, Policy, tuned> reduce(comm, count, tuned{.rounds = rounds});
        mine.tuning = reduce.plan().tuning_calls();
        mine.candidates = reduce.plan().candidates();
        mine.preferred = reduce.plan().preferred().algorithm;
        for (std::size_t c = 0; c < calls; ++c) {
            std::vector<T> data = ref::int_data<T>(c, comm.rank(), count);
            reduce(std::span<T>(data));
            mine.results.push_back(std::move(data));
            mine.chosen.push_back(reduce.plan().chosen());
        }
        const auto m = reduce.plan().measured();
        mine.measured.assign(m.begin(), m.end());
    });
    INFO("N " << n << ", count " << count << ", " << ref::type_name<T>() << ", " << Policy::name << ", rounds "
              << rounds);
    REQUIRE(escaped == "");
    CHECK(seen[0].candidates == candidates);
    CHECK(seen[0].tuning == tuning);
    if (n > 1)
        CHECK(seen[0].preferred == gradsync::shared_memory::code);
    for (std::size_t c = 0; c < calls; ++c) {
        INFO("call " << c + 1);
        std::vector<std::vector<T>> inputs;
        for (int r = 0; r < n; ++r)
            inputs.push_back(ref::int_data<T>(c, r, count));
        CHECK(ref::first_difference(seen[0].results[c], ref::exact(inputs, Policy::name == std::string("average"))) ==
              "");
        for (int r = 1; r < n; ++r) {
            INFO("rank " << r);
            CHECK(ref::same_bits(seen[std::size_t(r)].results[c].data(), seen[0].results[c].data(), count * sizeof(T)));
            CHECK(same(seen[std::size_t(r)].chosen[c], seen[0].chosen[c]));
        }
        CHECK(seen[0].chosen[c].has_value() == (c + 1 >= tuning));
    }
    for (int r = 1; r < n; ++r)
        CHECK(ref::same_bits(seen[std::size_t(r)].measured.data(), seen[0].measured.data(), candidates * sizeof(double)));
    const auto& m = seen[0].measured;
    CHECK(std::all_of(m.begin(), m.end(), [](double t) { return t > 0; }));
}

} // namespace

TEMPLATE_TEST_CASE("tuned: exact on every call, tuning or not, and every rank keeps the same candidate",
                   "[tuned]", gradsync::half, float, double)
{
    for (int n : {1, 2, 3, 4, 5, 8})
        for (std::size_t count : {std::size_t(0), std::size_t(1), std::size_t(7), std::size_t(1000),
                                  std::size_t(65537)}) {
            check_every_call<TestType, gradsync::sum>(n, count, 2);
            check_every_call<TestType, gradsync::average>(n, count, 3);
        }
}

namespace {

// Each rank's choice, and rank 0's measurements and transport order, after tuning over the
// link.
struct tuning_outcome {
    std::vector<std::optional<gradsync::tuned_candidate>> chosen;
    gradsync::tuned_candidate preferred{};
    bool receives_first = false;
    std::vector<double> median, low, high;
};

tuning_outcome tune_over(int n, const gradsync::emulated_link& link, const tuned& algorithm)
{
    using delayed = gradsync::delay_communicator<local_communicator>;
    tuning_outcome out;
    out.chosen.resize(static_cast<std::size_t>(n));
    local_group group(n);
    const std::string escaped = run_ranks(group, [&](local_communicator& inner) {
        delayed comm(inner, link);
        gradsync::reducer<float, delayed, gradsync::sum, tuned> reduce(comm, 1000, algorithm);
        std::vector<float> data(1000, 1.0f);
        for (std::size_t c = 0; c < reduce.plan().tuning_calls(); ++c)
            reduce(std::span<float>(data));
        out.chosen[std::size_t(inner.rank())] = reduce.plan().chosen();
        if (inner.rank() == 0) {
            out.preferred = reduce.plan().preferred();
            out.receives_first = gradsync::receives_first(comm);
            const auto copy = [](std::span<const double> from) { return std::vector<double>(from.begin(), from.end()); };
            out.median = copy(reduce.plan().measured());
            out.low = copy(reduce.plan().measured_low());
            out.high = copy(reduce.plan().measured_high());
        }
    });
    REQUIRE(escaped == "");
    return out;
}

} // namespace

TEST_CASE("tuned keeps the candidate with the fewest messages on a link that charges per message, over the rule's",
          "[tuned]")
{
    const gradsync::emulated_link link{.alpha = 5e-3, .beta = 0};
    for (int n : {2, 4}) {
        INFO("N " << n);
        // With small_bytes 0 the rule picks recursive halving, at twice doubling's messages.
        // 20 rounds: the interval then leaves out each rank's 4 slowest and 4 fastest calls,
        // so a call held back by a loaded machine does not hide the difference.
        const tuning_outcome out = tune_over(n, link, tuned{.rounds = 20, .rule = {.small_bytes = 0}});
        CHECK(out.preferred.algorithm == gradsync::recursive_halving::code);
        for (const auto& c : out.chosen) {
            REQUIRE(c.has_value());
            CHECK(c->algorithm == gradsync::recursive_doubling::code);
        }
        // Messages per rank and call over the power-of-two N: recursive doubling log2 N,
        // recursive halving 2 log2 N, ring 2 (N - 1). Lower bounds only: each rank's calls of
        // candidate k take at least their messages' charge, and the sums add N ranks.
        const double log2n = n == 2 ? 1 : 2;
        const double messages[] = {log2n, 2 * log2n, 2.0 * (n - 1)};
        for (std::size_t k = 0; k < 6; ++k) {
            INFO("candidate " << k);
            CHECK(out.low[k] >= n * messages[k / 2] * link.alpha);
            CHECK(out.low[k] <= out.median[k]);
            CHECK(out.median[k] <= out.high[k]);
        }
    }
}

TEST_CASE("tuned keeps the rule's candidate where no other is measurably faster", "[tuned]")
{
    // The rule picks recursive doubling (4000 bytes, under small_bytes); its other posting
    // order sends the same messages, so its calls cost the same, and the rest cost more.
    const gradsync::emulated_link link{.alpha = 2e-3, .beta = 0};
    for (int n : {2, 3, 4}) {
        INFO("N " << n);
        const tuning_outcome out = tune_over(n, link, tuned{.rounds = 12});
        CHECK(out.preferred.algorithm == gradsync::recursive_doubling::code);
        CHECK(out.preferred.order ==
              (out.receives_first ? gradsync::posting_order::receives_first : gradsync::posting_order::sends_first));
        for (const auto& c : out.chosen) {
            REQUIRE(c.has_value());
            CHECK(c->algorithm == out.preferred.algorithm);
            CHECK(c->order == out.preferred.order);
        }
    }
}

TEST_CASE("tuned refuses fewer than two rounds on every rank", "[tuned]")
{
    const int n = 3;
    std::vector<gradsync_test::outcome> out(static_cast<std::size_t>(n));
    local_group group(n);
    const std::string escaped = run_ranks(group, [&](local_communicator& comm) {
        gradsync_test::record(out[std::size_t(comm.rank())], false, [&] {
            gradsync::reducer<float, local_communicator, gradsync::sum, tuned> reduce(comm, 10, tuned{.rounds = 1});
        });
    });
    REQUIRE(escaped == "");
    for (const auto& o : out) {
        CHECK(o.k == gradsync_test::kind::usage);
        CHECK_THAT(o.what, Catch::Matchers::Contains("rounds is 1"));
    }
}

TEST_CASE("automatic takes recursive doubling while the bytes through a host's link stay within small_bytes",
          "[tuned]")
{
    const gradsync::automatic a;
    constexpr std::uint32_t doubling = gradsync::recursive_doubling::code, halving = gradsync::recursive_halving::code;
    const std::size_t small = a.small_bytes;
    CHECK(a.choose(small, small, 8) == doubling);
    CHECK(a.choose(small + 1, small + 1, 8) == halving);
    CHECK(a.choose(small / 8, small, 64, 8) == doubling);
    CHECK(a.choose(small / 8 + 1, small, 64, 8) == halving);
    CHECK(a.choose(small / 3, small, 6, 3) == doubling); // 3 * 10922 <= 32768
    CHECK(a.choose(small / 3 + 1, small, 6, 3) == halving);
    CHECK(a.choose(small, small, 8, 8) == doubling); // one host: no link between hosts
    CHECK(a.choose(small, small, 8, 1) == doubling);
    CHECK(a.choose(4, 1, 64, 8) == doubling);         // fewer elements than ranks
}

namespace {

// local_communicator seen as ranks on hosts of `per_host` ranks (0: hosts of unequal sizes,
// which ranks_per_node() refuses, as the MPI and Gloo transports do), sharing no memory.
class on_hosts {
public:
    using request = local_communicator::request;
    on_hosts(local_communicator& inner, int per_host) : inner_(&inner), per_host_(per_host) {}
    int rank() const { return inner_->rank(); }
    int size() const { return inner_->size(); }
    request isend(std::span<const std::byte> data, int peer, int tag) { return inner_->isend(data, peer, tag); }
    request irecv(std::span<std::byte> data, int peer, int tag) { return inner_->irecv(data, peer, tag); }
    void wait(request& r) { inner_->wait(r); }
    bool may_share_memory() const { return false; }
    int ranks_per_node() const
    {
        if (per_host_ == 0)
            throw gradsync::usage_error("hosts hold unequal numbers of ranks");
        return per_host_;
    }

private:
    local_communicator* inner_;
    int per_host_;
};

} // namespace

TEST_CASE("automatic asks the communicator for its ranks per host, and takes 1 where hosts are uneven", "[tuned]")
{
    const int n = 8;
    constexpr std::uint32_t doubling = gradsync::recursive_doubling::code, halving = gradsync::recursive_halving::code;
    const std::size_t per_host_limit = gradsync::automatic{}.small_bytes / 4 / sizeof(float); // k = 4
    struct chosen {
        std::uint32_t at_limit = 0, above = 0;
    };
    for (const int per_host : {4, 0}) {
        CAPTURE(per_host);
        std::vector<chosen> seen(std::size_t(n), chosen{});
        std::vector<std::vector<float>> sums(static_cast<std::size_t>(n));
        local_group group(n);
        CHECK(run_ranks(group, [&](local_communicator& inner) {
                  on_hosts comm(inner, per_host);
                  auto& mine = seen[std::size_t(comm.rank())];
                  gradsync::reducer<float, on_hosts> at_limit(comm, per_host_limit), above(comm, per_host_limit + 1);
                  mine.at_limit = at_limit.plan().chosen();
                  mine.above = above.plan().chosen();
                  std::vector<float> v(per_host_limit + 1, float(comm.rank() + 1));
                  above(std::span<float>(v));
                  sums[std::size_t(comm.rank())] = v;
              }) == "");
        for (std::size_t r = 0; r < seen.size(); ++r) {
            CHECK(seen[r].at_limit == doubling);
            CHECK(seen[r].above == (per_host == 4 ? halving : doubling));
            CHECK(sums[r] == std::vector<float>(per_host_limit + 1, float(n * (n + 1) / 2)));
        }
    }
}
