// layer_triples<Memory>: an Adasum step's per-layer dot-product triples [a.b, a.a, b.b],
// three doubles per layer, kept in the plan's memory (algorithm/memory.hpp) so that the
// group's triple exchange sends them from there (a transport that moves only device memory
// can), with a host copy from which the coefficients are formed. Only these 24 bytes per
// layer cross to the host; the data stays in its memory.
//
//   clear()                      every layer's triple becomes +0
//   add(l, a, b)                 layer l's triple += that of (a, b), queued in the memory
//   sums()                       the triples, in the memory (what the group exchanges)
//   fetch(), fetch(l)            waits for the memory and copies the sums (of layer l) to
//                                the host
//   coefficients(l)              adasum::from of layer l's fetched triple
//
// Cost: one add_triple kernel per (a, b) and, per step, one small copy to the host.
// Scratch: the sums and their host copy (3 doubles per layer each), and the partials of
// add_triple for `widest` elements (Memory::triple_workspace; none in host memory).
#pragma once

#include <cstddef>
#include <span>

#include <gradsync/algorithm/memory.hpp>
#include <gradsync/policy/adasum.hpp>

namespace gradsync {

template <class Memory>
class layer_triples {
public:
    layer_triples() = default;
    // `layers` layers, none of whose (a, b) has more than `widest` elements.
    layer_triples(std::size_t layers, std::size_t widest)
        : sums_(3 * layers), workspace_(Memory::triple_workspace(widest)), host_(3 * layers)
    {
    }

    std::size_t bytes() const noexcept
    {
        return (sums_.size() + host_.size()) * sizeof(double) +
               workspace_.size() * sizeof(kernels::dot_triple);
    }

    void clear(const Memory& m) { m.zero(sums()); }

    template <class T>
    void add(const Memory& m, std::size_t l, std::span<const T> a, std::span<const T> b)
    {
        m.template add_triple<T>(a, b, sums().subspan(3 * l, 3),
                                 std::span<kernels::dot_triple>(workspace_.data(), workspace_.size()));
    }

    std::span<double> sums() noexcept { return {sums_.data(), sums_.size()}; }

    void fetch(const Memory& m) { m.to_host(std::span<const double>(sums()), host()); }
    void fetch(const Memory& m, std::size_t l)
    {
        m.to_host(std::span<const double>(sums().subspan(3 * l, 3)), host().subspan(3 * l, 3));
    }

    adasum::coefficients coefficients(std::size_t l) const noexcept
    {
        const double* t = host_.data() + 3 * l;
        return adasum::from({t[0], t[1], t[2]});
    }

private:
    std::span<double> host() noexcept { return {host_.data(), host_.size()}; }

    typename Memory::template buffer<double> sums_;
    typename Memory::template buffer<kernels::dot_triple> workspace_;
    typename Memory::template host_buffer<double> host_; // pinned for a GPU: the copy does not stage
};

} // namespace gradsync
