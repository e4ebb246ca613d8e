// The conformance suites tests/conformance/allreduce.hpp and reductions.hpp over the
// transport of mpi_transport.hpp, and tuned over it: test_mpi.cpp's program's other source.
#include "mpi_transport.hpp"

#include "conformance/allreduce.hpp"
#include "conformance/reductions.hpp"

// tuned over the transport: every call exact, tuning or not (two rounds: 12 tuning calls, the
// last with the sums of the times on the call's tag), the choice the same on every rank.
TEST_CASE("mpi tuned: every call exact, and every rank keeps the same candidate", "[allreduce][tuned]")
{
    using conformance::reducer_int_a;
    transport comm = make_comm();
    const int n = comm.size(), r = comm.rank();
    std::uint64_t seed = 1000;
    for_each_type([&](auto type) {
        using T = decltype(type);
        for (std::size_t count : {std::size_t(0), std::size_t(7), std::size_t(1000), std::size_t(65537)}) {
            const std::string context = std::string("tuned ") + ref::type_name<T>() + " count " + std::to_string(count);
            std::unique_ptr<gradsync::reducer<T, transport, gradsync::sum, gradsync::tuned>> reduce;
            must_succeed(context + " reducer plan", [&] {
                reduce = std::make_unique<gradsync::reducer<T, transport, gradsync::sum, gradsync::tuned>>(
                    comm, count, gradsync::tuned{.rounds = 2});
            });
            const std::size_t calls = reduce->plan().tuning_calls() + 2;
            for (std::size_t c = 0; c < calls; ++c) {
                conformance::per_rank<T> out(static_cast<std::size_t>(n));
                std::vector<T>& data = out[std::size_t(r)];
                data = conformance::input<T>(reducer_int_a, seed, r, count);
                must_succeed(context + " call " + std::to_string(c + 1), [&] { (*reduce)(std::span<T>(data)); });
                conformance::check_case<conformance::harness, T>(n, count, false, reducer_int_a, seed++, out);
                INFO(context << ", call " << c + 1);
                CHECK(reduce->plan().chosen().has_value() == (c + 1 >= reduce->plan().tuning_calls()));
            }
            const auto chosen = reduce->plan().chosen();
            REQUIRE(chosen.has_value());
            INFO(context);
            CHECK(same_everywhere(std::uint64_t(chosen->algorithm) * 4 + std::uint64_t(chosen->order)));
        }
    });
}
