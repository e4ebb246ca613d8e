// nccl_passthrough: the algorithm that hands Sum and Average to one ncclAllReduce over an
// nccl_communicator (comm/nccl/nccl.hpp), the baseline the device plans are compared against.
//
//   gradsync::allreduce(comm, span, gradsync::sum{}, gradsync::nccl_passthrough{});
//
// cost: NCCL's own (ring or tree, chosen by NCCL); Average adds one scaling kernel.
//
// Preconditions: an nccl_communicator and GPU memory (cuda_stream); Sum or Average. Every
// rank ends with NCCL's sum, which NCCL computes in one order on every rank. Needs nvcc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <nccl.h>

#include <gradsync/comm/communicator.hpp>
#include <gradsync/comm/nccl/nccl.hpp>
#include <gradsync/core/codes.hpp>
#include <gradsync/core/cuda.hpp>
#include <gradsync/core/device_span.hpp>
#include <gradsync/core/error.hpp>
#include <gradsync/core/layout.hpp>
#include <gradsync/core/types.hpp>
#include <gradsync/memory/space_memory.hpp>
#include <gradsync/plan/plan.hpp>
#include <gradsync/policy/adasum.hpp>
#include <gradsync/policy/device_sum.hpp>

namespace gradsync {

namespace detail {

template <class T>
constexpr ncclDataType_t nccl_type() noexcept
{
    if constexpr (std::is_same_v<T, half>)
        return ncclFloat16;
    else if constexpr (std::is_same_v<T, bfloat16>)
        return ncclBfloat16;
    else if constexpr (std::is_same_v<T, float>)
        return ncclFloat32;
    else
        return ncclFloat64;
}

} // namespace detail

// Sum or Average by one ncclAllReduce (Average: the sum scaled by 1/N with the device
// kernel, as average::finish).
struct nccl_passthrough {
    static constexpr std::uint32_t code = codes::nccl_passthrough;
    static constexpr const char* name = "nccl_passthrough";
};

template <element T, communicator C, class Policy, class Space>
class nccl_passthrough_plan : public plan_types<nccl_passthrough, C, device_span<T, Space>> {
    static_assert(!is_adasum<Policy>, "gradsync::nccl_passthrough runs ncclAllReduce, which has no Adasum: use sum or "
                                      "average, or Adasum on the staged path over a host communicator");
    static_assert(std::is_same_v<C, nccl_communicator>, "gradsync::nccl_passthrough needs an nccl_communicator");
    static_assert(std::is_same_v<Space, cuda_stream>, "gradsync::nccl_passthrough reduces GPU memory (cuda_stream)");

public:
    nccl_passthrough_plan(const C& comm, const layer_layout& layout, const plan_options<nccl_passthrough>&)
        : size_(comm.size()), count_(layout.total())
    {
    }

    std::size_t count() const noexcept { return count_; }
    std::size_t scratch_bytes() const noexcept { return 0; }

    void run(C& comm, device_span<T, Space> data, int) // NCCL has no tags
    {
        data.space().synchronize();
        if (count_) {
            const ncclResult_t r = ncclAllReduce(data.data(), data.data(), count_, detail::nccl_type<T>(), ncclSum,
                                                 comm.get(), comm.stream());
            if (r != ncclSuccess && r != ncclInProgress)
                throw communication_error("gradsync::nccl_passthrough (" + where(comm) +
                                          "): ncclAllReduce failed: " + ncclGetErrorString(r));
        }
        comm.synchronize();
        device_finish<Policy>(data.space(), data.elements(), size_);
        data.space().synchronize();
    }

private:
    int size_;
    std::size_t count_;
};

// Its row of the table (selector/plan_table.hpp), here because it needs NCCL: the policies a
// memory space combines, for its element types, and Adasum (the plan refuses Adasum, other
// communicators and spaces by name).
template <>
struct plan_row<nccl_passthrough> {
    static constexpr bool exists = true;
    template <element T, class C, class Policy, class Memory>
    static auto select()
    {
        if constexpr (requires { typename Memory::space_type; } &&
                      (Memory::template combines<Policy, T> || is_adasum<Policy>))
            return std::type_identity<nccl_passthrough_plan<T, C, Policy, typename Memory::space_type>>{};
        else
            return std::type_identity<no_plan>{};
    }
};

} // namespace gradsync
