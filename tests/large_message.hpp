// The message of 2^31 + 13 bytes that the transports' tests send (test_local_group.cpp,
// test_mpi.cpp): past every int-sized count, so a transport must split it or count in 64 bits.
// The sender writes only the samples, so its other pages read as zero without using memory;
// the receiver presets the samples to other values, so a short or misplaced copy shows.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <new>
#include <vector>

#include "reference.hpp"

namespace gradsync_test {

inline constexpr std::size_t large_message_bytes = (std::size_t(1) << 31) + 13;

// Every 1 MiB + 4093 bytes, both sides of 2^30 and 2^31, and the last two bytes.
inline std::vector<std::size_t> large_message_samples()
{
    constexpr std::size_t gib = std::size_t(1) << 30;
    std::vector<std::size_t> samples;
    for (std::size_t p = 0; p < large_message_bytes; p += (std::size_t(1) << 20) + 4093)
        samples.push_back(p);
    for (std::size_t p : {std::size_t(1), gib - 1, gib, 2 * gib - 2, 2 * gib - 1, 2 * gib, 2 * gib + 1,
                          large_message_bytes - 2, large_message_bytes - 1})
        samples.push_back(p);
    return samples;
}

// The sender's byte at offset p; never zero, so an untouched byte of the receiver differs.
inline std::byte large_message_byte(std::size_t p) noexcept { return std::byte(ref::mix(p) | 1); }

// Zeroed memory for the message, asking for transparent huge pages (the kernel's "madvise"
// mode gives them only on request): copying 2 GiB then takes about a thousand page faults
// instead of half a million, which on a virtual machine took most of the test's time.
class large_buffer {
public:
    large_buffer() : data_(map())
    {
        madvise(data_, large_message_bytes, MADV_HUGEPAGE); // a request: without it, small pages
    }
    ~large_buffer() { munmap(data_, large_message_bytes); }
    large_buffer(const large_buffer&) = delete;
    large_buffer& operator=(const large_buffer&) = delete;

    std::byte* data() noexcept { return static_cast<std::byte*>(data_); }
    std::byte& operator[](std::size_t p) noexcept { return data()[p]; }

private:
    static void* map()
    {
        void* p = mmap(nullptr, large_message_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            throw std::bad_alloc();
        return p;
    }

    void* data_;
};

} // namespace gradsync_test
