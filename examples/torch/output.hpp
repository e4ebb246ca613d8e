// Files that train_fashion_mnist writes (runs.csv, accuracy.svg, profile.csv, a trace), with
// an error naming the file when it cannot be written.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include <gradsync/core/error.hpp>

namespace gradsync_examples {

inline std::ofstream open_output(const std::filesystem::path& file)
{
    if (file.has_parent_path())
        std::filesystem::create_directories(file.parent_path());
    std::ofstream out(file, std::ios::binary);
    if (!out)
        throw gradsync::error("cannot write " + file.string());
    return out;
}

inline void close_output(std::ofstream& out, const std::filesystem::path& file)
{
    out.close();
    if (!out)
        throw gradsync::error("cannot write " + file.string());
}

} // namespace gradsync_examples
