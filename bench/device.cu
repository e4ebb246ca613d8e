// The device path on one GPU, in two tables:
//  - kernels: the Thrust kernels (kernels/thrust.hpp) on 256 MiB per operand, fp16 / fp32 /
//    fp64, against a device-to-device copy of the same bytes: add (reads 2, writes 1
//    operand), triple (reads 2), scaled_add (reads 2, writes 1); timed with CUDA events.
//    ratio = copy time / kernel time, so a kernel at full memory bandwidth shows about
//    2/3 (add, scaled_add) or 1 (triple).
//  - allreduce: fp32 Sum on 2, 4 and 8 local_group ranks sharing the GPU, 1 and 64 MiB per
//    rank: the direct path (device plans, device-to-device messages), the staged one
//    (pinned host buffers, host algorithm) and the host path (host memory, no GPU; it shares
//    the group, whose copies first ask CUDA whether a pointer is device memory);
//    ratio = host time / side time.
// Without a CUDA device it says so and exits 77. GRADSYNC_BENCH_REPS (default 3) sets the
// interleaved repetitions; the tables give medians.
#include <cuda_runtime.h>

#include <atomic>
#include <barrier>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <gradsync/device.hpp>
#include <gradsync/gradsync.hpp>

#include "median_table.hpp"

namespace {

using gradsync::detail::cuda_check;

constexpr std::size_t kernel_bytes = std::size_t(256) << 20;

// Times each iteration with CUDA events on the stream (manual time).
template <class F>
void timed(benchmark::State& s, cudaStream_t stream, F&& body)
{
    cudaEvent_t start, stop;
    cuda_check(cudaEventCreate(&start), "cudaEventCreate");
    cuda_check(cudaEventCreate(&stop), "cudaEventCreate");
    for (auto _ : s) {
        cuda_check(cudaEventRecord(start, stream), "cudaEventRecord");
        body();
        cuda_check(cudaEventRecord(stop, stream), "cudaEventRecord");
        cuda_check(cudaEventSynchronize(stop), "cudaEventSynchronize");
        float ms = 0;
        cuda_check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
        s.SetIterationTime(double(ms) * 1e-3);
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
}

template <class T>
struct kernel_buffers {
    gradsync::device_buffer<T> a, b, out;
    gradsync::device_buffer<gradsync::kernels::dot_triple> workspace, result;
    explicit kernel_buffers(std::size_t n)
        : a(n), b(n), out(n), workspace(gradsync::kernels::triple_workspace(n)), result(1)
    {
        const std::vector<T> ones(n, T(0.5f));
        cuda_check(cudaMemcpy(a.data(), ones.data(), n * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
        cuda_check(cudaMemcpy(b.data(), ones.data(), n * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
        cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); // pageable copies may still be landing
    }
};

template <class T>
void register_kernels(const std::string& type, kernel_buffers<T>& buf, cudaStream_t stream, int rep)
{
    const std::size_t n = kernel_bytes / sizeof(T);
    const auto exec = thrust::cuda::par_nosync.on(stream);
    const std::span<T> a(buf.a.data(), n), out(buf.out.data(), n);
    const std::span<const T> ca(buf.a.data(), n), cb(buf.b.data(), n);
    auto reg = [&](const std::string& side, auto body) {
        benchmark::RegisterBenchmark(gradsync_bench::bench_name(type + "_" + side, kernel_bytes, rep).c_str(),
                                     [stream, body](benchmark::State& s) { timed(s, stream, body); })
            ->Iterations(20)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
    };
    reg("copy", [=] {
        cuda_check(cudaMemcpyAsync(out.data(), ca.data(), kernel_bytes, cudaMemcpyDeviceToDevice, stream),
                   "cudaMemcpyAsync");
    });
    reg("add", [=] { gradsync::kernels::add(exec, a, cb); });
    reg("triple", [=, &buf] {
        gradsync::kernels::triple(exec, ca, cb, buf.result.data(),
                                  std::span<gradsync::kernels::dot_triple>(buf.workspace.data(), buf.workspace.size()));
    });
    reg("scaled_add", [=] { gradsync::kernels::scaled_add(exec, out, 0.5, ca, 0.5, cb); });
}

void kernel_runs(int reps, gradsync_bench::median_table& table)
{
    cudaStream_t stream;
    cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    {
        kernel_buffers<gradsync::half> h(kernel_bytes / 2);
        kernel_buffers<float> f(kernel_bytes / 4);
        kernel_buffers<double> d(kernel_bytes / 8);
        for (int rep = 0; rep < reps; ++rep) {
            register_kernels("fp16", h, stream, rep);
            register_kernels("fp32", f, stream, rep);
            register_kernels("fp64", d, stream, rep);
        }
        benchmark::RunSpecifiedBenchmarks(&table);
        benchmark::ClearRegisteredBenchmarks();
    }
    cudaStreamDestroy(stream);
}

enum class side { direct, staged, host };
const char* side_name(side s) { return s == side::direct ? "direct" : s == side::staged ? "staged" : "host"; }

// One allreduce per call on this rank, as `which` says.
class rank_reducer {
public:
    rank_reducer(gradsync::local_communicator& comm, side which, std::size_t count, float* device, float* host,
                 cudaStream_t stream)
        : which_(which), device_(device, count, stream), host_(host, count)
    {
        if (which == side::host)
            host_reducer_.emplace(comm, count);
        else
            device_reducer_.emplace(comm, count, gradsync::automatic{},
                                    gradsync::device_options{.path = which == side::direct
                                                                 ? gradsync::device_path::direct
                                                                 : gradsync::device_path::staged});
    }

    void operator()()
    {
        if (which_ == side::host)
            (*host_reducer_)(host_);
        else
            (*device_reducer_)(device_);
    }

private:
    side which_;
    gradsync::device_span<float> device_;
    std::span<float> host_;
    std::optional<gradsync::reducer<float, gradsync::local_communicator>> host_reducer_;
    std::optional<gradsync::device_reducer<float, gradsync::local_communicator>> device_reducer_;
};

// Rank 0 drives Google Benchmark; before each benchmark a barrier tells the other ranks the
// side, size and (fixed) iteration count, and they run that many allreduces alongside.
void allreduce_runs(int ranks, const std::vector<std::size_t>& sizes, int reps, gradsync_bench::median_table& table)
{
    gradsync::local_group group(ranks, gradsync::local_options{.copy = gradsync::device_copy});
    std::barrier sync(ranks);
    std::atomic<std::size_t> command_bytes{0}; // 0 ends the run
    std::atomic<int> command_side{0};
    std::atomic<std::int64_t> iterations{0};
    const std::size_t largest = sizes.back() / sizeof(float);

    group.run([&](gradsync::local_communicator& comm) {
        cudaStream_t stream;
        cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
        gradsync::device_buffer<float> device(largest);
        std::vector<float> host(largest, 1.0f);
        cuda_check(cudaMemcpyAsync(device.data(), host.data(), largest * sizeof(float), cudaMemcpyHostToDevice, stream),
                   "cudaMemcpyAsync");
        cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
        if (comm.rank() != 0) {
            for (;;) {
                sync.arrive_and_wait();
                const std::size_t bytes = command_bytes.load();
                if (bytes == 0)
                    break;
                rank_reducer reduce(comm, side(command_side.load()), bytes / sizeof(float), device.data(), host.data(),
                                    stream);
                for (std::int64_t i = iterations.load(); i > 0; --i)
                    reduce();
            }
        } else {
            for (int rep = 0; rep < reps; ++rep)
                for (std::size_t bytes : sizes)
                    for (side which : {side::host, side::staged, side::direct}) {
                        const auto iters = which == side::direct ? 20 : 5;
                        benchmark::RegisterBenchmark(
                            gradsync_bench::bench_name(side_name(which), bytes, rep).c_str(),
                            [&, bytes, which, iters](benchmark::State& s) {
                                command_bytes.store(bytes);
                                command_side.store(int(which));
                                iterations.store(iters);
                                sync.arrive_and_wait(); // announce: others plan their reducer
                                rank_reducer reduce(comm, which, bytes / sizeof(float), device.data(), host.data(),
                                                    stream);
                                for (auto _ : s)
                                    reduce();
                            })
                            ->Iterations(iters)
                            ->UseRealTime()
                            ->Unit(benchmark::kMicrosecond);
                    }
            benchmark::RunSpecifiedBenchmarks(&table);
            benchmark::ClearRegisteredBenchmarks();
            command_bytes.store(0);
            sync.arrive_and_wait();
        }
        cudaStreamDestroy(stream);
    });
}

} // namespace

int main(int argc, char** argv)
{
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        std::printf("skipped: no usable CUDA device\n");
        return 77;
    }
    benchmark::Initialize(&argc, argv);
    const char* reps_env = std::getenv("GRADSYNC_BENCH_REPS");
    const int reps = reps_env ? std::max(1, std::atoi(reps_env)) : 3;
    gradsync_bench::median_table kernels;
    kernel_runs(reps, kernels);
    const std::vector<int> rank_counts{2, 4, 8};
    const std::vector<std::size_t> sizes{std::size_t(1) << 20, std::size_t(64) << 20};
    std::vector<std::unique_ptr<gradsync_bench::median_table>> allreduce;
    for (int ranks : rank_counts) {
        allreduce.push_back(std::make_unique<gradsync_bench::median_table>());
        allreduce_runs(ranks, sizes, reps, *allreduce.back());
    }

    std::printf("\n== summary\n");
    for (const char* type : {"fp16", "fp32", "fp64"}) {
        const std::string t = type;
        std::printf("\n%s kernels on the GPU, bytes = one operand", type);
        kernels.print({t + "_copy", t + "_add", t + "_triple", t + "_scaled_add"}, t + "_copy", {kernel_bytes}, 1.0);
    }
    for (std::size_t i = 0; i < rank_counts.size(); ++i) {
        const int ranks = rank_counts[i];
        std::printf("\nallreduce, %d local_group ranks on one GPU, fp32 Sum, automatic", ranks);
        allreduce[i]->print({"host", "staged", "direct"}, "host", sizes, 2.0 * (ranks - 1) / ranks);
    }
    return 0;
}
