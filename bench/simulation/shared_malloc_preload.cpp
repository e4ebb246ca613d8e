// An operator new[] preloaded into smpirun by scripts/scale_study.sh. SMPI's own allreduce
// algorithms take their scratch from libsimgrid as new unsigned char[], one buffer per
// simulated rank as large as the message: N × M bytes in the one process (64 GiB at N = 1 024
// and 64 MiB), which the program's shared_memory_hook cannot reach. With
// GRADSYNC_SHARED_MALLOC_FROM=BYTES in the environment, every new[] of at least BYTES that
// libsimgrid's code calls is instead a mapping of one memory file that all such blocks share,
// as SMPI's shared malloc does for the program's buffers: simulated time does not depend on
// the values (the arithmetic is left out of it), which are garbage. Unset or 0, or any other
// allocation: the default operator new[]. The program smpirun runs is not reached: SMPI loads
// it with RTLD_DEEPBIND, which binds its calls to its own operators and libstdc++'s first.
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace {

// Each shared block owns one slot of reserved address space, so that its address names its
// slot; 16 384 slots of 1 GiB cover every live scratch buffer of 1 024 ranks.
constexpr std::size_t slot_bytes = std::size_t(1) << 30;
constexpr std::size_t slots = 16384;

// libsimgrid's code, where the collectives' scratch is asked for: only its own calls of
// operator new[] are shared. Its C++ containers allocate through operator new, and they must
// stay private (at N = 1 024 a hash table's buckets pass 1 MiB).
struct code_range {
    std::uintptr_t begin = 0, end = 0;
};

int find_simgrid(dl_phdr_info* info, std::size_t, void* out)
{
    if (!info->dlpi_name || !std::strstr(info->dlpi_name, "libsimgrid"))
        return 0;
    auto* range = static_cast<code_range*>(out);
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& segment = info->dlpi_phdr[i];
        if (segment.p_type == PT_LOAD && (segment.p_flags & PF_X)) {
            range->begin = info->dlpi_addr + segment.p_vaddr;
            range->end = range->begin + segment.p_memsz;
            return 1;
        }
    }
    return 0;
}

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
    std::size_t mapped[slots]; // of the file, kept when the block is freed
    code_range simgrid;
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

// Under the guard. False: no shared block for n bytes (then the default operator new[]).
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
        dl_iterate_phdr(find_simgrid, &blocks.simgrid);
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
void* shared_allocate(std::size_t n, const void* caller)
{
    if (blocks.read.load(std::memory_order_acquire) && (blocks.from == 0 || n < blocks.from))
        return nullptr; // the default, without taking the guard
    guard g;
    if (!ready(n))
        return nullptr;
    const auto from = reinterpret_cast<std::uintptr_t>(caller);
    if (from < blocks.simgrid.begin || from >= blocks.simgrid.end)
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
    return blocks.arena.load() + slot * slot_bytes;
}

void shared_release(void* p)
{
    guard g;
    blocks.free_slots[blocks.free_count++] = slot_of(p);
}

} // namespace

// SMPI's collectives take their scratch as new unsigned char[]: operator new[] called from
// libsimgrid's code is shared; every other allocation is the default one.
void* operator new[](std::size_t n)
{
    if (void* p = shared_allocate(n, __builtin_return_address(0)))
        return p;
    return ::operator new(n);
}

void operator delete[](void* p) noexcept
{
    if (shared(p))
        shared_release(p);
    else
        ::operator delete(p);
}

void operator delete[](void* p, std::size_t) noexcept { operator delete[](p); }
