// Adasum's kernels through Thrust (the elementwise ones are in kernels/thrust.hpp), on a CUDA
// stream under nvcc and on Thrust's CPU systems:
//
//   triple(exec, a, b, result, ws)        *result = [a.b, a.a, b.b] of one pair
//   scaled_add(exec, out, ca, a, cb, b)   out[i] = fma(ca, a[i], cb*b[i]), formed in double and
//                                         rounded once, as kernels/host_adasum.hpp's; out may
//                                         be a or b; operands of equal sizes (else usage_error)
//   part_lanes(parts)                     the lanes of a part table's levels, planned once on
//                                         the host (kernels/adasum_part.hpp: the parts)
//   add_part_triples(exec, t, first, last, x, sums, low, high)
//                                         sums[3 l .. 3 l + 2] += the triple of each part
//                                         p in [first, last) of layer l, in part order
//   scaled_add_parts(exec, t, first, last, x, sums)
//                                         each part's out = A(a, b) with the coefficients
//                                         of its layer's sums (adasum_coefficients)
//
// The triple's summation order is fixed by n alone, never by the back end, the thread count
// or addresses, and there are no atomics, so it is bitwise reproducible everywhere (a GPU and
// a CPU give the same bits). Level 1 has m = max(1, ceil(n / 256)) lanes; lane j starts at
// +0 and accumulates x*x, x*y and y*y with fma in double over elements i = j, j+m, j+2m, ...
// (< n) in increasing order. Each further level reduces the L partials of the level before
// with m' = ceil(L / 64) lanes the same way (lane j adds partials j, j+m', ... to +0 in
// order) until one remains. Strided lanes let neighbouring GPU threads read neighbouring
// elements. It differs from the host kernels' order, so the two agree to rounding error, not
// bit for bit. ws holds the partials: triple_workspace(n) of them.
//
// A part table's triples take every part through that tree at once: level t is one launch
// over the lanes of every part in [first, last), and the top is one launch with a lane per
// layer that adds its parts' triples to the sums in part order. So D launches, D the depth
// of the tree for the elements of all those parts together (1 up to 256 elements, then
// one more per factor 256, 64, 64, ...), whatever the parts: a part whose own tree is
// shallower passes its one partial up unchanged (a lane adds it to +0; a triple's
// components are never -0, so that is exact), and every part's triple has the bits
// triple() gives it alone. The scaled add is one launch over all the parts' elements (256
// lanes per tile of 4096 elements, neighbouring lanes on neighbouring elements), each lane
// forming its layers' coefficients from the sums, with no copy to the host.
//
// Preconditions: the parts, the table's arrays and both operand bases lie in memory exec's
// kernels reach; each layer's parts are consecutive in the table; no element is written by
// two parts. Cost: one pass over the parts' elements for the triples (memory-bound) and
// about log64(n/256) small passes over partials; one pass for the scaled add.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/transform.h>

#include <gradsync/core/error.hpp>
#include <gradsync/core/types.hpp>
#include <gradsync/kernels/adasum_part.hpp>
#include <gradsync/kernels/host_adasum.hpp>
#include <gradsync/kernels/host_device.hpp>
#include <gradsync/kernels/thrust.hpp>

