// The device path on one GPU, in four tables:
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
//  - Adasum: fp32 on the same groups, 1, 4, 16, 64 and 256 MiB per rank in one layer, and
//    64 MiB in ResNet-50's 107 layers scaled to it (many small normalisation layers), with
//    automatic, recursive_halving and ring (automatic takes recursive_halving at these N and
//    sizes): direct Adasum against direct Sum and against staged Adasum (staged up to 64 MiB
//    only: it runs the host algorithm, tens of ms there); adasum/sum = direct Adasum time /
//    direct Sum time, staged/adasum = staged Adasum time / direct Adasum time, then the
//    64 MiB rows against the bounds 1.15 and 20.
//  - NCCL (when built with it): one NCCL rank on the GPU (NCCL refuses two on one GPU), the
//    same one-layer sizes: direct Adasum and direct Sum (automatic) against nccl_passthrough
//    Sum (one ncclAllReduce). With one rank no message moves: this is each call's overhead.
// Every run restores each rank's data first and makes one untimed call, then times a fixed
// number of calls, sized from a rough cost to about 25 ms (direct) or 60 ms (staged, host)
// and at most 32 (Sum multiplies the data by N per call; 8^33 stays finite in fp32).
// Without a CUDA device it says so and exits 77. GRADSYNC_BENCH_REPS (default 3) sets the
// interleaved repetitions; the tables give medians. About 1 to 2 minutes on an H200.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <gradsync/device.hpp>
#include <gradsync/gradsync.hpp>
#if GRADSYNC_BENCH_NCCL
#include <nccl.h>

#include <gradsync/comm/nccl/nccl.hpp>
#include <gradsync/device/nccl_passthrough.hpp>
#endif

#include "median_table.hpp"
#include "resnet50_layers.hpp"

namespace {

using gradsync::detail::cuda_check;
using gradsync_bench::resnet50_layers;

static_assert(gradsync::has_plan<float, gradsync::local_communicator, gradsync::automatic, gradsync::adasum,
                                 gradsync::space_memory<gradsync::cuda_stream>>,
              "the benchmark runs Adasum on the direct path");

constexpr std::size_t kernel_bytes = std::size_t(256) << 20;
constexpr std::size_t MiB = std::size_t(1) << 20;

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
enum class policy_kind { sum, adasum };
enum class algorithm_kind { automatic, recursive_halving, ring, nccl_passthrough };

const char* side_name(side s) { return s == side::direct ? "direct" : s == side::staged ? "staged" : "host"; }
const char* policy_name(policy_kind p) { return p == policy_kind::sum ? "sum" : "adasum"; }
const char* algorithm_name(algorithm_kind a)
{
    switch (a) {
    case algorithm_kind::recursive_halving:
        return "recursive_halving";
    case algorithm_kind::ring:
        return "ring";
    case algorithm_kind::nccl_passthrough:
        return "passthrough";
    default:
        return "automatic";
    }
}

// What one benchmark runs on every rank: an fp32 allreduce of `policy` by `algorithm` on
// `where`'s memory and path, over one layer or ResNet-50's layers scaled to the size.
struct bench_case {
    policy_kind policy = policy_kind::sum;
    side where = side::direct;
    algorithm_kind algorithm = algorithm_kind::automatic;
    bool layered = false;

    // The table's key: "<policy>_<side>_<algorithm>[_resnet50]".
    std::string name() const
    {
        return std::string(policy_name(policy)) + "_" + side_name(where) + "_" + algorithm_name(algorithm) +
               (layered ? "_resnet50" : "");
    }
};

// One rank's memory: the vector it reduces (on the device, and a host copy for the host
// path) and its starting values, restored before every run.
struct rank_data {
    cudaStream_t stream = nullptr;
    gradsync::device_buffer<float> device, start;
    std::vector<float> host, values;

