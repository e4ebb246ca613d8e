// An allreduce of `count` floats over `ranks` ranks, checked element by element against the
// exact sum: "" when every element is right, else the first wrong one. For tests whose ranks
// are processes and report their outcome as text.
#pragma once

#include <gradsync/gradsync.hpp>

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace gradsync_test {

template <class Comm>
std::string summed_exactly(Comm& comm, int rank, int ranks, std::size_t count)
{
    std::vector<float> data(count);
    for (std::size_t i = 0; i < count; ++i)
        data[i] = float(i % 89 + std::size_t(rank));
    gradsync::allreduce(comm, std::span<float>(data));
    const std::size_t rank_sum = std::size_t(ranks) * std::size_t(ranks - 1) / 2;
    for (std::size_t i = 0; i < count; ++i)
        if (data[i] != float(std::size_t(ranks) * (i % 89) + rank_sum))
            return "element " + std::to_string(i) + " is " + std::to_string(data[i]);
    return "";
}

} // namespace gradsync_test