namespace gradsync::kernels {

inline constexpr std::size_t triple_first_fanout = 256; // elements per level-1 lane
inline constexpr std::size_t triple_fanout = 64;        // partials per lane above level 1

namespace thrust_detail {

template <class K>
struct scaled_add_op {
    double ca, cb;
    GRADSYNC_HD K operator()(K a, K b) const
    {
        return ops<K>::from_double(fma_d(ca, double(ops<K>::widen(a)), mul_d(cb, double(ops<K>::widen(b)))));
    }
};

// Visits i = j, j + lanes, ... (< n) in increasing order, loading B of them before using
// them: a GPU thread needs several loads in flight to keep memory busy. The batch sizes
// below are the fastest found (docs/results.md, "Kernel notes").
template <std::size_t B, class Load, class Use>
GRADSYNC_HD void strided_in_batches(std::size_t j, std::size_t n, std::size_t lanes, Load load, Use use)
{
    using V = decltype(load(j));
    std::size_t i = j;
    for (; i + (B - 1) * lanes < n; i += B * lanes) {
        V v[B];
        GRADSYNC_UNROLL
        for (std::size_t u = 0; u < B; ++u)
            v[u] = load(i + u * lanes);
        GRADSYNC_UNROLL
        for (std::size_t u = 0; u < B; ++u)
            use(v[u]);
    }
    for (; i < n; i += lanes)
        use(load(i));
}

template <class K>
struct element_pair {
    K x, y;
};

// Level 1 of the triple: lane j over elements j, j + lanes, ...
template <class K>
struct triple_lane {
    static constexpr std::size_t batch = sizeof(K) == 4 ? 16 : 8;
    const K* a;
    const K* b;
    std::size_t n;
    std::size_t lanes;
    GRADSYNC_HD dot_triple operator()(std::size_t j) const
    {
        double ab = 0, aa = 0, bb = 0;
        strided_in_batches<batch>(
            j, n, lanes, [this](std::size_t i) { return element_pair<K>{a[i], b[i]}; },
            [&](element_pair<K> e) {
                const double x = double(ops<K>::widen(e.x)), y = double(ops<K>::widen(e.y));
                ab = fma_d(x, y, ab);
                aa = fma_d(x, x, aa);
                bb = fma_d(y, y, bb);
            });
        return dot_triple{ab, aa, bb};
    }
};

// Levels above: lane j over partials j, j + lanes, ...
struct partial_lane {
    static constexpr std::size_t batch = 16;
    const dot_triple* p;
    std::size_t n;
    std::size_t lanes;
    GRADSYNC_HD dot_triple operator()(std::size_t j) const
    {
        double ab = 0, aa = 0, bb = 0;
        strided_in_batches<batch>(
            j, n, lanes, [this](std::size_t i) { return p[i]; },
            [&](const dot_triple& t) {
                ab = ab + t.ab;
                aa = aa + t.aa;
                bb = bb + t.bb;
            });
        return dot_triple{ab, aa, bb};
    }
};

constexpr std::size_t lanes_of(std::size_t n, std::size_t fanout) noexcept
{
    return n <= fanout ? 1 : (n + fanout - 1) / fanout;
}
// Levels of the triple's tree for n elements, the top included.
constexpr std::size_t triple_depth(std::size_t n) noexcept
{
    std::size_t d = 1;
    for (std::size_t m = lanes_of(n, triple_first_fanout); m > 1; m = lanes_of(m, triple_fanout))
        ++d;
    return d;
}

// The largest p in [first, last) with starts[p] <= g (starts increasing, starts[first] <= g).
GRADSYNC_HD inline std::size_t part_at(const std::uint64_t* starts, std::size_t first, std::size_t last,
                                       std::uint64_t g)
{
    while (last - first > 1) {
        const std::size_t mid = first + (last - first) / 2;
        if (starts[mid] <= g)
            first = mid;
        else
            last = mid;
    }
    return first;
}

// What a level of every part's tree reads: level 1 the parts' elements, the levels above
// the parts' partials of the level below (`below` that level's lane starts, null at level 1).
template <class K>
struct part_level_input {
    const adasum_part* parts;
    const std::uint64_t* below;
    const dot_triple* in; // the level below's partials
    adasum_operands<const K> x;

    // Lane j of `lanes` over part p.
    GRADSYNC_HD dot_triple lane(std::size_t p, std::uint64_t lanes, std::uint64_t j) const
    {
        if (!below) {
            const adasum_part& q = parts[p];
            return triple_lane<K>{x.base(q.a_in) + q.a, x.base(q.b_in) + q.b, q.size, lanes}(j);
        }
        return partial_lane{in + below[p], below[p + 1] - below[p], lanes}(j);
    }
};

// One lane of a level below the top, over every part in [first, last).
template <class K>
struct part_level_lane {
    part_level_input<K> input;
    const std::uint64_t* starts; // this level's
    std::size_t first, last;

    GRADSYNC_HD dot_triple operator()(std::uint64_t g) const
    {
        const std::size_t p = part_at(starts, first, last, g);
        return input.lane(p, starts[p + 1] - starts[p], g - starts[p]);
    }
};

// The top: a lane per layer adds the triple of each of its parts in [first, last), in order.
template <class K>
struct part_top_lane {
    part_level_input<K> input;
    const std::uint64_t* groups; // a layer's parts: [groups[i], groups[i + 1])
    std::size_t first, last;
    double* sums;