    rank_data(int rank, std::size_t device_count, std::size_t host_count, cudaStream_t s)
        : stream(s), device(device_count), start(device_count), host(host_count), values(device_count)
    {
        for (std::size_t i = 0; i < values.size(); ++i) // in [0.5, 1.5), different on each rank
            values[i] = 0.5f + float((i * 7 + std::size_t(rank) * 3) % 16) / 16.0f;
        cuda_check(cudaMemcpyAsync(start.data(), values.data(), device_count * sizeof(float), cudaMemcpyHostToDevice,
                                   stream),
                   "cudaMemcpyAsync");
        cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    }

    void restore(std::size_t count, side where)
    {
        if (where == side::host) {
            std::copy_n(values.data(), count, host.data());
            return;
        }
        cuda_check(cudaMemcpyAsync(device.data(), start.data(), count * sizeof(float), cudaMemcpyDeviceToDevice,
                                   stream),
                   "cudaMemcpyAsync");
        cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    }
};

// A planned reducer of the first `count` elements, one allreduce per call.
template <class Policy, class Algorithm, class Comm>
std::function<void()> planned(Comm& comm, const bench_case& c, std::size_t count,
                              std::span<const std::size_t> layers, rank_data& data)
{
    if (c.where == side::host) {
        if constexpr (gradsync::runs_host_algorithms<Comm>) {
            auto r = std::make_shared<gradsync::reducer<float, Comm, Policy, Algorithm>>(comm, count, layers);
            return [r, d = std::span<float>(data.host.data(), count)] { (*r)(d); };
        } else {
            throw std::logic_error("bench_device: " + c.name() + ": this communicator has no host path");
        }
    }
    const gradsync::device_options options{.path = c.where == side::direct ? gradsync::device_path::direct
                                                                            : gradsync::device_path::staged};
    auto r = std::make_shared<gradsync::device_reducer<float, Comm, Policy, Algorithm>>(comm, count, layers,
                                                                                        Algorithm{}, options);
    return [r, d = gradsync::device_span<float>(data.device.data(), count, data.stream)] { (*r)(d); };
}

// nccl_passthrough, which exists for Sum over NCCL only.
template <class Policy, class Comm>
std::function<void()> planned_passthrough([[maybe_unused]] Comm& comm, const bench_case& c,
                                          [[maybe_unused]] std::size_t count,
                                          [[maybe_unused]] std::span<const std::size_t> layers,
                                          [[maybe_unused]] rank_data& data)
{
#if GRADSYNC_BENCH_NCCL
    if constexpr (std::is_same_v<Comm, gradsync::nccl_communicator> && !gradsync::is_adasum<Policy>)
        return planned<Policy, gradsync::nccl_passthrough>(comm, c, count, layers, data);
    else
#endif
        throw std::logic_error("bench_device: " + c.name() + ": nccl_passthrough runs Sum over NCCL only");
}

template <class Policy, class Comm>
std::function<void()> planned_by_algorithm(Comm& comm, const bench_case& c, std::size_t count,
                                           std::span<const std::size_t> layers, rank_data& data)
{
    switch (c.algorithm) {
    case algorithm_kind::recursive_halving:
        return planned<Policy, gradsync::recursive_halving>(comm, c, count, layers, data);
    case algorithm_kind::ring:
        return planned<Policy, gradsync::ring>(comm, c, count, layers, data);
    case algorithm_kind::nccl_passthrough:
        return planned_passthrough<Policy>(comm, c, count, layers, data);
    default:
        return planned<Policy, gradsync::automatic>(comm, c, count, layers, data);
    }
}

// Rank `data`'s reducer for case c, with its data restored: one allreduce per call.
class rank_reducer {
public:
    template <class Comm>
    rank_reducer(Comm& comm, const bench_case& c, std::size_t count, std::span<const std::size_t> layers,
                 rank_data& data)
    {
        data.restore(count, c.where);
        call_ = c.policy == policy_kind::adasum
                    ? planned_by_algorithm<gradsync::adasum>(comm, c, count, layers, data)
                    : planned_by_algorithm<gradsync::sum>(comm, c, count, layers, data);
    }

