// local_group / local_communicator: the communicator contract of comm/communicator.hpp and the
// failure semantics of docs/semantics.md ("Errors"), exercised directly through
// isend/irecv/wait.
//
// Catch2 assertions are not thread-safe: rank code only records what happened in per-rank
// slots, and every CHECK runs on the main thread after run() returns.
#include <catch2/catch.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <gradsync/comm/mpi/detail/polling.hpp>
#include <gradsync/gradsync.hpp>

#include "large_message.hpp"
#include "reference.hpp"

namespace {

using gradsync::local_communicator;
using gradsync::local_group;
using request = local_communicator::request;
using clock_type = std::chrono::steady_clock;

enum class outcome { none, ok, aborted, communication, usage, mismatch, other_gradsync, original, other };

const char* describe(outcome o)
{
    switch (o) {
    case outcome::none: return "none";
    case outcome::ok: return "ok";
    case outcome::aborted: return "aborted_error";
    case outcome::communication: return "communication_error";
    case outcome::usage: return "usage_error";
    case outcome::mismatch: return "mismatch_error";
    case outcome::other_gradsync: return "gradsync::error";
    case outcome::original: return "the test's own exception";
    case outcome::other: return "something else";
    }
    return "?";
}

struct test_failure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Runs f and classifies what it threw.
template <class F>
outcome classify(F&& f, std::string* what = nullptr)
{
    try {
        f();
        return outcome::ok;
    } catch (const gradsync::aborted_error& e) {
        if (what) *what = e.what();
        return outcome::aborted;
    } catch (const gradsync::communication_error& e) {
        if (what) *what = e.what();
        return outcome::communication;
    } catch (const gradsync::usage_error& e) {
        if (what) *what = e.what();
        return outcome::usage;
    } catch (const gradsync::mismatch_error& e) {
        if (what) *what = e.what();
        return outcome::mismatch;
    } catch (const gradsync::error& e) {
        if (what) *what = e.what();
        return outcome::other_gradsync;
    } catch (const test_failure&) {
        return outcome::original;
    } catch (...) {
        return outcome::other;
    }
}

std::span<const std::byte> bytes_of(const std::vector<std::uint8_t>& v) { return std::as_bytes(std::span(v)); }
std::span<std::byte> bytes_of(std::vector<std::uint8_t>& v) { return std::as_writable_bytes(std::span(v)); }

std::vector<std::uint8_t> message(int id, std::size_t size)
{
    std::vector<std::uint8_t> m(size);
    for (std::size_t i = 0; i < size; ++i)
        m[i] = std::uint8_t(ref::key(std::uint64_t(id), 0, i));
    return m;
}

constexpr int messages_per_tag = 8;
constexpr std::size_t message_size = 24; // equal sizes: order can only show in the contents

} // namespace

TEST_CASE("sends posted before the receives are matched in posting order", "[local_group]")
{
    // Rank 0 posts every send, then tells rank 1 (another tag) to start receiving, so all
    // sends are queued before the first receive exists. Two tags interleave; rank 1 drains
    // tag 2 before tag 1, which must not disturb either tag's order.
    local_group group(2);
    std::vector<std::vector<std::uint8_t>> got(2 * messages_per_tag);
    group.run([&](local_communicator& comm) {
        std::vector<std::uint8_t> go(1, 1);
        if (comm.rank() == 0) {
            std::vector<std::vector<std::uint8_t>> out;
            std::vector<request> sends;
            for (int i = 0; i < 2 * messages_per_tag; ++i)
                out.push_back(message(i, message_size));
            for (int i = 0; i < 2 * messages_per_tag; ++i) // tag 1 + i % 2: 1, 2, 1, 2, ...
                sends.push_back(comm.isend(bytes_of(out[std::size_t(i)]), 1, 1 + i % 2));
            request g = comm.isend(bytes_of(go), 1, 9);
            comm.wait(g);
            for (auto& s : sends)
                comm.wait(s);
        } else {
            request g = comm.irecv(bytes_of(go), 0, 9);
            comm.wait(g);
            std::vector<request> recvs(2 * messages_per_tag);
            for (int tag : {2, 1})
                for (int i = tag - 1; i < 2 * messages_per_tag; i += 2) {
                    got[std::size_t(i)].resize(message_size);
                    recvs[std::size_t(i)] = comm.irecv(bytes_of(got[std::size_t(i)]), 0, tag);
                }
            for (auto& r : recvs)
                comm.wait(r);
        }
    });
    for (int i = 0; i < 2 * messages_per_tag; ++i) {
        CAPTURE(i);
        CHECK(got[std::size_t(i)] == message(i, message_size));
    }
}

