// The misuse suites' checks of outcomes (misuse.hpp, movement.hpp): each rank's call records
// what it ended in (tests/outcome.hpp), and after H::run the checks ask that every rank ended
// in the expected kind of error, its buffer intact, naming the rank that did wrong.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "../outcome.hpp"
#include "../reference.hpp"
#include "harness.hpp"

namespace conformance::misuse_suite {

using gradsync_test::kind;
using gradsync_test::kind_name;
using gradsync_test::outcome;
using gradsync_test::record;
using Catch::Matchers::Contains;

// The rank that disagrees on n ranks.
inline int odd_rank(int n) { return std::min(3, n - 1); }

template <class T>
bool unchanged(const std::vector<T>& now, const std::vector<T>& before)
{
    return now.size() == before.size() && ref::same_bits(now.data(), before.data(), now.size() * sizeof(T));
}

// case_body(n, odd) for every N the harness runs of `wanted`, but one rank.
template <class H, class F>
void for_each_size(std::vector<int> wanted, F&& case_body)
{
    for (int n : H::sizes(std::move(wanted))) {
        if (n == 1) {
            SUCCEED("one rank has no one to disagree with");
            continue;
        }
        case_body(n, odd_rank(n));
    }
}

// body(comm, outcome&) on every rank of n; what each rank's call ended in. The body records
// what it throws without rethrowing, so nothing escapes a rank.
template <class H, class Body>
std::vector<outcome> run_recorded(int n, Body body)
{
    std::vector<outcome> res(static_cast<std::size_t>(n));
    const std::string escaped =
        H::run(n, [&](typename H::comm_type& comm) { body(comm, res[std::size_t(comm.rank())]); });
    CHECK(escaped == "");
    return res;
}

// "" when every rank's call ended in the same kind of outcome.
template <class H>
std::string same_kind_everywhere(const std::vector<outcome>& res)
{
    per_rank<std::uint32_t> kinds(res.size());
    for (int r : H::checked_ranks(int(res.size())))
        kinds[std::size_t(r)] = {std::uint32_t(res[std::size_t(r)].k)};
    return H::identical(kinds);
}

// Every rank ended in `expected`, its buffer intact, and, on the ranks other than `named`, the
// message names rank `named` (its own "rank N" prefix would make this trivial on that rank).
template <class H>
void expect_everywhere(const std::vector<outcome>& res, kind expected, int named)
{
    for (int r : H::checked_ranks(int(res.size()))) {
        const outcome& o = res[std::size_t(r)];
        INFO("rank " << r << " of " << res.size() << ": " << kind_name(o.k) << ": " << o.what);
        CHECK(kind_name(o.k) == std::string(kind_name(expected)));
        CHECK(o.untouched);
        if (r != named)
            CHECK_THAT(o.what, Contains("rank " + std::to_string(named)));
    }
    const std::string same = same_kind_everywhere<H>(res);
    CHECK(same == "");
}

// The common expectation: a mismatch_error everywhere, naming `field` (one of the given words).
template <class H>
void expect_mismatch_everywhere(const std::vector<outcome>& res, int odd, const std::vector<std::string>& field_words)
{
    expect_everywhere<H>(res, kind::mismatch, odd);
    for (int r : H::checked_ranks(int(res.size()))) {
        const outcome& o = res[std::size_t(r)];
        bool named = false;
        for (const std::string& w : field_words)
            named = named || Contains(w, Catch::CaseSensitive::No).match(o.what);
        INFO("rank " << r << ": " << o.what);
        CHECK(named);
    }
}

} // namespace conformance::misuse_suite