    void operator()() { call_(); }

private:
    std::function<void()> call_;
};

// Timed calls of one run: about 25 ms (direct) or 60 ms (staged, host) at a rough cost per
// call (the group's ranks share the GPU and the host, so it grows with ranks x bytes), at
// least 2 and at most 32.
benchmark::IterationCount iterations_of(const bench_case& c, std::size_t bytes, int ranks)
{
    const bool direct = c.where == side::direct;
    const benchmark::IterationCount n = gradsync_bench::iterations_for(
        bytes * std::size_t(ranks), direct ? 100e9 : 8e9, direct ? 200e-6 : 1e-3, direct ? 0.025 : 0.06);
    return std::min<benchmark::IterationCount>(n, 32);
}

// The per-rank sizes, and the one (64 MiB) of the ResNet-50 layout.
const std::vector<std::size_t> adasum_sizes{1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB, 256 * MiB};
constexpr std::size_t layered_bytes = 64 * MiB;
constexpr std::size_t staged_adasum_limit = 64 * MiB;
const std::vector<std::size_t> sum_sizes{1 * MiB, 64 * MiB};
const algorithm_kind adasum_algorithms[] = {algorithm_kind::automatic, algorithm_kind::recursive_halving,
                                            algorithm_kind::ring};

// The cases of one repetition on a local group, as (case, bytes), sizes outermost so that
// the cases of a size run close in time.
std::vector<std::pair<bench_case, std::size_t>> local_cases()
{
    std::vector<std::pair<bench_case, std::size_t>> cases;
    const auto add = [&](policy_kind p, side s, algorithm_kind a, bool layered, std::size_t bytes) {
        cases.push_back({bench_case{p, s, a, layered}, bytes});
    };
    for (std::size_t bytes : adasum_sizes) {
        if (std::find(sum_sizes.begin(), sum_sizes.end(), bytes) != sum_sizes.end()) {
            add(policy_kind::sum, side::host, algorithm_kind::automatic, false, bytes);
            add(policy_kind::sum, side::staged, algorithm_kind::automatic, false, bytes);
        }
        for (algorithm_kind a : adasum_algorithms) {
            add(policy_kind::sum, side::direct, a, false, bytes);
            add(policy_kind::adasum, side::direct, a, false, bytes);
            if (bytes <= staged_adasum_limit)
                add(policy_kind::adasum, side::staged, a, false, bytes);
        }
        if (bytes == layered_bytes)
            for (algorithm_kind a : adasum_algorithms) {
                add(policy_kind::sum, side::direct, a, true, bytes);
                add(policy_kind::adasum, side::direct, a, true, bytes);
                add(policy_kind::adasum, side::staged, a, true, bytes);
            }
    }
    return cases;
}

// Rank 0 drives Google Benchmark; before each benchmark a barrier tells the other ranks the
// case, size and (fixed) iteration count, and they run that many allreduces alongside. A
// rank that fails leaves the barrier (so that no rank waits there for it) and aborts the
// group, whose waits then fail on every rank; a wait that hangs fails after the deadline.
void allreduce_runs(int ranks, int reps, gradsync_bench::median_table& table)
{
    gradsync::local_group group(
        ranks, gradsync::local_options{.deadline = std::chrono::seconds(60), .copy = gradsync::device_copy});
    std::barrier sync(ranks);
    std::atomic<std::size_t> command_bytes{0}; // 0 ends the run
    bench_case command_case;                   // written by rank 0 before the barrier
    std::atomic<std::int64_t> iterations{0};
    const std::vector<std::pair<bench_case, std::size_t>> cases = local_cases();
    const std::size_t largest = adasum_sizes.back() / sizeof(float);
    const std::size_t largest_host = sum_sizes.back() / sizeof(float);
    const std::vector<std::size_t> layers = resnet50_layers(layered_bytes / sizeof(float));
    const auto layers_of = [&](const bench_case& c) {
        return c.layered ? std::span<const std::size_t>(layers) : std::span<const std::size_t>();
    };

    group.run([&](gradsync::local_communicator& comm) {
        cudaStream_t stream = nullptr;
        try {
            cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
            rank_data data(comm.rank(), largest, largest_host, stream);
            if (comm.rank() != 0) {
                for (;;) {
                    sync.arrive_and_wait();
                    const std::size_t bytes = command_bytes.load();
                    if (bytes == 0)
                        break;
                    const bench_case c = command_case;
                    rank_reducer reduce(comm, c, bytes / sizeof(float), layers_of(c), data);
                    for (std::int64_t i = iterations.load() + 1; i > 0; --i) // + the untimed first call
                        reduce();
                }
            } else {
                for (int rep = 0; rep < reps; ++rep)
                    for (const auto& [c, bytes] : cases) {
                        const auto iters = iterations_of(c, bytes, ranks);
                        benchmark::RegisterBenchmark(
                            gradsync_bench::bench_name(c.name(), bytes, rep).c_str(),
                            [&, c = c, bytes = bytes, iters](benchmark::State& s) {
                                command_case = c;
                                command_bytes.store(bytes);
                                iterations.store(iters);
                                sync.arrive_and_wait(); // announce: others plan their reducer
                                rank_reducer reduce(comm, c, bytes / sizeof(float), layers_of(c), data);
                                reduce(); // untimed: first-use costs
                                for (auto _ : s)
                                    reduce();
                            })
                            ->Iterations(iters)
                            ->UseRealTime()
                            ->Unit(benchmark::kMicrosecond);
                    }
                std::printf("\n-- allreduce on %d local_group ranks sharing the GPU\n", ranks);
                std::fflush(stdout);
                benchmark::RunSpecifiedBenchmarks(&table);
                benchmark::ClearRegisteredBenchmarks();
                command_bytes.store(0);
                sync.arrive_and_wait();
            }
        } catch (...) {
            if (comm.rank() == 0)
                benchmark::ClearRegisteredBenchmarks();
            sync.arrive_and_drop();
            if (stream)
                cudaStreamDestroy(stream);
            throw;
        }
        cudaStreamDestroy(stream);
    });
}

#if GRADSYNC_BENCH_NCCL
static_assert(gradsync::has_plan<float, gradsync::nccl_communicator, gradsync::automatic, gradsync::adasum,
                                 gradsync::space_memory<gradsync::cuda_stream>>,
              "the benchmark runs Adasum over NCCL on the direct path");

const bench_case nccl_cases[] = {
    {policy_kind::sum, side::direct, algorithm_kind::nccl_passthrough, false},
    {policy_kind::sum, side::direct, algorithm_kind::automatic, false},
    {policy_kind::adasum, side::direct, algorithm_kind::automatic, false},
};

void nccl_check(ncclResult_t r, const char* call)
{
    if (r != ncclSuccess)
        throw std::runtime_error(std::string("bench_device: ") + call + " failed: " + ncclGetErrorString(r));
}

// One NCCL rank on device 0, driven by this thread.
void nccl_runs(int reps, gradsync_bench::median_table& table)
{
    ncclComm_t nccl = nullptr;
    const int devices[] = {0};
    nccl_check(ncclCommInitAll(&nccl, 1, devices), "ncclCommInitAll");
    cudaStream_t stream = nullptr;
    try {
        cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
        rank_data data(0, adasum_sizes.back() / sizeof(float), 0, stream);
        gradsync::nccl_communicator comm(nccl, stream);
        for (int rep = 0; rep < reps; ++rep)
            for (std::size_t bytes : adasum_sizes)
                for (const bench_case& c : nccl_cases)
                    benchmark::RegisterBenchmark(gradsync_bench::bench_name(c.name(), bytes, rep).c_str(),
                                                 [&, c, bytes](benchmark::State& s) {
                                                     rank_reducer reduce(comm, c, bytes / sizeof(float), {}, data);
                                                     reduce(); // untimed: first-use costs
                                                     for (auto _ : s)
                                                         reduce();
                                                 })
                        ->Iterations(iterations_of(c, bytes, 1))
                        ->UseRealTime()
                        ->Unit(benchmark::kMicrosecond);
        std::printf("\n-- allreduce over NCCL, one rank\n");
        std::fflush(stdout);
        benchmark::RunSpecifiedBenchmarks(&table);
        benchmark::ClearRegisteredBenchmarks();
    } catch (...) {
        benchmark::ClearRegisteredBenchmarks();
        if (stream)
            cudaStreamDestroy(stream);
        ncclCommDestroy(nccl);
        throw;
    }
    cudaStreamDestroy(stream);
    ncclCommDestroy(nccl);
}
#endif

// "12.3" (microseconds), or "-" for a case that did not run.
std::string micros(double seconds)
{
    if (seconds <= 0)
        return "-";
    char text[32];
    std::snprintf(text, sizeof text, "%.1f", seconds * 1e6);
    return text;
}

// a / b, or "-" where either did not run.
std::string quotient(double a, double b)
{
    if (a <= 0 || b <= 0)
        return "-";
    char text[32];
    std::snprintf(text, sizeof text, "%.3f", a / b);
    return text;
}

struct adasum_row {
    int ranks;
    std::size_t bytes;
    bool layered;
    algorithm_kind algorithm;
    double sum, adasum, staged; // medians in seconds, 0 where not run
};

std::vector<adasum_row> adasum_rows(const std::vector<int>& rank_counts,
                                    const std::vector<std::unique_ptr<gradsync_bench::median_table>>& tables)
{
    std::vector<adasum_row> rows;
    for (std::size_t i = 0; i < rank_counts.size(); ++i)
        for (std::size_t bytes : adasum_sizes)
            for (bool layered : {false, true}) {
                if (layered && bytes != layered_bytes)
                    continue;
                for (algorithm_kind a : adasum_algorithms) {
                    const auto median = [&](policy_kind p, side s) {
                        return tables[i]->median(bench_case{p, s, a, layered}.name(), bytes);
                    };
                    rows.push_back({rank_counts[i], bytes, layered, a, median(policy_kind::sum, side::direct),
                                    median(policy_kind::adasum, side::direct),
                                    median(policy_kind::adasum, side::staged)});
                }
            }
    return rows;
}

void print_adasum(const std::vector<adasum_row>& rows, std::size_t layer_count)
{
    std::printf("\nAdasum, fp32, local_group ranks sharing the GPU; layers: 1, or ResNet-50's %zu scaled to the size\n",
                layer_count);
    std::printf("medians of interleaved repetitions; adasum/sum = direct Adasum time / direct Sum time, "
                "staged/adasum = staged Adasum time / direct Adasum time\n");
    std::printf("%5s %-8s %6s %-17s %14s %17s %17s %10s %13s\n", "ranks", "size", "layers", "algorithm",
                "sum_direct_us", "adasum_direct_us", "adasum_staged_us", "adasum/sum", "staged/adasum");
    for (const adasum_row& r : rows)
        std::printf("%5d %-8s %6zu %-17s %14s %17s %17s %10s %13s\n", r.ranks,
                    gradsync_bench::size_text(r.bytes).c_str(), r.layered ? layer_count : std::size_t(1),
                    algorithm_name(r.algorithm), micros(r.sum).c_str(), micros(r.adasum).c_str(),
                    micros(r.staged).c_str(), quotient(r.adasum, r.sum).c_str(), quotient(r.staged, r.adasum).c_str());

    // Adasum's paper costs it under 2% of Sum's throughput; 1.15 leaves room for the triples'
    // extra pass over the data.
    constexpr double adasum_bound = 1.15, staged_bound = 20.0;
    std::printf("\nacceptance at 64 MiB: direct Adasum at most %.2fx direct Sum, and at least %.0fx faster than "
                "staged Adasum\n",
                adasum_bound, staged_bound);
    std::printf("%5s %6s %-17s %10s %6s %13s %6s\n", "ranks", "layers", "algorithm", "adasum/sum", "<=1.15",
                "staged/adasum", ">=20");
    for (const adasum_row& r : rows) {
        if (r.bytes != layered_bytes)
            continue;
        const auto verdict = [](double a, double b, bool below, double bound) {
            if (a <= 0 || b <= 0)
                return "-";
            return (below ? a / b <= bound : a / b >= bound) ? "yes" : "NO";
        };
        std::printf("%5d %6zu %-17s %10s %6s %13s %6s\n", r.ranks, r.layered ? layer_count : std::size_t(1),
                    algorithm_name(r.algorithm), quotient(r.adasum, r.sum).c_str(),
                    verdict(r.adasum, r.sum, true, adasum_bound), quotient(r.staged, r.adasum).c_str(),
                    verdict(r.staged, r.adasum, false, staged_bound));
    }
}

#if GRADSYNC_BENCH_NCCL
void print_nccl(const gradsync_bench::median_table& table)
{
    const std::string passthrough = nccl_cases[0].name(), sum = nccl_cases[1].name(), adasum = nccl_cases[2].name();
    std::printf("\nallreduce over NCCL, one rank on the GPU (no messages: each call's overhead), fp32, one layer\n");
    std::printf("medians of interleaved repetitions; adasum/passthrough = direct Adasum time / nccl_passthrough Sum "
                "time\n");
    std::printf("%-8s %16s %14s %17s %19s\n", "size", "passthrough_us", "sum_direct_us", "adasum_direct_us",
                "adasum/passthrough");
    for (std::size_t bytes : adasum_sizes) {
        const double p = table.median(passthrough, bytes), s = table.median(sum, bytes),
                     a = table.median(adasum, bytes);
        std::printf("%-8s %16s %14s %17s %19s\n", gradsync_bench::size_text(bytes).c_str(), micros(p).c_str(),
                    micros(s).c_str(), micros(a).c_str(), quotient(a, p).c_str());
    }
}
#endif

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
    const std::vector<int> rank_counts{2, 4, 8};
    gradsync_bench::median_table kernels;
    std::vector<std::unique_ptr<gradsync_bench::median_table>> allreduce;
    for (std::size_t i = 0; i < rank_counts.size(); ++i)
        allreduce.push_back(std::make_unique<gradsync_bench::median_table>());
#if GRADSYNC_BENCH_NCCL
    gradsync_bench::median_table nccl;
#endif
    // A part that fails says why; the others still run, the summary shows what ran, and the
    // exit status is 1.
    bool failed = false;
    const auto part = [&](const std::string& what, auto run) {
        try {
            run();
        } catch (const std::exception& e) {
            std::fprintf(stderr, "bench_device: %s failed: %s\n", what.c_str(), e.what());
            std::printf("\n-- %s FAILED: %s\n", what.c_str(), e.what());
            failed = true;
        }
    };
    part("kernels", [&] { kernel_runs(reps, kernels); });
    for (std::size_t i = 0; i < rank_counts.size(); ++i)
        part("allreduce on " + std::to_string(rank_counts[i]) + " ranks",
             [&] { allreduce_runs(rank_counts[i], reps, *allreduce[i]); });
#if GRADSYNC_BENCH_NCCL
    part("allreduce over NCCL", [&] { nccl_runs(reps, nccl); });
#endif

