// The device path on one GPU: local_group ranks (threads) sharing it, each with its own
// stream and device buffers, messages copied device to device (gradsync::device_copy). The
// cases of tests/gpu/device_cases.hpp and tests/gpu/adasum_cases.hpp, as
// test_thrust_kernels_allreduce and test_device_adasum run them on the CPU:
//  - Sum and Average, direct path, ring / recursive_halving / recursive_doubling /
//    automatic, fp16, bf16, fp32, fp64, N in {1, 2, 3, 4, 8}, counts {0, 1, N-1, 1000,
//    1000003}: integer data exact, random data the host path's bits, every rank alike;
//  - staged and direct ranks mixed for Sum; the staged path, asked for, for Adasum and
//    hierarchical (pinned buffers): the host bits;
//  - Adasum's device plans on the direct path, N = 1..16, every algorithm and type, against
//    the Adasum reference and the host plan, every rank alike; Horovod's scenarios;
//    hierarchical's Sum and Average exact;
//  - misuse: Adasum ranks that mix paths (or a host reducer with device ones) refused
//    naming the triple order, ranks that disagree on the count, a buffer of the wrong size,
//    and the direct path on a group without device_copy.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <memory>
#include <vector>

#include <gradsync/device.hpp>
#include <gradsync/gradsync.hpp>

#include "conformance/device.hpp"
#include "gpu/adasum_cases.hpp"
#include "gpu/device_cases.hpp"

namespace {

using gradsync::bfloat16;
using gradsync::device_path;

struct cuda_harness {
    using space_type = gradsync::cuda_stream;

    static std::unique_ptr<gradsync::local_group> make_group(int n)
    {
        return std::make_unique<gradsync::local_group>(n, gradsync::local_options{.copy = gradsync::device_copy});
    }

    struct context {
        cudaStream_t stream = nullptr;
        context()
        {
            gradsync::detail::cuda_check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
        }
        context(const context&) = delete;
        context& operator=(const context&) = delete;
        ~context() { cudaStreamDestroy(stream); }
        space_type space() const { return stream; }
    };

    // Copies go on the rank's stream: a plain cudaMemcpy from pageable memory may return
    // before the data lands, unordered with a non-blocking stream.
    template <class T>
    struct buffer {
        gradsync::device_buffer<T> data;
        space_type space;
        buffer(const context& ctx, const std::vector<T>& v) : data(v.size()), space(ctx.space())
        {
            space.copy(data.data(), v.data(), v.size() * sizeof(T));
            space.synchronize();
        }
        gradsync::device_span<T> span() { return {data.data(), data.size(), space}; }
        std::vector<T> read() const
        {
            std::vector<T> v(data.size());
            space.copy(v.data(), data.data(), v.size() * sizeof(T));
            space.synchronize();
            return v;
        }
    };
};

} // namespace