    GRADSYNC_HD void operator()(std::uint64_t i) const
    {
        const std::uint64_t begin = groups[i] > first ? groups[i] : first;
        const std::uint64_t end = groups[i + 1] < last ? groups[i + 1] : last;
        for (std::uint64_t p = begin; p < end; ++p) {
            const dot_triple t = input.lane(p, 1, 0);
            double* s = sums + 3 * input.parts[p].layer;
            s[0] = s[0] + t.ab;
            s[1] = s[1] + t.aa;
            s[2] = s[2] + t.bb;
        }
    }
};

inline constexpr std::uint64_t tile_lanes = 256;
inline constexpr std::uint64_t lane_elements = 16;

// The scaled add: lane g of tile g / 256 visits the tile's elements g % 256, + 256, ...
// (positions in the parts laid end to end, `flat` their starts).
template <class K>
struct part_scaled_add_lane {
    const adasum_part* parts;
    const std::uint64_t* flat;
    adasum_operands<K> x;
    const double* sums;
    std::size_t first, last;

    GRADSYNC_HD void operator()(std::uint64_t g) const
    {
        const std::uint64_t end = flat[last];
        std::uint64_t e = flat[first] + (g / tile_lanes) * tile_lanes * lane_elements + g % tile_lanes;
        if (e >= end)
            return;
        std::size_t p = part_at(flat, first, last, e);
        for (std::uint64_t k = 0; k < lane_elements && e < end; ++k, e += tile_lanes) {
            while (flat[p + 1] <= e)
                ++p;
            const adasum_part& q = parts[p];
            const double* t = sums + 3 * q.layer;
            const coefficient_pair c = adasum_coefficients(dot_triple{t[0], t[1], t[2]});
            const std::uint64_t i = e - flat[p];
            x.base(q.out_in)[q.out + i] =
                scaled_add_op<K>{c.a, c.b}(x.base(q.a_in)[q.a + i], x.base(q.b_in)[q.b + i]);
        }
    }
};

} // namespace thrust_detail

template <class Exec, element T>
void scaled_add(const Exec& exec, std::span<T> out, double ca, std::span<const T> a, double cb, std::span<const T> b)
{
    thrust_detail::check_sizes("scaled_add", out.size(), a.size());
    thrust_detail::check_sizes("scaled_add", out.size(), b.size());
    using K = thrust_detail::kernel_t<T>;
    const K* x = thrust_detail::kernel_data(a);
    thrust::transform(exec, x, x + a.size(), thrust_detail::kernel_data(b), thrust_detail::kernel_data(out),
                      thrust_detail::scaled_add_op<K>{ca, cb});
}

// Partials triple() needs for n elements: the two largest levels below the top.
constexpr std::size_t triple_workspace(std::size_t n) noexcept
{
    const std::size_t first = thrust_detail::lanes_of(n, triple_first_fanout);
    if (first == 1)
        return 0;
    const std::size_t second = thrust_detail::lanes_of(first, triple_fanout);
    return first + (second == 1 ? 0 : second);
}

// The lanes of a part table, planned on the host (and copied where the kernels run):
//   starts  level t = 1 .. levels at [(t - 1) (P + 1), t (P + 1)): where each part's lanes
//           begin among the level's partials (every part has at least one lane per level)
//   flat    P + 1 starts of the parts laid end to end
//   groups  starts of the runs of parts of one layer, and group_of: each part's run
//   low, high  partials of the odd and the even levels
struct part_lanes {
    std::size_t parts = 0;
    std::size_t levels = 0; // levels below the top, for the whole table
    std::vector<std::uint64_t> starts, flat, groups, group_of;
    std::size_t low = 0, high = 0;

    part_lanes() = default;
    explicit part_lanes(std::span<const adasum_part> table)
        : parts(table.size()), flat(table.size() + 1), group_of(table.size())
    {
        for (std::size_t p = 0; p < parts; ++p) {
            flat[p + 1] = flat[p] + table[p].size;
            if (p == 0 || table[p].layer != table[p - 1].layer)
                groups.push_back(p);
            group_of[p] = groups.size() - 1;
        }
        groups.push_back(parts);
        levels = thrust_detail::triple_depth(flat[parts]) - 1;
        starts.assign(levels * (parts + 1), 0);
        for (std::size_t p = 0; p < parts; ++p) {
            std::uint64_t m = thrust_detail::lanes_of(table[p].size, triple_first_fanout);
            for (std::size_t t = 0; t < levels; ++t, m = thrust_detail::lanes_of(m, triple_fanout))
                starts[t * (parts + 1) + p + 1] = starts[t * (parts + 1) + p] + m;
        }
        low = levels > 0 ? starts[parts] : 0;
        high = levels > 1 ? starts[2 * (parts + 1) - 1] : 0;
    }

