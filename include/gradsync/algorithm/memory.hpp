// Memory: where a plan's vector and scratch live, and how the policies' arithmetic runs
// there. Every plan takes it as its last template argument, so one plan serves host memory
// and any memory space (device/memory.hpp) with the same messages; Sum and Average get the
// same bits in every memory, Adasum those of the memory's triple order. A Memory M provides
//   M::span<T>                     what run() reduces (std::span<T> for host memory)
//   M::of(s), M::elements(s)       the memory s lives in, and its elements as a std::span
//   M::buffer<T>                   owning scratch: buffer<T>(n), .data(), .size()
//   M::host_buffer<T>              host memory M copies to fastest (the same interface)
//   M::combines<Policy>            whether its kernels combine Policy (the table's test)
//   M::synchronous                 true when a combine has finished once it returns; false
//                                  when it is queued and only synchronize() waits for it
//   m.combine<Policy>(acc, in)     Policy's acc = acc + in
//   m.finish<Policy>(x, ranks)     Policy's finish (Average: the factor 1/N)
//   m.canonicalize_nan(x)          every NaN becomes the default quiet NaN
//   m.synchronize()                returns when every queued combine and finish is done
//   m.view(e)                      the M::span<T> of elements e (a part of a span of M)
// and for Adasum (policy/adasum.hpp, algorithm/layer_triples.hpp)
//   M::triple_order                the summation order of its triples: triple_order_host
//                                  (kernels/host_adasum.hpp) or triple_order_thrust
//                                  (kernels/thrust.hpp); the agreement check compares it
//   M::triple_workspace(n)         partials add_triple needs for n elements
//   m.add_triple(a, b, sums, ws)   sums[0..2] += [a.b, a.a, b.b]; sums lies in M
//   m.scaled_add(out, ca, a, cb, b) out = fma(ca, a, cb*b), rounded once; out may be a or b
//   m.zero(x)                      x = +0
//   m.to_host(x, out)              copies x (in M) to host memory and waits for it
// host_memory is the default: the policies' own functions on ordinary memory, nothing
// queued, so its synchronize() is empty and inlines away.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <gradsync/kernels/host.hpp>
#include <gradsync/kernels/host_adasum.hpp>
#include <gradsync/policy/sum.hpp>

namespace gradsync {

inline constexpr std::uint32_t triple_order_host = 0;
inline constexpr std::uint32_t triple_order_thrust = 1;

struct host_memory {
    template <class T>
    using span = std::span<T>;
    template <class T>
    using buffer = std::vector<T>;
    template <class T>
    using host_buffer = std::vector<T>;
    template <class Policy>
    static constexpr bool combines = elementwise_policy<Policy>;
    static constexpr bool synchronous = true;
    static constexpr std::uint32_t triple_order = triple_order_host;
    static constexpr std::size_t triple_workspace(std::size_t) noexcept { return 0; }

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
    template <class T>
    std::span<T> view(std::span<T> e) const noexcept
    {
        return e;
    }

    template <class T>
    void add_triple(std::span<const T> a, std::span<const T> b, std::span<double> sums,
                    std::span<kernels::dot_triple>) const noexcept
    {
        const kernels::dot_triple t = kernels::triple<T>(a, b);
        sums[0] += t.ab;
        sums[1] += t.aa;
        sums[2] += t.bb;
    }
    template <class T>
    void scaled_add(std::span<T> out, double ca, std::span<const T> a, double cb, std::span<const T> b) const noexcept
    {
        kernels::scaled_add<T>(out, ca, a, cb, b);
    }
    void zero(std::span<double> x) const noexcept { std::fill(x.begin(), x.end(), 0.0); }
    void to_host(std::span<const double> x, std::span<double> out) const noexcept
    {
        std::copy(x.begin(), x.end(), out.begin());
    }
};

} // namespace gradsync
