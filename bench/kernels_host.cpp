// Host kernels against a memcpy of the same bytes (the bytes of one operand), fp16, fp32 and
// fp64, 64 KiB ... 64 MiB per operand: add (acc += in), triple ([a.b, a.a, b.b] in double)
// and scaled_add (out = ca a + cb b), the per-element work of Sum and of Adasum.
// Sides interleave by repetition (GRADSYNC_BENCH_REPS=3 by default); the closing tables
// give medians and ratio = memcpy time / kernel time.
#include <gradsync/kernels/host.hpp>
#include <gradsync/kernels/host_adasum.hpp>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "median_table.hpp"

namespace {

template <class T>
struct buffers {
    std::vector<T> a, b;
    std::vector<unsigned char> src, dst;
    explicit buffers(std::size_t bytes)
        : a(bytes / sizeof(T), T(0.5f)), b(bytes / sizeof(T), T(0.25f)), src(bytes, 1), dst(bytes)
    {
    }
};

template <class T>
void register_type(const std::string& type, buffers<T>& buf, const std::vector<std::size_t>& sizes, int rep)
{
    for (std::size_t bytes : sizes) {
        const std::size_t n = bytes / sizeof(T);
        const auto iters = gradsync_bench::iterations_for(bytes, 8e9, 1e-7, 0.03);
        auto reg = [&](const std::string& side, auto body) {
            benchmark::RegisterBenchmark(gradsync_bench::bench_name(type + "_" + side, bytes, rep).c_str(), body)
                ->Iterations(iters)
                ->UseRealTime()
                ->Unit(benchmark::kMicrosecond);
        };
        reg("memcpy", [&buf, bytes](benchmark::State& s) {
            for (auto _ : s) {
                std::memcpy(buf.dst.data(), buf.src.data(), bytes);
                benchmark::ClobberMemory();
            }
        });
        reg("add", [&buf, n](benchmark::State& s) {
            for (auto _ : s) {
                gradsync::kernels::add<T>(std::span<T>(buf.a.data(), n), std::span<const T>(buf.b.data(), n));
                benchmark::ClobberMemory();
            }
        });
        reg("triple", [&buf, n](benchmark::State& s) {
            for (auto _ : s)
                benchmark::DoNotOptimize(gradsync::kernels::triple<T>(std::span<const T>(buf.a.data(), n),
                                                                        std::span<const T>(buf.b.data(), n)));
        });
        reg("scaled_add", [&buf, n](benchmark::State& s) {
            for (auto _ : s) {
                const std::span<T> a(buf.a.data(), n);
                gradsync::kernels::scaled_add<T>(a, 0.5, a, 0.5, std::span<const T>(buf.b.data(), n));
                benchmark::ClobberMemory();
            }
        });
    }
}

} // namespace

int main(int argc, char** argv)
{
    benchmark::Initialize(&argc, argv);
    const char* reps_env = std::getenv("GRADSYNC_BENCH_REPS");
    const int reps = reps_env ? std::max(1, std::atoi(reps_env)) : 3;
    std::vector<std::size_t> sizes;
    for (std::size_t b = 65536; b <= (std::size_t(64) << 20); b *= 16)
        sizes.push_back(b);
    buffers<gradsync::half> h(sizes.back());
    buffers<float> f(sizes.back());
    buffers<double> d(sizes.back());
    for (int rep = 0; rep < reps; ++rep) {
        register_type("fp16", h, sizes, rep);
        register_type("fp32", f, sizes, rep);
        register_type("fp64", d, sizes, rep);
    }
    gradsync_bench::median_table table;
    benchmark::RunSpecifiedBenchmarks(&table);
    for (const char* type : {"fp16", "fp32", "fp64"}) {
        const std::string t = type;
        std::printf("\n%s kernels, bytes = one operand", type);
        table.print({t + "_memcpy", t + "_add", t + "_triple", t + "_scaled_add"}, t + "_memcpy", sizes, 1.0);
    }
    return 0;
}
