// shared_file: the anonymous file behind every piece of memory the ranks of one host share
// (region.hpp, board.hpp), and this process's mappings of such files.
//
// Rank 0 makes the file (memfd_create: no name, nothing in /dev/shm) and writes a random key at
// its start; another process opens it through /proc/PID/fd/N (rank 0's process and
// descriptor), maps it and checks the key, so a descriptor that /proc resolves to some other
// file (a process of another host that reused the pid) is refused. The kernel frees the file
// when the last process unmaps it or exits, SIGKILL included. Ranks of one process share one
// mapping per file, found by its key, kept until the last of them lets go: the same addresses
// for all, so threads can read each other's buffers by address.
#pragma once

#include <array>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace gradsync::detail {

// One mapping of a shared file: the whole file, its key first.
struct shared_mapping {
    std::byte* base;
    std::size_t bytes;
    std::uint64_t key;
    shared_mapping(void* b, std::size_t n, std::uint64_t k) noexcept : base(static_cast<std::byte*>(b)), bytes(n), key(k)
    {
    }
    shared_mapping(const shared_mapping&) = delete;
    shared_mapping& operator=(const shared_mapping&) = delete;
    ~shared_mapping() { ::munmap(base, bytes); }
};

// An owned descriptor, closed when it goes.
struct descriptor {
    int fd = -1;
    descriptor() = default;
    explicit descriptor(int f) noexcept : fd(f) {}
    descriptor(descriptor&& o) noexcept : fd(std::exchange(o.fd, -1)) {}
    descriptor& operator=(descriptor&& o) noexcept
    {
        std::swap(fd, o.fd);
        return *this;
    }
    ~descriptor()
    {
        if (fd >= 0)
            ::close(fd);
    }
};

// This process's mapping of the file with `key`, if one is alive; else `made`, registered.
inline std::shared_ptr<shared_mapping> registered_mapping(std::uint64_t key, std::shared_ptr<shared_mapping> made = nullptr)
{
    static std::mutex lock;
    static std::vector<std::weak_ptr<shared_mapping>> all;
    std::lock_guard hold(lock);
    std::erase_if(all, [](const std::weak_ptr<shared_mapping>& m) { return m.expired(); });
    for (const auto& m : all)
        if (auto live = m.lock(); live && live->key == key)
            return live;
    if (made)
        all.push_back(made);
    return made;
}

// Ranks on hosts of other names share no memory, even where one kernel runs them all (network
// and UTS namespaces standing in for hosts): the nodes hierarchical sees.
inline std::array<char, 256> host_name() noexcept
{
    std::array<char, 256> name{};
    ::gethostname(name.data(), name.size() - 1);
    return name;
}

// What opening rank 0's file failed at (the steps an opener reports).
enum class open_step : std::int32_t { mapped, not_made, no_proc_entry, other_size, no_mapping, other_key, other_host };

inline const char* describe(open_step s) noexcept
{
    static constexpr const char* steps[] = {"mapped rank 0's shared file", "could not make the shared file",
                                            "could not open rank 0's shared file through /proc",
                                            "found rank 0's shared file of another size",
                                            "could not map rank 0's shared file",
                                            "found another key in rank 0's shared file (a process of another host?)",
                                            "has another host name than rank 0"};
    return steps[std::size_t(s)];
}

// A file made by rank 0: its descriptor, kept open while others may still open it, and this
// process's mapping; or the errno of what failed.
struct made_file {
    descriptor fd;
    std::shared_ptr<shared_mapping> mapping;
    int error = 0;
};

inline made_file make_shared_file(std::size_t bytes)
{
    made_file made;
    made.fd = descriptor(int(::syscall(SYS_memfd_create, "gradsync", MFD_CLOEXEC)));
    if (made.fd.fd < 0 || ::ftruncate(made.fd.fd, off_t(bytes)) != 0) {
        made.error = errno;
        made.fd = descriptor();
        return made;
    }
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, made.fd.fd, 0);
    if (p == MAP_FAILED) {
        made.error = errno;
        made.fd = descriptor();
        return made;
    }
    std::random_device device;
    const auto now = std::uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
    const std::uint64_t key = ((std::uint64_t(device()) << 32) ^ device() ^ now ^ (std::uint64_t(::getpid()) << 17)) | 1;
    auto m = std::make_shared<shared_mapping>(p, bytes, key);
    std::memcpy(m->base, &key, sizeof key);
    made.mapping = registered_mapping(key, std::move(m));
    return made;
}

// Maps the file rank 0 made (its pid and descriptor) of `bytes` with `key`: this process's
// mapping of it where there is one already. Sets `error` (errno) where a step failed.
inline open_step open_shared_file(int pid, int fd, std::uint64_t bytes, std::uint64_t key,
                                  std::shared_ptr<shared_mapping>& out, int& error)
{
    error = 0;
    if ((out = registered_mapping(key)))
        return open_step::mapped;
    const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
    const descriptor opened(::open(path.c_str(), O_RDWR | O_CLOEXEC));
    if (opened.fd < 0) {
        error = errno;
        return open_step::no_proc_entry;
    }
    struct stat st {};
    if (::fstat(opened.fd, &st) != 0) {
        error = errno;
        return open_step::other_size;
    }
    if (std::uint64_t(st.st_size) != bytes)
        return open_step::other_size;
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, opened.fd, 0);
    if (p == MAP_FAILED) {
        error = errno;
        return open_step::no_mapping;
    }
    auto m = std::make_shared<shared_mapping>(p, bytes, key);
    std::uint64_t seen = 0;
    std::memcpy(&seen, m->base, sizeof seen);
    if (seen != key) {
        error = EINVAL;
        return open_step::other_key;
    }
    out = registered_mapping(key, std::move(m));
    return open_step::mapped;
}

} // namespace gradsync::detail