#define GRADSYNC_GPU_MATRIX_CASE(algo, type, type_name)                                                                \
    TEST_CASE("device path on one GPU: " #algo " " type_name, "[local]")                                             \
    {                                                                                                                  \
        conformance::device_elementwise_matrix<cuda_harness, type, gradsync::algo>({1, 2, 3, 4, 8}, 1000003,           \
                                                                                    std::size_t(1) << 20,               \
                                                                                    std::size_t(64) << 20);             \
    }

GRADSYNC_GPU_MATRIX_CASE(ring, gradsync::half, "fp16")
GRADSYNC_GPU_MATRIX_CASE(ring, bfloat16, "bf16")
GRADSYNC_GPU_MATRIX_CASE(ring, float, "fp32")
GRADSYNC_GPU_MATRIX_CASE(ring, double, "fp64")
GRADSYNC_GPU_MATRIX_CASE(recursive_halving, gradsync::half, "fp16")
GRADSYNC_GPU_MATRIX_CASE(recursive_halving, float, "fp32")
GRADSYNC_GPU_MATRIX_CASE(recursive_halving, double, "fp64")
GRADSYNC_GPU_MATRIX_CASE(recursive_doubling, gradsync::half, "fp16")
GRADSYNC_GPU_MATRIX_CASE(recursive_doubling, float, "fp32")
GRADSYNC_GPU_MATRIX_CASE(automatic, bfloat16, "bf16")
GRADSYNC_GPU_MATRIX_CASE(automatic, float, "fp32")

TEST_CASE("device path on one GPU: the staged path (pinned memory) gives the host bits for Adasum and hierarchical",
          "[local]")
{
    const std::vector<std::size_t> layers{300, 0, 1, 40000, 699};
    for (int n : {1, 2, 3, 4, 8}) {
        CHECK(device_cases::staged_case<cuda_harness, float, gradsync::adasum, gradsync::ring>(n, 41000, layers) == "");
        CHECK(device_cases::staged_case<cuda_harness, gradsync::half, gradsync::adasum, gradsync::recursive_halving>(
                  n, 41000, layers) == "");
    }
    CHECK(device_cases::staged_case<cuda_harness, double, gradsync::sum, gradsync::hierarchical>(
              8, 41000, {}, gradsync::hierarchical{.ranks_per_node = 4}) == "");
}

TEST_CASE("device path on one GPU: misuse ends in a clear error on every rank", "[local]")
{
    using cases = device_cases::misuse<cuda_harness>;
    using gradsync_test::kind;
    CHECK(device_cases::adasum_mixing_refused<cuda_harness>() == "");
    // Sum has the host bits on every path: a host reducer beside device ones agrees.
    std::vector<std::vector<float>> sum_data = device_cases::inputs<float>(true, 4, 3, 100);
    const std::vector<float> exact_sum = ref::exact(sum_data, false);
    CHECK(device_cases::outcomes_ok(cases::host_beside_direct<gradsync::sum>(sum_data)) == "");
    CHECK(ref::first_difference(sum_data[0], exact_sum) == "");
    CHECK(device_cases::identical(sum_data) == "");
    CHECK(device_cases::all_ended_in(cases::counts_disagree(device_path::direct), kind::mismatch,
                                     "element count") == "");
    CHECK(device_cases::all_ended_in(cases::wrong_size(), kind::usage, "buffer holds 99 elements") == "");

    // A group that copies with memcpy cannot take device memory: asking for direct is refused,
    // and automatic stages.
    std::vector<gradsync_test::outcome> outcomes(2);
    std::vector<device_path> chosen(2);
    gradsync::local_group plain(2);
    try {
        plain.run([&](gradsync::local_communicator& comm) {
            const std::size_t r = std::size_t(comm.rank());
            gradsync_test::record(outcomes[r], true, [&] {
                gradsync::device_reducer<float, gradsync::local_communicator> automatic(comm, 10);
                chosen[r] = automatic.path();
                gradsync::device_reducer<float, gradsync::local_communicator> direct(
                    comm, 10, gradsync::automatic{}, gradsync::device_options{.path = device_path::direct});
            });
        });
    } catch (...) {
        // recorded per rank
    }
    for (std::size_t r = 0; r < 2; ++r) {
        CHECK(chosen[r] == device_path::staged);
        CHECK(outcomes[r].k == kind::usage);
        CHECK(outcomes[r].what.find("moves device memory") != std::string::npos);
    }
}


TEST_CASE("device Adasum on one GPU: every algorithm and type against the reference and the host plan", "[local]")
{
    CHECK(adasum_cases::matrix<cuda_harness, gradsync::half>(adasum_cases::one_to(16), 8, 4096) == "");
    CHECK(adasum_cases::matrix<cuda_harness, bfloat16>(adasum_cases::one_to(16), 8, 4096) == "");
    CHECK(adasum_cases::matrix<cuda_harness, float>(adasum_cases::one_to(16), 8, 4096) == "");
    CHECK(adasum_cases::matrix<cuda_harness, double>(adasum_cases::one_to(16), 8, 4096) == "");
    // Layers of about 33000 elements in 64 KiB segments.
    CHECK(adasum_cases::matrix<cuda_harness, float>({3, 4, 8}, 8, std::size_t(64) << 10) == "");
}

TEST_CASE("device hierarchical on one GPU: Sum and Average exact on integers, the host bits on random data",
          "[local]")
{
    const std::vector<int> ns{1, 2, 4, 6, 8, 16};
    const std::vector<std::size_t> counts{0, 1, 7, 1000, 100003};
    CHECK(adasum_cases::hierarchical_elementwise<cuda_harness, gradsync::half>(ns, counts, std::size_t(1) << 20) ==
          "");
    CHECK(adasum_cases::hierarchical_elementwise<cuda_harness, float>(ns, counts, std::size_t(1) << 20) == "");
    CHECK(adasum_cases::hierarchical_elementwise<cuda_harness, double>(ns, counts, 4096) == "");
}

TEST_CASE("device Adasum on one GPU: Horovod's scenarios", "[local]")
{
    using namespace adasum_cases;
    CHECK(orthogonal<cuda_harness, float>(adasum_cases::scenario_ranks) == "");
    CHECK(orthogonal<cuda_harness, double>(adasum_cases::scenario_ranks) == "");
    CHECK(parallel<cuda_harness, float>(adasum_cases::scenario_ranks) == "");
    CHECK(identical<cuda_harness, float>(adasum_cases::scenario_ranks) == "");
    CHECK(identical<cuda_harness, double>(adasum_cases::scenario_ranks) == "");
    CHECK(magnitude<cuda_harness, float>(adasum_cases::scenario_ranks, 1e-30) == "");
    CHECK(magnitude<cuda_harness, float>(adasum_cases::scenario_ranks, 1e30) == "");
    CHECK(magnitude<cuda_harness, double>(adasum_cases::scenario_ranks, 1e-100) == "");
    CHECK(magnitude<cuda_harness, double>(adasum_cases::scenario_ranks, 1e150) == "");
    CHECK(zero_layers<cuda_harness, float>(adasum_cases::scenario_ranks) == "");
    CHECK(one_nonzero<cuda_harness, double>(adasum_cases::scenario_ranks) == "");
    CHECK(nan_input<cuda_harness, float>(adasum_cases::scenario_ranks) == "");
    CHECK(nan_input<cuda_harness, double>(adasum_cases::scenario_ranks) == "");
}
