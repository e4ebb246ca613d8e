// Sum and Average: elementwise reduction policies.
//
// combine(acc, in): acc[i] = round(acc[i] + in[i]), computed in the accumulate type
// (fp16 adds in float and rounds to fp16 after every combine step; integers wrap modulo
// 2^bits).
// finish(x, n): Sum leaves x alone; Average multiplies by f = A(1) / A(n), A the accumulate
// type, rounded once to the element type. Both are commutative per element, which is what
// makes every algorithm's result bitwise identical on all ranks. Average takes no integer
// elements: their mean would have to be rounded, so torch.distributed's Gloo refuses it too.
#pragma once

#include <concepts>
#include <cstdint>
#include <span>

#include <gradsync/core/codes.hpp>
#include <gradsync/core/types.hpp>
#include <gradsync/kernels/host.hpp>
#include <gradsync/policy/combine_with.hpp>

namespace gradsync {

struct sum : detail::combine_with<kernels::sum_of> {
    static constexpr std::uint32_t code = codes::sum;
    static constexpr const char* name = "sum";
};

// Average combines as Sum does and differs only in finish.
struct average : sum {
    static constexpr std::uint32_t code = codes::average;
    static constexpr const char* name = "average";

    template <element T>
    static void finish(std::span<T> x, int ranks) noexcept
    {
        static_assert(!std::integral<T>, "gradsync::average reduces floating-point elements only: the mean of "
                                         "integers would have to be rounded (torch.distributed's Gloo refuses AVG on "
                                         "them too); reduce them with gradsync::sum and divide");
        using A = accumulate_t<T>;
        if (ranks > 1)
            kernels::scale(x, A(1) / A(ranks));
    }
};

// What an elementwise policy provides to the plans, shown for float: the concept asks for
// the declarations, which a policy has for every element type; a policy that refuses some
// types says so in a static_assert where the plans use it (average, the bitwise policies).
template <class P>
concept elementwise_policy = requires(std::span<float> acc, std::span<const float> in, int n) {
    { P::code } -> std::convertible_to<std::uint32_t>;
    { P::name } -> std::convertible_to<const char*>;
    P::template combine<float>(acc, in);
    P::template finish<float>(acc, n);
};

} // namespace gradsync
