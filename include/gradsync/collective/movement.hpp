// What the data-movement collectives share: allgatherer (collective/allgather.hpp), gatherer
// (gather.hpp), scatterer (scatter.hpp) and exchanger (all_to_all.hpp). They move raw bytes
// (std::byte) in host memory, in blocks of one size b on every rank; where a rank's data holds
// every rank's block, rank j's lies at j*b.
//
// Constructing one is collective, as constructing a reducer is (collective/allreduce.hpp): the
// agreement check (collective/verify.hpp) compares the element type (byte), the policy (none),
// the algorithm (which tells the collectives apart) and its parameter, the block size, the root
// and the tag, throwing on every rank a mismatch_error naming the field where ranks differ and
// a usage_error where a rank's root is not a rank; only then is the plan built, with all its
// scratch and request slots. Each call is stamped, published on the position board and named
// in errors as a reducer's is (detail::agreed_plan); the reducers' identities and default tag
// are theirs too, so every rank must call all its collectives in the same order, and a call
// out of order ends in a mismatch_error naming both collectives where a rank sees it.
//
// Thread safety: one collective runs one call at a time. Collectives that may run concurrently
// on the same communicator need distinct tags (movement_options::tag, 0..32765).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include <gradsync/collective/allreduce.hpp>
#include <gradsync/collective/verify.hpp>
#include <gradsync/comm/communicator.hpp>
#include <gradsync/core/layout.hpp>
#include <gradsync/core/tags.hpp>
#include <gradsync/plan/plan.hpp>

namespace gradsync {

struct movement_options {
    int tag = tags::reducer; // a reducer's: calls out of order between the two are caught
};

namespace detail {

// The agreed plan of a data-movement collective: its signature (policy none, count 0, the
// block size and the root; 0 where it has none) checked on every rank, then Plan built from
// (comm, plan_args...). `about` follows the block size in the collective's name
// ("4096-byte blocks to rank 2, linear_gather").
template <communicator Comm, class Plan>
class agreed_movement : public agreed_plan<Comm, Plan> {
public:
    template <class Algorithm, class... PlanArgs>
    agreed_movement(Comm& comm, std::size_t block_bytes, int root, const Algorithm& algorithm, int tag,
                    const char* who, const char* what, const std::string& about, PlanArgs&&... plan_args)
        : agreed_plan<Comm, Plan>(comm, signature_of(comm, block_bytes, root, algorithm, tag), {}, tag, who, what,
                                  std::to_string(block_bytes) + "-byte blocks" + about + ", " + Algorithm::name,
                                  std::forward<PlanArgs>(plan_args)...)
    {
    }

private:
    template <class Algorithm>
    static signature signature_of(const Comm& comm, std::size_t block_bytes, int root, const Algorithm& algorithm,
                                  int tag)
    {
        signature s = call_signature<std::byte, void>(comm, 0, layer_layout(0, {}),
                                                      plan_options<Algorithm>{algorithm, {}}, tag, root);
        s.value[signature::block] = block_bytes;
        return s;
    }
};

// What every data-movement collective offers once built: the call, over data as the
// collective's header lays it out (data.size() must equal count()), and what its plan tells.
template <communicator Comm, class Plan>
class movement_collective {
public:
    using plan_type = Plan;

    void operator()(std::span<std::byte> data) { plan_(*comm_, data); }

    std::size_t count() const noexcept { return plan_.plan().count(); }
    std::size_t block_bytes() const noexcept { return plan_.plan().block_bytes(); }
    const Plan& plan() const noexcept { return plan_.plan(); }
    // The identity every rank's collective shares, carried in its messages (core/tags.hpp).
    std::uint64_t identity() const noexcept { return plan_.identity(); }

protected:
    // (comm, agreed_movement's arguments after comm).
    template <class... Args>
    explicit movement_collective(Comm& comm, Args&&... args) : comm_(&comm), plan_(comm, std::forward<Args>(args)...)
    {
    }

private:
    Comm* comm_;
    agreed_movement<Comm, Plan> plan_;
};

} // namespace detail

} // namespace gradsync
