// Sum and Average in a memory space (core/space.hpp): the combine and finish of
// policy/sum.hpp, through the Thrust kernels (kernels/thrust.hpp), so the results are the
// host policies' bits. Adasum is not elementwise: its plans form triples and scaled adds
// through the memory (memory/space_memory.hpp, plan/layer_triples.hpp).
#pragma once

#include <concepts>
#include <span>

#include <gradsync/core/types.hpp>
#include <gradsync/kernels/thrust.hpp>
#include <gradsync/policy/sum.hpp>

namespace gradsync {

template <class P>
concept device_elementwise = std::same_as<P, sum> || std::same_as<P, average>;

// acc = acc + in, queued in the space.
template <device_elementwise Policy, element T, class Space>
void device_combine(const Space& space, std::span<T> acc, std::span<const T> in)
{
    kernels::add(space.execution(), acc, in);
}

// Average's factor 1/N in the accumulate type, as average::finish; Sum does nothing.
template <device_elementwise Policy, element T, class Space>
void device_finish(const Space& space, std::span<T> x, int ranks)
{
    using A = accumulate_t<T>;
    if constexpr (std::same_as<Policy, average>)
        if (ranks > 1)
            kernels::scale(space.execution(), x, A(1) / A(ranks));
}

} // namespace gradsync
