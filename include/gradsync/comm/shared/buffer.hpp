// shared_buffer: memory for data that ranks of one host reduce in place. Every rank gets a slot
// in one shared region (region.hpp), all slots the same size. A shared-memory plan built on the
// buffer (reducer_options::shared) reads a peer's data where it lies in the peer's slot, at the
// offset the peer's data has this call, and writes finished blocks there, so nothing is copied
// in or out: a gradient buffer kept here (data_parallel's) costs what the plan's own buffer()
// costs, and any number of reducers share it, each on its own stretch.
//
// Making it is collective: every rank of comm, with the same byte count. Where the ranks cannot
// share memory (another host, a communicator whose messages stand for a link), each rank's slot
// is memory of its own (shared() is false, why() says why), so a trainer uses one code path on
// one host and across hosts. The memory starts zeroed, each slot on a page boundary. It lives
// until the buffer is destroyed; as a region, the kernel frees it when its last rank exits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <string>

#include <gradsync/comm/communicator.hpp>
#include <gradsync/comm/shared/region.hpp>
#include <gradsync/core/error.hpp>

namespace gradsync {

class shared_buffer {
public:
    // Collective: every rank of comm, with the same `bytes` for each rank's slot.
    template <communicator C>
    shared_buffer(C& comm, std::size_t bytes)
        : rank_(comm.rank()), size_(comm.size()), bytes_(bytes), slot_bytes_((bytes + page - 1) / page * page)
    {
        if (!gradsync::may_share_memory(comm))
            why_ = "this communicator's messages stand for a link (may_share_memory() is false)";
        else if (size_ > 1) {
            region_ = shared_region::join(comm, slot_bytes_ * std::size_t(size_));
            if (!region_.usable())
                why_ = region_.why();
        }
        if (region_.usable())
            return;
        own_.reset(static_cast<std::byte*>(::operator new(slot_bytes_ ? slot_bytes_ : page, std::align_val_t(page))));
        std::memset(own_.get(), 0, slot_bytes_);
        if (size_ == 1)
            why_ = "a single rank";
    }

    shared_buffer(const shared_buffer&) = delete;
    shared_buffer& operator=(const shared_buffer&) = delete;

    // Whether every rank maps every slot (ranks of one host).
    bool shared() const noexcept { return region_.usable(); }
    // Why the slots are not shared.
    const std::string& why() const noexcept { return why_; }
    int rank() const noexcept { return rank_; }
    int size() const noexcept { return size_; }
    // The bytes of each rank's slot.
    std::size_t bytes() const noexcept { return bytes_; }
    // The same on every rank of one buffer, and on no other buffer; 0 where not shared. The
    // reducers' agreement check compares it.
    std::uint64_t key() const noexcept { return region_.usable() ? region_.key() : 0; }

    // This rank's slot as elements of T (bytes() / sizeof(T) of them).
    template <class T>
    std::span<T> span() const noexcept
    {
        return {reinterpret_cast<T*>(slot(rank_)), bytes_ / sizeof(T)};
    }
    // Rank r's slot, as mapped in this process: any rank's where shared(), else this rank's only.
    std::byte* slot(int r) const noexcept
    {
        return region_.usable() ? region_.data() + std::size_t(r) * slot_bytes_ : own_.get();
    }
    // Whether [data, data + count) lies in this rank's slot.
    template <class T>
    bool holds(const T* data, std::size_t count) const noexcept
    {
        const auto at = reinterpret_cast<std::uintptr_t>(data), begin = reinterpret_cast<std::uintptr_t>(slot(rank_));
        return at >= begin && at - begin <= bytes_ && count * sizeof(T) <= bytes_ - (at - begin);
    }

private:
    static constexpr std::size_t page = 4096;
    struct aligned_delete {
        void operator()(std::byte* p) const noexcept { ::operator delete(p, std::align_val_t(page)); }
    };

    int rank_, size_;
    std::size_t bytes_, slot_bytes_;
    shared_region region_;
    std::unique_ptr<std::byte, aligned_delete> own_;
    std::string why_;
};

} // namespace gradsync
