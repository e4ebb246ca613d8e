// nccl_communicator and nccl_passthrough on the GPUs of this machine, one thread and one
// NCCL rank per GPU (NCCL refuses two ranks on one GPU, so one H200 gives N = 1: messages to
// itself; multi-rank device tests run on local_group, test_device_local.cu):
//  - sends and receives of device memory and of host memory (staged through the device);
//  - a peer out of range is a usage_error naming it;
//  - device_reducer over NCCL: Sum and Average with ring, recursive_halving, automatic (the
//    host path's bits) and nccl_passthrough (integer data exact, all ranks alike);
//  - Adasum over NCCL with every algorithm, hierarchical included: the bits of the same
//    device plans run on the CPU (host_space with Thrust's CPP system), whose triples are
//    summed in the same order, and every rank alike.
// nccl_passthrough with Adasum does not compile (static_assert), which no run can show.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <thrust/system/cpp/execution_policy.h>

#include <gradsync/algorithm/nccl_passthrough.hpp>
#include <gradsync/comm/nccl/nccl.hpp>
#include <gradsync/device.hpp>
#include <gradsync/gradsync.hpp>

#include "gpu/device_cases.hpp"

namespace {

using gradsync::nccl_communicator;
using gradsync::detail::cuda_check;

// One NCCL rank per GPU, each on its own thread with its own stream; f(comm) runs on every
// rank and its outcome is recorded per rank.
class nccl_ranks {
public:
    nccl_ranks()
    {
        cuda_check(cudaGetDeviceCount(&n_), "cudaGetDeviceCount");
        comms_.resize(std::size_t(n_));
        REQUIRE(ncclCommInitAll(comms_.data(), n_, nullptr) == ncclSuccess);
    }
    ~nccl_ranks()
    {
        for (ncclComm_t c : comms_)
            ncclCommDestroy(c);
    }
    int size() const { return n_; }

    template <class F>
    std::vector<gradsync_test::outcome> run(F f)
    {
        std::vector<gradsync_test::outcome> out(comms_.size());
        std::vector<std::thread> threads;
        for (std::size_t r = 0; r < out.size(); ++r)
            threads.emplace_back(&nccl_ranks::rank_main<F>, int(r), comms_[r], std::ref(f), std::ref(out[r]));
        for (std::thread& t : threads)
            t.join();
        return out;
    }

private:
    template <class F>
    static void rank_main(int r, ncclComm_t nccl, F& f, gradsync_test::outcome& out)
    {
        gradsync_test::record(out, false, [&] {
            cuda_check(cudaSetDevice(r), "cudaSetDevice");
            cudaStream_t s = nullptr;
            cuda_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
            try {
                nccl_communicator comm(nccl, s);
                f(comm, s);
            } catch (...) {
                cudaStreamDestroy(s);
                throw;
            }
            cudaStreamDestroy(s);
        });
    }