TEST_CASE("receives posted before the sends are matched in posting order", "[local_group]")
{
    local_group group(2);
    std::vector<std::vector<std::uint8_t>> got(2 * messages_per_tag);
    group.run([&](local_communicator& comm) {
        std::vector<std::uint8_t> go(1, 1);
        if (comm.rank() == 1) {
            std::vector<request> recvs;
            for (int i = 0; i < 2 * messages_per_tag; ++i) {
                got[std::size_t(i)].resize(message_size);
                recvs.push_back(comm.irecv(bytes_of(got[std::size_t(i)]), 0, 1 + i % 2));
            }
            request g = comm.isend(bytes_of(go), 0, 9);
            comm.wait(g);
            for (int i = 2 * messages_per_tag - 1; i >= 0; --i) // waiting order is irrelevant
                comm.wait(recvs[std::size_t(i)]);
        } else {
            request g = comm.irecv(bytes_of(go), 1, 9);
            comm.wait(g);
            std::vector<std::vector<std::uint8_t>> out;
            for (int i = 0; i < 2 * messages_per_tag; ++i)
                out.push_back(message(i, message_size));
            std::vector<request> sends(2 * messages_per_tag);
            for (int tag : {2, 1})
                for (int i = tag - 1; i < 2 * messages_per_tag; i += 2)
                    sends[std::size_t(i)] = comm.isend(bytes_of(out[std::size_t(i)]), 1, tag);
            for (auto& s : sends)
                comm.wait(s);
        }
    });
    for (int i = 0; i < 2 * messages_per_tag; ++i) {
        CAPTURE(i);
        CHECK(got[std::size_t(i)] == message(i, message_size));
    }
}

TEST_CASE("zero-byte messages complete and keep their place in the order", "[local_group]")
{
    // 0 bytes, then 5 bytes, then 0 bytes on one tag: if a zero-byte message were skipped or
    // matched out of order, the sizes would disagree.
    local_group group(2);
    std::array<outcome, 2> result{};
    std::vector<std::uint8_t> got(5);
    group.run([&](local_communicator& comm) {
        result[std::size_t(comm.rank())] = classify([&] {
            request nothing; // a default-constructed request is complete
            comm.wait(nothing);
            const std::vector<std::uint8_t> five = message(5, 5);
            if (comm.rank() == 0) {
                request a = comm.isend({}, 1, 3);
                request b = comm.isend(bytes_of(five), 1, 3);
                request c = comm.isend(std::span<const std::byte>(), 1, 3);
                comm.wait(a);
                comm.wait(b);
                comm.wait(c);
            } else {
                request a = comm.irecv({}, 0, 3);
                request b = comm.irecv(bytes_of(got), 0, 3);
                request c = comm.irecv(std::span<std::byte>(), 0, 3);
                comm.wait(c);
                comm.wait(b);
                comm.wait(a);
            }
        });
    });
    CHECK(describe(result[0]) == std::string("ok"));
    CHECK(describe(result[1]) == std::string("ok"));
    CHECK(got == message(5, 5));
}

TEST_CASE("a receive whose size differs from the send is a communication_error", "[local_group]")
{
    for (std::size_t recv_size : {std::size_t(4), std::size_t(16)}) {
        CAPTURE(recv_size);
        local_group group(2);
        std::array<outcome, 2> result{};
        std::array<std::string, 2> what;
        std::array<outcome, 2> after{};
        std::vector<std::uint8_t> later(3);
        group.run([&](local_communicator& comm) {
            const std::size_t r = std::size_t(comm.rank());
            result[r] = classify(
                [&] {
                    std::vector<std::uint8_t> buf = r == 0 ? message(1, 8) : std::vector<std::uint8_t>(recv_size);
                    request q = r == 0 ? comm.isend(bytes_of(buf), 1, 4) : comm.irecv(bytes_of(buf), 0, 4);
                    comm.wait(q);
                },
                &what[r]);
            // The failed pair must not poison the tag: the next message goes through.
            after[r] = classify([&] {
                std::vector<std::uint8_t> m = message(2, 3);
                request q = r == 0 ? comm.isend(bytes_of(m), 1, 4) : comm.irecv(bytes_of(later), 0, 4);
                comm.wait(q);
            });
        });
        CHECK(describe(result[1]) == std::string("communication_error"));
        CHECK_THAT(what[1], Catch::Matchers::Contains(std::to_string(recv_size)));
        // The sender may or may not be told; it must not hang or see anything else.
        CHECK((result[0] == outcome::ok || result[0] == outcome::communication));
        CHECK(describe(after[0]) == std::string("ok"));
        CHECK(describe(after[1]) == std::string("ok"));
        CHECK(later == message(2, 3));
    }
}

