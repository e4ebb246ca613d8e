// gloo_buffer_pool: gloo_communicator's unbound buffers for direct messages, kept for reuse
// by (address, size).
//
// Why: every unbound buffer costs a wait for Gloo's network thread when it is destroyed, so
// each (address, size) keeps its buffers for the communicator's life, one pending operation
// each; a reducer, whose buffers do not move, creates none after its first call. The pool
// holds at most `limit` buffers (gloo_options::pool_limit): above it the idle ones go.
#pragma once

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>

#include <gradsync/core/hash.hpp>

namespace gradsync::detail {

// One pooled unbound buffer over [address, address + size).
struct gloo_buffer {
    std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
    const std::byte* address = nullptr;
    std::size_t size = 0;
    bool busy = false;  // an operation is pending on it
    bool stale = false; // an operation was left pending: never reused
};

class gloo_buffer_pool {
public:
    explicit gloo_buffer_pool(std::size_t limit) : limit_(limit) {}

    // An idle buffer over exactly [p, p + n), or a new one; Gloo's exceptions pass through.
    gloo_buffer& acquire(gloo::Context& context, std::byte* p, std::size_t n)
    {
        const key k{p, n};
        auto [first, last] = buffers_.equal_range(k);
        for (auto it = first; it != last; ++it)
            if (!it->second->busy && !it->second->stale)
                return *it->second;
        if (buffers_.size() >= limit_)
            std::erase_if(buffers_, [](const auto& e) { return !e.second->busy && !e.second->stale; });
        auto b = std::make_unique<gloo_buffer>();
        b->buffer = context.createUnboundBuffer(p, n);
        b->address = p;
        b->size = n;
        return *buffers_.emplace(k, std::move(b))->second;
    }

    // Buffers held, busy or idle.
    std::size_t size() const noexcept { return buffers_.size(); }

private:
    struct key {
        const std::byte* address;
        std::size_t size;
        bool operator==(const key&) const = default;
    };
    struct key_hash {
        std::size_t operator()(const key& k) const noexcept
        {
            return std::size_t(mix_in(mix(reinterpret_cast<std::uintptr_t>(k.address)), k.size));
        }
    };

    std::size_t limit_;
    std::unordered_multimap<key, std::unique_ptr<gloo_buffer>, key_hash> buffers_;
};

} // namespace gradsync::detail