    int n_ = 0;
    std::vector<ncclComm_t> comms_;
};

std::string all_ok(const std::vector<gradsync_test::outcome>& out)
{
    for (std::size_t r = 0; r < out.size(); ++r)
        if (out[r].k != gradsync_test::kind::ok)
            return "rank " + std::to_string(r) + " ended in " + gradsync_test::kind_name(out[r].k) + ": " + out[r].what;
    return "";
}

template <class T>
std::vector<T> to_host(const gradsync::device_buffer<T>& d)
{
    std::vector<T> v(d.size());
    cuda_check(cudaMemcpy(v.data(), d.data(), v.size() * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy");
    return v;
}

// cudaMemcpy from pageable memory may return before the data lands, unordered with the
// rank's non-blocking stream: synchronize the device before NCCL reads it.
template <class T>
gradsync::device_buffer<T> to_device(const std::vector<T>& v)
{
    gradsync::device_buffer<T> d(v.size());
    cuda_check(cudaMemcpy(d.data(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    return d;
}

// Every rank reduces its input through device_reducer over NCCL; returns the results.
template <class T, class Policy, class Algorithm>
std::vector<std::vector<T>> reduce_over_nccl(nccl_ranks& ranks, const std::vector<std::vector<T>>& in,
                                             std::vector<gradsync_test::outcome>& outcomes,
                                             const std::vector<std::size_t>& layers = {}, Algorithm algorithm = {})
{
    std::vector<std::vector<T>> out(in.size());
    outcomes = ranks.run([&](nccl_communicator& comm, cudaStream_t s) {
        const std::size_t r = std::size_t(comm.rank());
        gradsync::device_buffer<T> d = to_device(in[r]);
        gradsync::device_reducer<T, nccl_communicator, Policy, Algorithm> reduce(comm, in[r].size(), layers, algorithm);
        if (reduce.path() != gradsync::device_path::direct)
            throw std::logic_error("the reducer did not choose the direct path");
        reduce(gradsync::device_span<T>(d.data(), d.size(), s));
        out[r] = to_host(d);
    });
    return out;
}

// The same device plans on the CPU: a local_group of in.size() ranks in host_space with
// Thrust's CPP system, direct path.
template <class T, class Policy, class Algorithm>
std::vector<std::vector<T>> reduce_on_cpu(const std::vector<std::vector<T>>& in, const std::vector<std::size_t>& layers,
                                          Algorithm algorithm)
{
    using space = decltype(gradsync::host_space{thrust::cpp::par});
    std::vector<std::vector<T>> out = in;
    gradsync::local_group group(int(in.size()));
    group.run([&](gradsync::local_communicator& comm) {
        std::vector<T>& v = out[std::size_t(comm.rank())];
        gradsync::device_reducer<T, gradsync::local_communicator, Policy, Algorithm, space> reduce(
            comm, v.size(), layers, algorithm, {.path = gradsync::device_path::direct});
        reduce(gradsync::device_span<T, space>(v.data(), v.size(), space{}));
    });
    return out;
}

} // namespace

TEST_CASE("nccl_communicator moves device and host memory between ranks", "[nccl]")
{
    nccl_ranks ranks;
    const int n = ranks.size();
    std::vector<std::vector<int>> got_device(static_cast<std::size_t>(n)), got_host(static_cast<std::size_t>(n));
    const auto out = ranks.run([&](nccl_communicator& comm, cudaStream_t) {
        const int r = comm.rank(), right = (r + 1) % n, left = (r + n - 1) % n;
        std::vector<int> mine(100003), host_in(777, -1), host_out(777, r);
        for (std::size_t i = 0; i < mine.size(); ++i)
            mine[i] = int(i) * 7 + r;
        gradsync::device_buffer<int> send = to_device(mine), recv(mine.size());
        auto rq = gradsync::irecv(comm, std::span<int>(recv.data(), recv.size()), left, 5);
        auto hq = gradsync::irecv(comm, std::span<int>(host_in), left, 5);
        auto sq = gradsync::isend(comm, std::span<const int>(send.data(), send.size()), right, 5);
        auto tq = gradsync::isend(comm, std::span<const int>(host_out), right, 5);
        comm.wait(rq);
        comm.wait(sq);
        comm.wait(hq);
        comm.wait(tq);
        got_device[std::size_t(r)] = to_host(recv);
        got_host[std::size_t(r)] = host_in;
    });
    REQUIRE(all_ok(out) == "");
    for (int r = 0; r < n; ++r) {
        const int left = (r + n - 1) % n;
        std::vector<int> want(100003);
        for (std::size_t i = 0; i < want.size(); ++i)
            want[i] = int(i) * 7 + left;
        CHECK(got_device[std::size_t(r)] == want);
        CHECK(got_host[std::size_t(r)] == std::vector<int>(777, left));
    }
}

TEST_CASE("nccl_communicator refuses a peer out of range", "[nccl]")
{
    nccl_ranks ranks;
    const int n = ranks.size();
    const auto out = ranks.run([&](nccl_communicator& comm, cudaStream_t) {
        int x = 0;
        gradsync::isend(comm, std::span<const int>(&x, 1), n, 3);
    });
    for (const auto& o : out) {
        CHECK(o.k == gradsync_test::kind::usage);
        CHECK(o.what.find("peer " + std::to_string(n) + " is out of range") != std::string::npos);
    }
}

TEMPLATE_TEST_CASE("device_reducer over NCCL: device plans give the host path's bits", "[nccl]", gradsync::half,
                   float, double)
{
    using T = TestType;
    nccl_ranks ranks;
    const int n = ranks.size();
    for (std::size_t count : {std::size_t(1), std::size_t(1000), std::size_t(1000003)}) {
        INFO(ref::type_name<T>() << ", N " << n << ", count " << count);
        const auto in = device_cases::inputs<T>(false, count, n, count);
        std::vector<gradsync_test::outcome> outcomes;
        auto check = [&](auto policy, auto algorithm) {
            using P = decltype(policy);
            using A = decltype(algorithm);
            const auto got = reduce_over_nccl<T, P, A>(ranks, in, outcomes);
            CHECK(all_ok(outcomes) == "");
            const auto want = device_cases::host_results<T, P, A>({in}, {});
            for (int r = 0; r < n; ++r)
                CHECK(ref::first_difference(got[std::size_t(r)], want[0][std::size_t(r)]) == "");
        };
        check(gradsync::sum{}, gradsync::ring{});
        check(gradsync::average{}, gradsync::recursive_halving{});
        check(gradsync::sum{}, gradsync::automatic{});
    }
}

TEMPLATE_TEST_CASE("nccl_passthrough: exact on integer data, identical on every rank", "[nccl]", gradsync::half, float,
                   double)
{
    using T = TestType;
    nccl_ranks ranks;
    const int n = ranks.size();
    const auto in = device_cases::inputs<T>(true, 99, n, 1000003);
    std::vector<gradsync_test::outcome> outcomes;
    const auto sum = reduce_over_nccl<T, gradsync::sum, gradsync::nccl_passthrough>(ranks, in, outcomes);
    CHECK(all_ok(outcomes) == "");
    CHECK(ref::first_difference(sum[0], ref::exact(in, false)) == "");
    CHECK(device_cases::identical(sum) == "");
    const auto avg = reduce_over_nccl<T, gradsync::average, gradsync::nccl_passthrough>(ranks, in, outcomes);
    CHECK(all_ok(outcomes) == "");
    CHECK(ref::first_difference(avg[0], ref::exact(in, true)) == "");
    CHECK(device_cases::identical(avg) == "");
}

TEMPLATE_TEST_CASE("device_reducer over NCCL: Adasum's device plans give the CPU's device-plan bits", "[nccl]",
                   gradsync::half, float, double)
{
    using T = TestType;
    nccl_ranks ranks;
    const int n = ranks.size();
    const std::size_t count = 1000003;
    const std::vector<std::size_t> layers{300, 0, 1, 4000, count - 4301};
    INFO(ref::type_name<T>() << ", N " << n);
    const auto in = device_cases::inputs<T>(false, 7, n, count);
    std::vector<gradsync_test::outcome> outcomes;
    auto check = [&](auto algorithm) {
        using A = decltype(algorithm);
        INFO(A::name);
        const auto got = reduce_over_nccl<T, gradsync::adasum, A>(ranks, in, outcomes, layers, algorithm);
        CHECK(all_ok(outcomes) == "");
        const auto want = reduce_on_cpu<T, gradsync::adasum, A>(in, layers, algorithm);
        for (int r = 0; r < n; ++r)
            CHECK(ref::first_difference(got[std::size_t(r)], want[std::size_t(r)]) == "");
        CHECK(device_cases::identical(got) == "");
    };
    check(gradsync::ring{});
    check(gradsync::recursive_halving{});
    check(gradsync::recursive_doubling{});
    check(gradsync::automatic{});
    check(gradsync::hierarchical{.ranks_per_node = 1});
}