TEST_CASE("a peer out of range is a usage_error", "[local_group]")
{
    local_group group(3);
    std::vector<std::array<outcome, 4>> result(3);
    std::vector<std::array<std::string, 4>> what(3);
    group.run([&](local_communicator& comm) {
        const std::size_t r = std::size_t(comm.rank());
        std::vector<std::uint8_t> buf(4);
        result[r][0] = classify([&] { (void)comm.isend(bytes_of(buf), 3, 0); }, &what[r][0]);
        result[r][1] = classify([&] { (void)comm.isend(bytes_of(buf), -1, 0); }, &what[r][1]);
        result[r][2] = classify([&] { (void)comm.irecv(bytes_of(buf), 3, 0); }, &what[r][2]);
        result[r][3] = classify([&] { (void)comm.irecv(bytes_of(buf), -7, 0); }, &what[r][3]);
    });
    for (std::size_t r = 0; r < 3; ++r)
        for (std::size_t k = 0; k < 4; ++k) {
            CAPTURE(r, k, what[r][k]);
            CHECK(describe(result[r][k]) == std::string("usage_error"));
            CHECK_THAT(what[r][k], Catch::Matchers::Contains("peer"));
        }
}

namespace {

// Rank `thrower` throws once every other rank is (about to be) blocked in wait(): each other
// rank first hands the thrower a one-byte message, and only once the thrower has received
// them all does it throw. The others then wait on operations the thrower never matches:
// receives on even ranks, sends on odd ones (a send completes only when received). Each rank
// records how it ended in `record` (which survives the exception); `rethrow_released`
// decides whether released ranks let their aborted_error escape (run() must still rethrow
// the original).
template <class Throw>
void abort_scenario(local_group& group, int thrower, bool rethrow_released, std::vector<outcome>& record,
                    Throw throw_it)
{
    const int n = group.size();
    record.assign(std::size_t(n), outcome::none);
    group.run([&](local_communicator& comm) {
        const int r = comm.rank();
        std::vector<std::uint8_t> one(1, 1), sink(64), src = message(r, 64);
        if (r == thrower) {
            std::vector<std::vector<std::uint8_t>> in(std::size_t(n), std::vector<std::uint8_t>(1));
            std::vector<request> readies;
            for (int p = 0; p < n; ++p)
                if (p != r)
                    readies.push_back(comm.irecv(bytes_of(in[std::size_t(p)]), p, 1));
            for (auto& q : readies)
                comm.wait(q);
            // Left pending on purpose: unwinding must withdraw it cleanly.
            request dangling = comm.isend(bytes_of(src), (r + 1) % n, 99);
            record[std::size_t(r)] = outcome::original;
            throw_it(r);
        }
        const outcome o = classify([&] {
            request ready = comm.isend(bytes_of(one), thrower, 1);
            comm.wait(ready);
            request q = r % 2 ? comm.isend(bytes_of(src), thrower, 2) : comm.irecv(bytes_of(sink), thrower, 2);
            comm.wait(q);
        });
        record[std::size_t(r)] = o;
        if (o == outcome::aborted && rethrow_released)
            throw gradsync::aborted_error("released rank " + std::to_string(r));
    });
}

// After a failure the same group must work again: a full Sum over it, checked exactly.
std::string group_still_works(local_group& group)
{
    const int n = group.size();
    std::vector<std::vector<float>> out(static_cast<std::size_t>(n));
    group.run([&](local_communicator& comm) {
        std::vector<float> v = ref::int_data<float>(5, comm.rank(), 1000);
        gradsync::allreduce(comm, std::span<float>(v));
        out[std::size_t(comm.rank())] = std::move(v);
    });
    std::vector<std::vector<float>> inputs;
    for (int r = 0; r < n; ++r)
        inputs.push_back(ref::int_data<float>(5, r, 1000));
    const std::vector<float> want = ref::exact(inputs, false);
    for (int r = 0; r < n; ++r)
        if (std::string e = ref::first_difference(out[std::size_t(r)], want); !e.empty())
            return "rank " + std::to_string(r) + ": " + e;
    return "";
}

} // namespace

