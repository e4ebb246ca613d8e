// The replacement operator new and delete of shared_memory_hook.hpp.
#include "shared_memory_hook.hpp"

#include <mpi.h>

#include <cstddef>
#include <cstdlib>
#include <new>
#include <set>

namespace {

constexpr std::size_t shared_from = std::size_t(1) << 20;
bool share_large = false;
std::set<void*>* shared_blocks = nullptr; // made at the first shared allocation

void* allocate(std::size_t n)
{
    if (share_large && n >= shared_from) {
        void* p = smpi_shared_malloc(n, "gradsync simulation scratch", 0);
        if (!shared_blocks)
            shared_blocks = new (std::malloc(sizeof(std::set<void*>))) std::set<void*>();
        shared_blocks->insert(p);
        return p;
    }
    if (void* p = std::malloc(n ? n : 1))
        return p;
    throw std::bad_alloc();
}

void release(void* p) noexcept
{
    if (!p)
        return;
    if (shared_blocks && shared_blocks->erase(p)) {
        smpi_shared_free(p);
        return;
    }
    std::free(p);
}

} // namespace

void simulation::share_large_allocations(bool on) { share_large = on; }

void* operator new(std::size_t n) { return allocate(n); }
void* operator new[](std::size_t n) { return allocate(n); }
void operator delete(void* p) noexcept { release(p); }
void operator delete[](void* p) noexcept { release(p); }
void operator delete(void* p, std::size_t) noexcept { release(p); }
void operator delete[](void* p, std::size_t) noexcept { release(p); }
