// A reduction policy: elementwise (combine and finish, the concept in policy/sum.hpp: sum,
// average, minimum, maximum, product, bitwise_and, bitwise_or, bitwise_xor), which every
// elementwise plan runs, or adasum, which has plans of its own (selector/plan_table.hpp).
#pragma once

#include <gradsync/policy/adasum.hpp>
#include <gradsync/policy/bitwise.hpp>
#include <gradsync/policy/extrema.hpp>
#include <gradsync/policy/product.hpp>
#include <gradsync/policy/sum.hpp>

namespace gradsync {

template <class P>
concept reduction_policy = elementwise_policy<P> || is_adasum<P>;

} // namespace gradsync
