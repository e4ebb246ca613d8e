// Memory: where an elementwise plan's vector and scratch live, and how Sum and Average
// combine and finish there. The ring, recursive_halving, recursive_doubling and automatic
// plans take it as their last template argument, so one plan serves host memory and any
// memory space (device/memory.hpp) with the same messages and the same bits. A Memory M
// provides
//   M::span<T>                     what run() reduces (std::span<T> for host memory)
//   M::of(s), M::elements(s)       the memory s lives in, and its elements as a std::span
//   M::buffer<T>                   owning scratch: buffer<T>(n), .data(), .size()
//   M::combines<Policy>            whether its kernels combine Policy (the table's test)
//   M::synchronous                 true when a combine has finished once it returns; false
//                                  when it is queued and only synchronize() waits for it
//   m.combine<Policy>(acc, in)     Policy's acc = acc + in
//   m.finish<Policy>(x, ranks)     Policy's finish (Average: the factor 1/N)
//   m.canonicalize_nan(x)          every NaN becomes the default quiet NaN
//   m.synchronize()                returns when every queued combine and finish is done
// host_memory is the default: the policies' own functions on ordinary memory, nothing
// queued, so its synchronize() is empty and inlines away.
#pragma once

#include <span>
#include <vector>

#include <gradsync/kernels/host.hpp>
#include <gradsync/policy/sum.hpp>

namespace gradsync {

struct host_memory {
    template <class T>
    using span = std::span<T>;
    template <class T>
    using buffer = std::vector<T>;
    template <class Policy>
    static constexpr bool combines = elementwise_policy<Policy>;
    static constexpr bool synchronous = true;

    template <class T>
    static host_memory of(std::span<T>) noexcept
    {
        return {};
    }
    template <class T>
    static std::span<T> elements(std::span<T> s) noexcept
    {
        return s;
    }

    template <class Policy, class T>
    void combine(std::span<T> acc, std::span<const T> in) const
    {
        Policy::template combine<T>(acc, in);
    }
    template <class Policy, class T>
    void finish(std::span<T> x, int ranks) const
    {
        Policy::template finish<T>(x, ranks);
    }
    template <class T>
    void canonicalize_nan(std::span<T> x) const noexcept
    {
        kernels::canonicalize_nan(x);
    }
    void synchronize() const noexcept {}
};

} // namespace gradsync
