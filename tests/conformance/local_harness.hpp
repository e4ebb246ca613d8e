// The conformance suite's harness (harness.hpp) over local_group: ranks as threads of this
// process, every N the suite asks for, results compared in memory. A driver includes this and
// then the suite's headers, which take it as conformance::harness.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <gradsync/gradsync.hpp>

#include "../outcome.hpp"
#include "harness.hpp"

namespace conformance {

struct local_harness {
    using comm_type = gradsync::local_communicator;
    static constexpr bool in_process = true;

    static std::vector<int> sizes(std::vector<int> wanted) { return wanted; }

    template <class Body>
    static std::string run(int n, Body&& body)
    {
        gradsync::local_group group(n);
        return gradsync_test::run_ranks(group, body);
    }

    static int checked_rank() { return 0; }

    static std::vector<int> checked_ranks(int n)
    {
        std::vector<int> all(static_cast<std::size_t>(n));
        for (int r = 0; r < n; ++r)
            all[std::size_t(r)] = r;
        return all;
    }

    template <class T>
    static std::string identical(const per_rank<T>& out)
    {
        return identical_in_memory(out);
    }
};

using harness = local_harness;

} // namespace conformance
