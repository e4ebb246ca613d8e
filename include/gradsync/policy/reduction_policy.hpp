// A reduction policy: elementwise (sum, average: combine and finish, policy/sum.hpp), which
// every elementwise plan runs, or adasum, which has plans of its own (selector/plan_table.hpp).
#pragma once

#include <gradsync/policy/adasum.hpp>
#include <gradsync/policy/sum.hpp>

namespace gradsync {

template <class P>
concept reduction_policy = elementwise_policy<P> || is_adasum<P>;

} // namespace gradsync
