// Sum and Average: elementwise reduction policies.
//
// combine(acc, in): acc[i] = round(acc[i] + in[i]), computed in the accumulate type
// (fp16 adds in float and rounds to fp16 after every combine step).
// finish(x, n): Sum leaves x alone; Average multiplies by f = A(1) / A(n), A the accumulate
// type, rounded once to the element type. Both are commutative per element, which is what
// makes every algorithm's result bitwise identical on all ranks.
#pragma once

#include <concepts>
#include <cstdint>
#include <span>

#include <gradsync/core/codes.hpp>
#include <gradsync/core/types.hpp>
#include <gradsync/kernels/host.hpp>

namespace gradsync {

struct sum {
    static constexpr std::uint32_t code = codes::sum;
    static constexpr const char* name = "sum";

    template <element T>
    static void combine(std::span<T> acc, std::span<const T> in) noexcept
    {
        kernels::add(acc, in);
    }

    template <element T>
    static void finish(std::span<T>, int) noexcept
    {
    }
};

// Average combines as Sum does and differs only in finish.
struct average : sum {
    static constexpr std::uint32_t code = codes::average;
    static constexpr const char* name = "average";

    template <element T>
    static void finish(std::span<T> x, int ranks) noexcept
    {
        using A = accumulate_t<T>;
        if (ranks > 1)
            kernels::scale(x, A(1) / A(ranks));
    }
};

// What an elementwise policy provides to the plans (shown for float; a policy serves every
// element type).
template <class P>
concept elementwise_policy = requires(std::span<float> acc, std::span<const float> in, int n) {
    { P::code } -> std::convertible_to<std::uint32_t>;
    { P::name } -> std::convertible_to<const char*>;
    P::template combine<float>(acc, in);
    P::template finish<float>(acc, n);
};

} // namespace gradsync