    // Levels below the top for parts [first, last).
    std::size_t depth_below(std::size_t first, std::size_t last) const noexcept
    {
        return thrust_detail::triple_depth(flat[last] - flat[first]) - 1;
    }
};

// Where a table's arrays lie for the kernels (a copy of part_lanes' in exec's memory).
struct part_arrays {
    const adasum_part* parts;
    const std::uint64_t* starts;
    const std::uint64_t* flat;
    const std::uint64_t* groups;
};

template <class Exec, element T>
void triple(const Exec& exec, std::span<const T> a, std::span<const T> b, dot_triple* result,
            std::span<dot_triple> workspace)
{
    using namespace thrust_detail;
    check_sizes("triple", a.size(), b.size());
    const std::size_t n = a.size();
    if (workspace.size() < triple_workspace(n))
        throw usage_error("gradsync::kernels::triple (Thrust): " + std::to_string(n) +
                          " elements need a workspace of " + std::to_string(triple_workspace(n)) + " partials, got " +
                          std::to_string(workspace.size()));
    using count = thrust::counting_iterator<std::size_t>;
    const triple_lane<kernel_t<T>> first{kernel_data(a), kernel_data(b), n, lanes_of(n, triple_first_fanout)};
    if (first.lanes == 1) {
        thrust::transform(exec, count(0), count(1), result, first);
        return;
    }
    std::size_t lanes = first.lanes;
    dot_triple* const low = workspace.data();
    dot_triple* const high = low + lanes;
    thrust::transform(exec, count(0), count(lanes), low, first);
    const dot_triple* in = low;
    for (;;) {
        const partial_lane next{in, lanes, lanes_of(lanes, triple_fanout)};
        if (next.lanes == 1) {
            thrust::transform(exec, count(0), count(1), result, next);
            return;
        }
        dot_triple* const out = in == low ? high : low;
        thrust::transform(exec, count(0), count(next.lanes), out, next);
        in = out;
        lanes = next.lanes;
    }
}

// low and high: lanes.low and lanes.high partials.
template <class Exec, element T>
void add_part_triples(const Exec& exec, const part_lanes& lanes, const part_arrays& a, std::size_t first,
                      std::size_t last, adasum_operands<const T> x, double* sums, dot_triple* low, dot_triple* high)
{
    using namespace thrust_detail;
    if (first >= last)
        return;
    using K = kernel_t<T>;
    const adasum_operands<const K> k{reinterpret_cast<const K*>(x.data), reinterpret_cast<const K*>(x.scratch)};
    using count = thrust::counting_iterator<std::uint64_t>;
    const std::size_t depth = lanes.depth_below(first, last), stride = lanes.parts + 1;
    const std::uint64_t* below = nullptr;
    const dot_triple* in = nullptr;
    for (std::size_t t = 0; t < depth; ++t) {
        const std::uint64_t* starts = a.starts + t * stride;
        const std::uint64_t* host = lanes.starts.data() + t * stride;
        dot_triple* const out = t % 2 == 0 ? low : high;
        thrust::transform(exec, count(host[first]), count(host[last]), out + host[first],
                          part_level_lane<K>{{a.parts, below, in, k}, starts, first, last});
        below = starts;
        in = out;
    }
    thrust::for_each(exec, count(lanes.group_of[first]), count(lanes.group_of[last - 1] + 1),
                     part_top_lane<K>{{a.parts, below, in, k}, a.groups, first, last, sums});
}

template <class Exec, element T>
void scaled_add_parts(const Exec& exec, const part_lanes& lanes, const part_arrays& a, std::size_t first,
                      std::size_t last, adasum_operands<T> x, const double* sums)
{
    using namespace thrust_detail;
    if (first >= last)
        return;
    using K = kernel_t<T>;
    const adasum_operands<K> k{reinterpret_cast<K*>(x.data), reinterpret_cast<K*>(x.scratch)};
    const std::uint64_t n = lanes.flat[last] - lanes.flat[first], tile = tile_lanes * lane_elements;
    using count = thrust::counting_iterator<std::uint64_t>;
    thrust::for_each(exec, count(0), count((n + tile - 1) / tile * tile_lanes),
                     part_scaled_add_lane<K>{a.parts, a.flat, k, sums, first, last});
}

} // namespace gradsync::kernels
