// Whether this test program runs under AddressSanitizer or ThreadSanitizer: their shadow
// memory makes a resident set meaningless, and their instrumentation makes a long run three
// to ten times slower, so the longest randomized and matrix tests run fewer repetitions of the
// same code paths there (the optimized tier runs them all).
#pragma once

#include <vector>

namespace gradsync_test {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool sanitized = true;
#else
inline constexpr bool sanitized = false;
#endif

// Under ThreadSanitizer, which looks for races between threads: what the threads do to each
// other does not depend on the element type, so the threaded matrices run one type there.
#if defined(__SANITIZE_THREAD__)
inline constexpr bool thread_sanitized = true;
#else
inline constexpr bool thread_sanitized = false;
#endif

// The group sizes 1..most of a matrix test. Under sanitizers 1..8, which hold every way
// recursive halving folds a group onto a power of two and every hierarchical node count the
// matrices use, then 12 and 16: the same code paths as 9..15, with fewer threads.
inline std::vector<int> group_sizes(int most)
{
    std::vector<int> n;
    for (int i = 1; i <= most; ++i)
        if (!sanitized || i <= 8 || i == 12 || i == 16)
            n.push_back(i);
    return n;
}

} // namespace gradsync_test
