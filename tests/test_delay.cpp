// delay_communicator over local_group: the emulated link charges alpha + beta*bytes per
// message, never less (the bounds follow from the model on every run; none is an upper
// bound, which a loaded machine would break); one outgoing link per rank serializes its
// messages; data arrives intact and in order; inner errors pass through. A ring allreduce
// over the emulated link costs at least its 2(N-1) messages. These bound the emulated cost,
// not the speed of the library; docs/results.md shows how close to the model it stays.
//
// Rank code only records; CHECKs run on the main thread.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include <gradsync/gradsync.hpp>

#include "outcome.hpp"
#include "reference.hpp"

namespace {

using gradsync::delay_communicator;
using gradsync::emulated_link;
using gradsync::local_communicator;
using gradsync::local_group;
using clock_type = std::chrono::steady_clock;
using delayed = delay_communicator<local_communicator>;
using Catch::Matchers::Contains;

double seconds(clock_type::duration d) { return std::chrono::duration<double>(d).count(); }

// The model's cost of one message, written out here.
double message_cost(const emulated_link& link, std::size_t bytes) { return link.alpha + link.beta * double(bytes); }

std::vector<std::byte> pattern(std::uint64_t seed, std::size_t bytes)
{
    std::vector<std::byte> v(bytes);
    for (std::size_t i = 0; i < bytes; ++i)
        v[i] = std::byte(ref::key(seed, 0, i) & 0xff);
    return v;
}

void send_bytes(delayed& d, std::span<const std::byte> data, int peer, int tag)
{
    auto r = d.isend(data, peer, tag);
    d.wait(r);
}

void recv_bytes(delayed& d, std::span<std::byte> data, int peer, int tag)
{
    auto r = d.irecv(data, peer, tag);
    d.wait(r);
}

TEST_CASE("a ping-pong costs two messages", "[delay]")
{
    const emulated_link link{1e-3, 10e-9};
    const std::size_t bytes = 100'000;
    constexpr int repetitions = 20;
    std::vector<double> elapsed;
    std::vector<std::string> corrupt(2);
    local_group group(2);
    group.run([&](local_communicator& comm) {
        delayed d(comm, link);
        std::vector<std::byte> out = pattern(std::uint64_t(comm.rank()), bytes), in(bytes);
        std::string& bad = corrupt[std::size_t(comm.rank())];
        for (int k = 0; k < repetitions; ++k) {
            if (comm.rank() == 0) {
                const auto start = clock_type::now();
                send_bytes(d, out, 1, 7);
                recv_bytes(d, in, 1, 7);
                elapsed.push_back(seconds(clock_type::now() - start));
                if (in != pattern(1, bytes))
                    bad = "pong of repetition " + std::to_string(k);
            } else {
                recv_bytes(d, in, 0, 7);
                if (in != pattern(0, bytes))
                    bad = "ping of repetition " + std::to_string(k);
                send_bytes(d, out, 0, 7);
            }
        }
    });
    const double want = 2 * message_cost(link, bytes);
    REQUIRE(elapsed.size() == std::size_t(repetitions));
    for (double e : elapsed) {
        INFO("round trip " << e << " s, model " << want << " s");
        CHECK(e >= want);
    }
    CHECK(corrupt[0] == "");
    CHECK(corrupt[1] == "");
}

TEST_CASE("an exchange costs one message on each full-duplex link", "[delay]")
{
    const emulated_link link{2e-3, 5e-9};
    const std::size_t bytes = 200'000;
    constexpr int repetitions = 20;
    std::vector<std::vector<double>> elapsed(2);
    std::vector<std::string> corrupt(2);
    local_group group(2);
    group.run([&](local_communicator& comm) {
        delayed d(comm, link);
        const int me = comm.rank(), peer = 1 - me;
        std::vector<std::byte> out = pattern(std::uint64_t(me), bytes), in(bytes);
        for (int k = 0; k < repetitions; ++k) {
            const auto start = clock_type::now();
            auto r = d.irecv(in, peer, 3);
            auto s = d.isend(out, peer, 3);
            d.wait(r);
            d.wait(s);
            elapsed[std::size_t(me)].push_back(seconds(clock_type::now() - start));
            if (in != pattern(std::uint64_t(peer), bytes))
                corrupt[std::size_t(me)] = "repetition " + std::to_string(k);
        }
    });
    const double want = message_cost(link, bytes);
    for (std::size_t r = 0; r < 2; ++r) {
        INFO("rank " << r);
        REQUIRE(elapsed[r].size() == std::size_t(repetitions));
        for (double e : elapsed[r]) {
            INFO("exchange " << e << " s, model " << want << " s");
            CHECK(e >= want);
        }
        CHECK(corrupt[r].empty());
    }
}

// Rank 0 posts two sends at once, to one peer or to two: they share rank 0's outgoing link,
// so the second arrives one message time after the first.
TEST_CASE("messages leave one outgoing link one after another", "[delay]")
{
    const emulated_link link{1e-3, 10e-9};
    const std::size_t first = 150'000, second = 50'000;
    constexpr std::size_t attempts = 10;
    for (int n : {2, 3}) {
        INFO(n << " ranks");
        std::vector<clock_type::time_point> start(attempts), first_in(attempts), second_in(attempts), sent(attempts);
        std::vector<std::string> corrupt(static_cast<std::size_t>(n));
        local_group group(n);
        group.run([&](local_communicator& comm) {
            delayed d(comm, link);
            const int second_peer = n - 1;
            std::string& bad = corrupt[std::size_t(comm.rank())];
            const std::vector<std::byte> a = pattern(11, first), b = pattern(12, second);
            std::vector<std::byte> in_a(first), in_b(second);
            for (std::size_t k = 0; k < attempts; ++k) {
                if (comm.rank() == 0) {
                    start[k] = clock_type::now();
                    auto ra = d.isend(a, 1, 5);
                    auto rb = d.isend(b, second_peer, 5);
                    d.wait(ra);
                    d.wait(rb);
                    sent[k] = clock_type::now();
                    continue;
                }
                if (comm.rank() == 1) {
                    recv_bytes(d, in_a, 0, 5);
                    first_in[k] = clock_type::now();
                    if (in_a != a)
                        bad = "first message of attempt " + std::to_string(k);
                }
                if (comm.rank() == second_peer) {
                    recv_bytes(d, in_b, 0, 5);
                    second_in[k] = clock_type::now();
                    if (in_b != b)
                        bad = "second message of attempt " + std::to_string(k);
                }
            }
        });
        const double one = message_cost(link, first), both = one + message_cost(link, second);
        for (std::size_t k = 0; k < attempts; ++k) {
            INFO("attempt " << k << ": first arrived after " << seconds(first_in[k] - start[k]) << " s (model " << one
                            << "), second after " << seconds(second_in[k] - start[k]) << " s (model " << both << ")");
            CHECK(seconds(first_in[k] - start[k]) >= one);
            CHECK(seconds(second_in[k] - start[k]) >= both);
            CHECK(seconds(sent[k] - start[k]) >= both);
        }
        for (const std::string& c : corrupt)
            CHECK(c == "");
    }
}

TEST_CASE("data arrives intact and in posting order including zero-byte messages", "[delay]")
{
    const emulated_link link{20e-6, 1e-9};
    const std::vector<std::size_t> sizes{0, 1, 7, 8, 9, 4096, 65'537, 0, 3};
    std::vector<std::string> problems(2); // per rank
    local_group group(2);
    group.run([&](local_communicator& comm) {
        delayed d(comm, link);
        const int peer = 1 - comm.rank();
        std::vector<std::vector<std::byte>> out, in;
        for (std::size_t i = 0; i < sizes.size(); ++i) {
            out.push_back(pattern(std::uint64_t(comm.rank()) * 100 + i, sizes[i]));
            in.emplace_back(sizes[i]);
        }
        std::vector<delayed::request> reqs; // every message in flight at once, on one tag
        for (std::size_t i = 0; i < sizes.size(); ++i)
            reqs.push_back(d.irecv(in[i], peer, 9));
        for (std::size_t i = 0; i < sizes.size(); ++i)
            reqs.push_back(d.isend(out[i], peer, 9));
        for (auto& r : reqs)
            d.wait(r);
        for (std::size_t i = 0; i < sizes.size(); ++i)
            if (in[i] != pattern(std::uint64_t(peer) * 100 + i, sizes[i]))
                problems[std::size_t(comm.rank())] = "message " + std::to_string(i) + " differs";
    });
    CHECK(problems[0] == "");
    CHECK(problems[1] == "");
}

TEST_CASE("requests move and one dropped before its wait leaves the link usable", "[delay]")
{
    const emulated_link link{50e-6, 1e-9};
    std::vector<std::string> problems(2); // per rank
    local_group group(2);
    group.run([&](local_communicator& comm) {
        delayed d(comm, link);
        const int peer = 1 - comm.rank();
        std::vector<std::byte> unused(16);
        { auto dropped = d.irecv(unused, peer, 99); } // nothing is ever sent on tag 99: withdrawn
        std::vector<std::byte> out = pattern(std::uint64_t(comm.rank()), 1000), in(1000);
        delayed::request moved;
        {
            auto r = d.irecv(in, peer, 4);
            moved = std::move(r);
            d.wait(r); // moved-from: complete, waits for nothing
        }
        auto s = d.isend(out, peer, 4);
        delayed::request s2(std::move(s));
        d.wait(moved);
        d.wait(s2);
        if (in != pattern(std::uint64_t(peer), 1000))
            problems[std::size_t(comm.rank())] = "received wrong bytes";
    });
    CHECK(problems[0] == "");
    CHECK(problems[1] == "");
}

TEST_CASE("inner errors pass through and bad link parameters are refused", "[delay]")
{
    using gradsync_test::kind;
    using gradsync_test::kind_name;
    std::vector<gradsync_test::outcome> size_mismatch(2), bad_peer(2);
    local_group group(2);
    group.run([&](local_communicator& comm) {
        delayed d(comm, emulated_link{10e-6, 0});
        const int me = comm.rank();
        gradsync_test::record(size_mismatch[std::size_t(me)], false, [&] {
            std::vector<std::byte> buf(me == 0 ? 12 : 10);
            if (me == 0)
                send_bytes(d, buf, 1, 2);
            else
                recv_bytes(d, buf, 0, 2);
        });
        gradsync_test::record(bad_peer[std::size_t(me)], false, [&] {
            std::vector<std::byte> buf(4);
            send_bytes(d, buf, 2, 2);
        });
    });
    for (std::size_t r = 0; r < 2; ++r) {
        INFO("rank " << r << ": " << size_mismatch[r].what);
        CHECK(kind_name(size_mismatch[r].k) == std::string(kind_name(kind::communication)));
        CHECK_THAT(size_mismatch[r].what, Contains("12 bytes") && Contains("expects 10"));
        INFO(bad_peer[r].what);
        CHECK(kind_name(bad_peer[r].k) == std::string(kind_name(kind::usage)));
        CHECK_THAT(bad_peer[r].what, Contains("peer 2"));
    }

    local_group one(1);
    std::vector<gradsync_test::outcome> bad(3);
    one.run([&](local_communicator& comm) {
        gradsync_test::record(bad[0], false, [&] { delayed d(comm, {-1e-6, 0}); });
        gradsync_test::record(bad[1], false, [&] { delayed d(comm, {0, std::numeric_limits<double>::quiet_NaN()}); });
        gradsync_test::record(bad[2], false, [&] { delayed d(comm, {std::numeric_limits<double>::infinity(), 0}); });
    });
    for (const auto& o : bad) {
        INFO(o.what);
        CHECK(kind_name(o.k) == std::string(kind_name(kind::usage)));
        CHECK_THAT(o.what, Contains("alpha") && Contains("rank 0 of 1"));
    }
}

// Every ring step sends one block (segments larger than any block) and waits for the
// neighbour's, so a ring allreduce of M bytes costs at least 2(N-1) messages of its smallest
// block, whatever the machine's load adds.
TEST_CASE("a ring allreduce over the emulated link costs at least its 2(N-1) messages", "[delay]")
{
    const emulated_link link{1e-3, 20e-9};
    const std::vector<std::size_t> counts{8'192, 65'536, 131'072}; // floats
    constexpr int repetitions = 3;
    gradsync::reducer_options options;
    options.pipeline.segment_bytes = std::size_t(1) << 30;
    for (int n : {2, 3}) {
        INFO(n << " ranks");
        std::vector<std::vector<double>> times(counts.size());
        std::vector<std::string> wrong;
        local_group group(n);
        group.run([&](local_communicator& comm) {
            delayed d(comm, link);
            for (std::size_t c = 0; c < counts.size(); ++c) {
                gradsync::reducer<float, delayed, gradsync::sum, gradsync::ring> reduce(d, counts[c], gradsync::ring{},
                                                                                       options);
                for (int k = 0; k < repetitions; ++k) {
                    const std::uint64_t seed = c * 100 + std::uint64_t(k);
                    std::vector<float> data = ref::int_data<float>(seed, comm.rank(), counts[c]);
                    const auto start = clock_type::now();
                    reduce(data);
                    const double t = seconds(clock_type::now() - start);
                    std::vector<std::vector<float>> inputs;
                    for (int q = 0; q < n; ++q)
                        inputs.push_back(ref::int_data<float>(seed, q, counts[c]));
                    if (comm.rank() == 0) {
                        times[c].push_back(t);
                        if (!ref::first_difference(data, ref::exact(inputs, false)).empty())
                            wrong.push_back(std::to_string(counts[c]) + " floats");
                    }
                }
            }
        });
        CHECK(wrong.empty());
        for (std::size_t c = 0; c < counts.size(); ++c) {
            const std::size_t smallest_block = counts[c] / std::size_t(n) * sizeof(float);
            const double want = 2.0 * (n - 1) * message_cost(link, smallest_block);
            for (double t : times[c]) {
                INFO(counts[c] << " floats: " << t << " s, model at least " << want << " s");
                CHECK(t >= want);
            }
        }
    }
}

} // namespace