TEST_CASE("a rank that throws releases every blocked rank, run() rethrows the original", "[local_group]")
{
    constexpr int n = 4;
    local_group group(n);
    for (int thrower : {2, 0}) // 0 runs on the calling thread, 2 on a spawned one
        for (bool rethrow_released : {true, false}) {
            CAPTURE(thrower, rethrow_released);
            std::vector<outcome> record;
            std::string message;
            bool right_type = false;
            const auto start = clock_type::now();
            try {
                abort_scenario(group, thrower, rethrow_released, record,
                               [](int r) { throw test_failure("rank " + std::to_string(r) + " failed on purpose"); });
                message = "run() returned normally";
            } catch (const test_failure& e) {
                right_type = true;
                message = e.what();
            } catch (const std::exception& e) {
                message = std::string("wrong exception: ") + e.what();
            }
            const std::chrono::duration<double> elapsed = clock_type::now() - start;
            CHECK(right_type);
            CHECK(message == "rank " + std::to_string(thrower) + " failed on purpose");
            for (int r = 0; r < n; ++r) {
                CAPTURE(r);
                CHECK(describe(record[std::size_t(r)]) ==
                      std::string(describe(r == thrower ? outcome::original : outcome::aborted)));
            }
            CHECK(group_still_works(group) == "");
        }
}

TEST_CASE("run() rethrows the original exception even when it is not a std::exception", "[local_group]")
{
    local_group group(5);
    std::vector<outcome> record;
    const auto start = clock_type::now();
    CHECK_THROWS_AS(abort_scenario(group, 3, true, record, [](int) { throw 42; }), int);
    const std::chrono::duration<double> elapsed = clock_type::now() - start;
    for (int r = 0; r < 5; ++r) {
        CAPTURE(r);
        CHECK(describe(record[std::size_t(r)]) == std::string(describe(r == 3 ? outcome::original : outcome::aborted)));
    }
    CHECK(group_still_works(group) == "");
}

TEST_CASE("a rank that throws before anyone communicates does not hang the group", "[local_group]")
{
    // Ranks arriving at wait() after the failure must be released too.
    local_group group(6);
    std::vector<outcome> record(6, outcome::none);
    const auto start = clock_type::now();
    CHECK_THROWS_AS(group.run([&](local_communicator& comm) {
        if (comm.rank() == 5)
            throw test_failure("early");
        // Everyone else waits for rank 5, which never sends.
        record[std::size_t(comm.rank())] = classify([&] {
            std::vector<std::uint8_t> sink(8);
            request q = comm.irecv(bytes_of(sink), 5, 0);
            comm.wait(q);
        });
    }),
                    test_failure);
    const std::chrono::duration<double> elapsed = clock_type::now() - start;
    for (int r = 0; r < 5; ++r) {
        CAPTURE(r);
        CHECK(describe(record[std::size_t(r)]) == std::string("aborted_error"));
    }
    CHECK(group_still_works(group) == "");
}

TEST_CASE("local_group(0) is a usage_error", "[local_group]")
{
    CHECK_THROWS_AS(local_group(0), gradsync::usage_error);
    CHECK_THROWS_AS(local_group(-3), gradsync::usage_error);
    CHECK(local_group(1).size() == 1);
}

TEST_CASE("with a deadline, a peer that never sends or never receives is a deadline_error naming both ranks",
          "[local_group][deadline]")
{
    using namespace std::chrono_literals;
    local_group group(3, gradsync::local_options{.deadline = 200ms});
    for (bool sending : {false, true}) {
        CAPTURE(sending);
        outcome record = outcome::none;
        std::string what;
        const auto start = clock_type::now();
        try {
            group.run([&](local_communicator& comm) {
                if (comm.rank() == 2)
                    return; // the peer that never shows up
                // Ranks 0 and 1 exchange one message, so the failure comes after a completed
                // wait; then rank 1 waits on rank 2.
                std::vector<std::uint8_t> buffer(16);
                request a = comm.rank() == 0 ? comm.isend(bytes_of(buffer), 1, 7) : comm.irecv(bytes_of(buffer), 0, 7);
                comm.wait(a);
                if (comm.rank() == 0)
                    return;
                record = classify([&] {
                    request q = sending ? comm.isend(bytes_of(buffer), 2, 9) : comm.irecv(bytes_of(buffer), 2, 9);
                    comm.wait(q);
                });
                if (record != outcome::ok)
                    throw test_failure("rank 1 failed");
            });
            what = "run() returned normally";
        } catch (const test_failure&) {
            what = "rank 1's own failure";
        } catch (const std::exception& e) {
            what = std::string("wrong exception: ") + e.what();
        }
        const std::chrono::duration<double> elapsed = clock_type::now() - start;
        CHECK(describe(record) == std::string("communication_error")); // deadline_error is one
        CHECK(what == "rank 1's own failure");
        CHECK(elapsed.count() >= 0.2);
    }
    // The message, from a wait on its own.
    std::string what;
    try {
        group.run([&](local_communicator& comm) {
            std::vector<std::uint8_t> buffer(16);
            if (comm.rank() == 1) {
                request q = comm.irecv(bytes_of(buffer), 2, 9);
                comm.wait(q);
            }
        });
    } catch (const gradsync::deadline_error& e) {
        what = e.what();
    }
    CHECK(what.find("rank 1 of 3") != std::string::npos);
    CHECK(what.find("a receive from rank 2 (tag 9, 16 bytes)") != std::string::npos);
    CHECK(what.find("after 0 completed waits") != std::string::npos);
    CHECK(group_still_works(group) == "");
}