    std::printf("\n== summary\n");
    for (const char* type : {"fp16", "fp32", "fp64"}) {
        const std::string t = type;
        std::printf("\n%s kernels on the GPU, bytes = one operand", type);
        kernels.print({t + "_copy", t + "_add", t + "_triple", t + "_scaled_add"}, t + "_copy", {kernel_bytes}, 1.0);
    }
    const auto sum_case = [](side s) { return bench_case{policy_kind::sum, s, algorithm_kind::automatic, false}.name(); };
    for (std::size_t i = 0; i < rank_counts.size(); ++i) {
        const int ranks = rank_counts[i];
        std::printf("\nallreduce, %d local_group ranks on one GPU, fp32 Sum, automatic", ranks);
        allreduce[i]->print({sum_case(side::host), sum_case(side::staged), sum_case(side::direct)},
                            sum_case(side::host), sum_sizes, 2.0 * (ranks - 1) / ranks);
    }
    print_adasum(adasum_rows(rank_counts, allreduce), resnet50_layers(layered_bytes / sizeof(float)).size());
#if GRADSYNC_BENCH_NCCL
    print_nccl(nccl);
#endif
    if (failed)
        std::printf("\nsome parts FAILED (above): their rows are missing or partial\n");
    return failed ? 1 : 0;
}
