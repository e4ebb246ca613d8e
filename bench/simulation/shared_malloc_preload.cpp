// A malloc preloaded into smpirun by scripts/scale_study.sh: SMPI's own allreduce algorithms
// take their scratch from libsimgrid's plain malloc, one buffer per simulated rank as large as
// the message, N × M bytes in the one process (64 GiB at N = 1 024 and 64 MiB), which the
// program's shared_memory_hook cannot reach. With GRADSYNC_SHARED_MALLOC_FROM=BYTES in the
// environment, every malloc of at least BYTES is instead a mapping of one memory file that all
// such blocks share, as SMPI's shared malloc does for the program's buffers: simulated time
// does not depend on the values (the arithmetic is left out of it), which are garbage.
// Unset or 0: every call is glibc's. calloc and the aligned allocations stay glibc's (they
// are not the collectives' scratch: libsimgrid's context stacks are aligned allocations);
// free and realloc recognise the shared blocks by their address. The program smpirun runs is
// not reached: SMPI loads it with RTLD_DEEPBIND, which binds its calls to glibc first.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

extern "C" {
void* __libc_malloc(std::size_t);
void __libc_free(void*);
void* __libc_realloc(void*, std::size_t);
}

namespace {

// Each shared block owns one slot of reserved address space, so that its address names its
// slot; 16 384 slots of 1 GiB cover every live scratch buffer of 1 024 ranks.
constexpr std::size_t slot_bytes = std::size_t(1) << 30;
constexpr std::size_t slots = 16384;

struct shared_blocks {
    std::atomic_flag busy = ATOMIC_FLAG_INIT;
    std::atomic<bool> read{false}; // the environment
    std::atomic<std::size_t> from{0};
    std::atomic<char*> arena{nullptr};
    int file = -1;
    std::size_t file_bytes = 0;
    std::size_t next = 0; // slots below it have been used
    std::size_t free_count = 0;
    std::size_t free_slots[slots];
    std::size_t bytes[slots];  // asked for
    std::size_t mapped[slots]; // of the file, kept when the block is freed
};

shared_blocks blocks;

struct guard {
    guard() { while (blocks.busy.test_and_set(std::memory_order_acquire)) {} }
    ~guard() { blocks.busy.clear(std::memory_order_release); }
    guard(const guard&) = delete;
    guard& operator=(const guard&) = delete;
};

std::size_t page_rounded(std::size_t n)
{
    const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    return (n + page - 1) / page * page;
}

bool shared(const void* p)
{
    const char* c = static_cast<const char*>(p);
    const char* arena = blocks.arena.load(std::memory_order_acquire);
    return arena && c >= arena && c < arena + slots * slot_bytes;
}

std::size_t slot_of(const void* p) { return std::size_t(static_cast<const char*>(p) - blocks.arena.load()) / slot_bytes; }

// Under the guard. False: no shared memory can be had (then the caller uses glibc's).
bool ready(std::size_t n)
{
    if (!blocks.read) {
        if (const char* from = std::getenv("GRADSYNC_SHARED_MALLOC_FROM"))
            blocks.from = std::strtoull(from, nullptr, 10);
        blocks.read.store(true, std::memory_order_release);
    }
    if (blocks.from == 0 || n < blocks.from || n > slot_bytes)
        return false;
    if (!blocks.arena) {
        void* arena = mmap(nullptr, slots * slot_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        const int file = memfd_create("gradsync-shared-malloc", 0);
        if (arena == MAP_FAILED || file < 0) {
            blocks.from = 0; // nothing shared from here on
            return false;
        }
        blocks.file = file;
        blocks.arena.store(static_cast<char*>(arena), std::memory_order_release);
    }
    if (blocks.free_count == 0 && blocks.next == slots)
        return false;
    if (n > blocks.file_bytes) {
        if (ftruncate(blocks.file, static_cast<off_t>(page_rounded(n))) != 0)
            return false;
        blocks.file_bytes = page_rounded(n);
    }
    return true;
}

// A freed slot keeps its mapping, so that the next block of at most its size reuses it with
// its pages already in the page table: 1 024 ranks' scratch of 64 MiB is 16 million pages,
// and faulting them in again on every call would cost more than the simulation.
void* shared_allocate(std::size_t n)
{
    if (blocks.read.load(std::memory_order_acquire) && (blocks.from == 0 || n < blocks.from))
        return nullptr; // glibc's, without taking the guard
    guard g;
    if (!ready(n))
        return nullptr;
    std::size_t slot = slots;
    for (std::size_t i = 0; i < blocks.free_count; ++i)
        if (blocks.mapped[blocks.free_slots[i]] >= n) {
            slot = blocks.free_slots[i];
            blocks.free_slots[i] = blocks.free_slots[--blocks.free_count];
            break;
        }
    if (slot == slots) {
        slot = blocks.next < slots ? blocks.next++ : blocks.free_slots[--blocks.free_count];
        void* p = mmap(blocks.arena.load() + slot * slot_bytes, page_rounded(n), PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_FIXED | MAP_POPULATE, blocks.file, 0);
        if (p == MAP_FAILED) {
            blocks.mapped[slot] = 0;
            blocks.free_slots[blocks.free_count++] = slot;
            return nullptr;
        }
        blocks.mapped[slot] = page_rounded(n);
    }
    blocks.bytes[slot] = n;
    return blocks.arena.load() + slot * slot_bytes;
}

void shared_release(void* p)
{
    guard g;
    blocks.free_slots[blocks.free_count++] = slot_of(p);
}

} // namespace

extern "C" {

void* malloc(std::size_t n)
{
    if (void* p = shared_allocate(n))
        return p;
    return __libc_malloc(n);
}

void free(void* p)
{
    if (shared(p))
        shared_release(p);
    else
        __libc_free(p);
}

void* realloc(void* p, std::size_t n)
{
    if (!shared(p))
        return __libc_realloc(p, n);
    void* q = malloc(n);
    if (q) {
        std::memcpy(q, p, std::min(n, blocks.bytes[slot_of(p)]));
        free(p);
    }
    return q;
}

} // extern "C"
