// The layer layout of a fused gradient buffer: element counts of consecutive layers, their
// offsets, and a fingerprint that ranks compare to agree on the layout without sending it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include <gradsync/core/hash.hpp>

namespace gradsync {

class layer_layout {
public:
    layer_layout() = default;

    // sizes: element counts in buffer order. Empty sizes mean one layer of `count` elements.
    // Sizes whose sum overflows saturate total() at SIZE_MAX: the reducer reports that on
    // every rank (throwing here would leave the other ranks waiting).
    layer_layout(std::size_t count, std::span<const std::size_t> sizes)
    {
        if (sizes.empty()) {
            sizes_.assign(1, count);
        } else {
            sizes_.assign(sizes.begin(), sizes.end());
        }
        offsets_.reserve(sizes_.size() + 1);
        offsets_.push_back(0);
        constexpr std::size_t most = std::numeric_limits<std::size_t>::max();
        for (std::size_t size : sizes_)
            offsets_.push_back(size > most - offsets_.back() ? most : offsets_.back() + size);
    }

    std::size_t layers() const noexcept { return sizes_.size(); }
    std::size_t total() const noexcept { return offsets_.empty() ? 0 : offsets_.back(); }
    std::size_t size(std::size_t layer) const noexcept { return sizes_[layer]; }
    std::size_t offset(std::size_t layer) const noexcept { return offsets_[layer]; }
    std::span<const std::size_t> sizes() const noexcept { return sizes_; }

    // Calls f(layer, begin, end) for every layer that meets positions [lo, hi), in layer
    // order, with [begin, end) the (non-empty) intersection.
    template <class F>
    void for_each_part(std::size_t lo, std::size_t hi, F f) const
    {
        std::size_t l = std::size_t(std::upper_bound(offsets_.begin(), offsets_.end(), lo) - offsets_.begin());
        for (l = l ? l - 1 : 0; l < layers() && offset(l) < hi; ++l) {
            const std::size_t begin = std::max(offset(l), lo), end = std::min(offset(l) + size(l), hi);
            if (begin < end)
                f(l, begin, end);
        }
    }

    // Equal layouts give equal fingerprints on every rank.
    std::uint64_t fingerprint() const noexcept
    {
        std::uint64_t h = detail::mix(sizes_.size());
        for (std::size_t s : sizes_)
            h = detail::mix_in(h, s);
        return h;
    }

private:
    std::vector<std::size_t> sizes_;
    std::vector<std::size_t> offsets_;
};

} // namespace gradsync
