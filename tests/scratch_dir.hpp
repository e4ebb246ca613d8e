// A temporary directory for a test's files, unique to the process, removed with everything in
// it when the object goes.
#pragma once

#include <filesystem>
#include <random>
#include <string>
#include <system_error>

#include <unistd.h> // getpid

namespace gradsync_test {

class scratch_dir {
public:
    explicit scratch_dir(const std::string& prefix)
        : dir_(std::filesystem::temp_directory_path() /
               (prefix + std::to_string(::getpid()) + "_" + std::to_string(std::random_device{}())))
    {
        std::filesystem::create_directories(dir_);
    }
    ~scratch_dir()
    {
        std::error_code ignored;
        std::filesystem::remove_all(dir_, ignored);
    }
    scratch_dir(const scratch_dir&) = delete;
    scratch_dir& operator=(const scratch_dir&) = delete;

    std::filesystem::path file(const std::string& name) const { return dir_ / name; }
    const std::filesystem::path& path() const noexcept { return dir_; }

private:
    std::filesystem::path dir_;
};

} // namespace gradsync_test
