// layer_triples<Memory>: an Adasum step's per-layer dot-product triples [a.b, a.a, b.b],
// three doubles per layer, kept in the plan's memory (memory/host_memory.hpp) so that the
// group's triple exchange sends them from there (a transport that moves only device memory
// can), and the scaled add that applies them. A step's work is described by its part table
// (kernels/adasum_part.hpp: the stretches of layers it combines, with their operands), made
// once when the plan is built; the triples and the scaled add run over a range of its parts
// at once, so the number of kernels does not depend on the number of layers, and the
// coefficients are formed where the data is, with nothing copied to the host.
//
//   clear()                      every layer's triple becomes +0
//   add(t, first, last, x)       parts [first, last) of table t add their triples to their
//                                layers', in part order
//   sums()                       the triples, in the memory (what the group exchanges)
//   apply(t, first, last, x)     each of those parts' out = A(a, b) with its layer's sums
//
// Scratch: the sums (3 doubles per layer) and the partials of the largest table's triples
// (part_table::workspace(); none in host memory).
#pragma once

#include <cstddef>
#include <span>

#include <gradsync/kernels/adasum_part.hpp>
#include <gradsync/memory/host_memory.hpp>

namespace gradsync {

template <class Memory>
class layer_triples {
public:
    using table = typename Memory::part_table;

    layer_triples() = default;
    // `layers` layers; `workspace` the largest part_table::workspace() of the tables used.
    layer_triples(std::size_t layers, std::size_t workspace) : sums_(3 * layers), workspace_(workspace) {}

    std::size_t bytes() const noexcept
    {
        return sums_.size() * sizeof(double) + workspace_.size() * sizeof(kernels::dot_triple);
    }

    void clear(const Memory& m) { m.zero(sums()); }

    template <class T>
    void add(const Memory& m, const table& t, std::size_t first, std::size_t last, kernels::adasum_operands<T> x)
    {
        m.template add_triples<T>(t, first, last, kernels::adasum_operands<const T>{x.data, x.scratch}, sums(),
                                  std::span<kernels::dot_triple>(workspace_.data(), workspace_.size()));
    }

    template <class T>
    void apply(const Memory& m, const table& t, std::size_t first, std::size_t last, kernels::adasum_operands<T> x)
    {
        m.template scaled_add_parts<T>(t, first, last, x, std::span<const double>(sums()));
    }

    std::span<double> sums() noexcept { return {sums_.data(), sums_.size()}; }

private:
    typename Memory::template buffer<double> sums_;
    typename Memory::template buffer<kernels::dot_triple> workspace_;
};

} // namespace gradsync
