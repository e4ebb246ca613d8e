// Memory: where a plan's vector and scratch live, and how the policies' arithmetic runs
// there. Every plan takes it as its last template argument, so one plan serves host memory
// and any memory space (memory/space_memory.hpp) with the same messages; Sum and Average get the
// same bits in every memory, Adasum those of the memory's triple order. A Memory M provides
//   M::span<T>                     what run() reduces (std::span<T> for host memory)
//   M::of(s), M::elements(s)       the memory s lives in, and its elements as a std::span
//   M::buffer<T>                   owning scratch: buffer<T>(n), .data(), .size()
//   M::host_buffer<T>              host memory M copies to fastest (the same interface)
//   M::combines<Policy, T>         whether its kernels combine Policy for elements T (the
//                                  table's test)
//   M::synchronous                 true when a combine has finished once it returns; false
//                                  when it is queued and only synchronize() waits for it
//   m.combine<Policy>(acc, in)     Policy's acc = acc + in
//   m.finish<Policy>(x, ranks)     Policy's finish (Average: the factor 1/N)
//   m.canonicalize_nan(x)          every NaN becomes the default quiet NaN
//   m.synchronize()                returns when every queued combine and finish is done
//   m.view(e)                      the M::span<T> of elements e (a part of a span of M)
// and for Adasum (policy/adasum.hpp, plan/layer_triples.hpp), over a step's part table
// (kernels/adasum_part.hpp) planned once, so a step costs the same number of kernels
// whatever the number of layers:
//   M::triple_order                the summation order of its triples: triple_order_host
//                                  (kernels/host_adasum.hpp) or triple_order_thrust
//                                  (kernels/thrust_adasum.hpp); the agreement check compares it
//   M::part_table(parts)           the parts, where M's kernels read them; .size() parts,
//                                  .workspace() partials add_triples needs
//   m.add_triples(t, first, last, x, sums, ws)
//                                  sums[3l..3l+2] += [a.b, a.a, b.b] of each part of t in
//                                  [first, last), in part order (l its layer); sums lies in M
//   m.scaled_add_parts(t, first, last, x, sums)
//                                  each part's out = fma(ca, a, cb*b), rounded once, with the
//                                  coefficients of its layer's sums
//   m.zero(x)                      x = +0
// host_memory is the default: the policies' own functions on ordinary memory, nothing
// queued, so its synchronize() is empty and inlines away.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include <gradsync/kernels/adasum_part.hpp>
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
    template <class Policy, class T>
    static constexpr bool combines = elementwise_policy<Policy>;
    static constexpr bool synchronous = true;
    static constexpr std::uint32_t triple_order = triple_order_host;

    struct part_table {
        std::vector<kernels::adasum_part> parts;

        part_table() = default;
        explicit part_table(std::vector<kernels::adasum_part> p) : parts(std::move(p)) {}
        std::size_t size() const noexcept { return parts.size(); }
        static constexpr std::size_t workspace() noexcept { return 0; }
    };

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
    void add_triples(const part_table& t, std::size_t first, std::size_t last, kernels::adasum_operands<const T> x,
                     std::span<double> sums, std::span<kernels::dot_triple>) const noexcept
    {
        for (std::size_t p = first; p < last; ++p) {
            const kernels::adasum_part& q = t.parts[p];
            const kernels::dot_triple d = kernels::triple<T>(std::span<const T>(x.base(q.a_in) + q.a, q.size),
                                                             std::span<const T>(x.base(q.b_in) + q.b, q.size));
            double* s = sums.data() + 3 * q.layer;
            s[0] += d.ab;
            s[1] += d.aa;
            s[2] += d.bb;
        }
    }
    template <class T>
    void scaled_add_parts(const part_table& t, std::size_t first, std::size_t last, kernels::adasum_operands<T> x,
                          std::span<const double> sums) const noexcept
    {
        for (std::size_t p = first; p < last; ++p) {
            const kernels::adasum_part& q = t.parts[p];
            const double* s = sums.data() + 3 * q.layer;
            const kernels::coefficient_pair c = kernels::adasum_coefficients({s[0], s[1], s[2]});
            kernels::scaled_add<T>(std::span<T>(x.base(q.out_in) + q.out, q.size), c.a,
                                   std::span<const T>(x.base(q.a_in) + q.a, q.size), c.b,
                                   std::span<const T>(x.base(q.b_in) + q.b, q.size));
        }
    }
    void zero(std::span<double> x) const noexcept { std::fill(x.begin(), x.end(), 0.0); }
};

} // namespace gradsync