TEST_CASE("a deadline leaves collectives that complete untouched, and must not be negative", "[local_group][deadline]")
{
    using namespace std::chrono_literals;
    local_group group(4, gradsync::local_options{.deadline = 5s});
    std::vector<std::vector<float>> out(4);
    group.run([&](local_communicator& comm) {
        std::vector<float> v = ref::int_data<float>(3, comm.rank(), 1000);
        gradsync::allreduce(comm, std::span<float>(v));
        out[std::size_t(comm.rank())] = v;
    });
    std::vector<std::vector<float>> inputs;
    for (int r = 0; r < 4; ++r)
        inputs.push_back(ref::int_data<float>(3, r, 1000));
    for (int r = 0; r < 4; ++r)
        CHECK(ref::first_difference(out[std::size_t(r)], ref::exact(inputs, false)) == "");
    CHECK_THROWS_AS(local_group(2, gradsync::local_options{.deadline = -1ms}), gradsync::usage_error);
}

TEST_CASE("a message of more than 2^31-1 bytes arrives intact", "[local_group][large]")
{
    using namespace gradsync_test; // large_message.hpp
    const std::size_t n = large_message_bytes;
    const std::vector<std::size_t> samples = large_message_samples();
    large_buffer src, dst;
    for (std::size_t p : samples) {
        src[p] = large_message_byte(p);
        dst[p] = ~large_message_byte(p);
    }
    local_group group(2);
    std::array<outcome, 2> result{};
    group.run([&](local_communicator& comm) {
        result[std::size_t(comm.rank())] = classify([&] {
            request q = comm.rank() == 0 ? comm.isend(std::span<const std::byte>(src.data(), n), 1, 7)
                                         : comm.irecv(std::span<std::byte>(dst.data(), n), 0, 7);
            comm.wait(q);
        });
    });
    CHECK(describe(result[0]) == std::string("ok"));
    CHECK(describe(result[1]) == std::string("ok"));
    std::size_t bad = 0, first_bad = n;
    for (std::size_t p : samples)
        if (dst[p] != large_message_byte(p) && bad++ == 0)
            first_bad = p;
    CAPTURE(first_bad);
    CHECK(bad == 0);
}

// The MPI adapters' wait loop (comm/mpi/detail/polling.hpp): a probe that finds the peer's next
// message foreign, or the peer at another call on the position board, ends the wait only if
// the request is still open after it. Between the last test and the probe the request may have
// completed and the peer moved on to its next call, whose message is then at the head of the
// queue and whose position is on the board: that wait succeeded.
TEST_CASE("a wait whose request completes just before the probe sees the next call is not foreign", "[polling]")
{
    const auto none = [] { return -1; };
    for (bool board : {false, true}) {
        CAPTURE(board);
        bool probed = false, failed = false;
        const auto look = [&] {
            probed = true;
            return 12345; // the peer's next call
        };
        const auto done = [&] { return probed; }; // completes only once the probe has looked
        const auto fail = [&](gradsync::detail::wait_end, int, std::chrono::nanoseconds) { failed = true; };
        if (board)
            gradsync::detail::poll_until_done(done, none, look, {}, fail);
        else
            gradsync::detail::poll_until_done(done, look, none, {}, fail);
        CHECK(probed);
        CHECK_FALSE(failed);

        // Still open after the probe: the foreign message, or the peer's call, is reported.
        gradsync::detail::wait_end end = gradsync::detail::wait_end::deadline;
        int found = -1;
        const auto seen = [] { return 777; };
        const auto ended = [&](gradsync::detail::wait_end e, int f, std::chrono::nanoseconds) {
            end = e;
            found = f;
            throw std::runtime_error("ended");
        };
        try {
            if (board)
                gradsync::detail::poll_until_done([] { return false; }, none, seen, {}, ended);
            else
                gradsync::detail::poll_until_done([] { return false; }, seen, none, {}, ended);
        } catch (const std::runtime_error&) {
        }
        CHECK(end == (board ? gradsync::detail::wait_end::stray : gradsync::detail::wait_end::foreign));
        CHECK(found == 777);
    }
}
