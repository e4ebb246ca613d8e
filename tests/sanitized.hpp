// Whether this test program runs under AddressSanitizer or ThreadSanitizer: their shadow
// memory makes a resident set meaningless, and their instrumentation makes a long run three
// to ten times slower, so the longest randomized and matrix tests run fewer repetitions of the
// same code paths there (the optimized tier runs them all).
#pragma once

namespace gradsync_test {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool sanitized = true;
#else
inline constexpr bool sanitized = false;
#endif

} // namespace gradsync_test
