// A reader for IDX files, the format of MNIST and Fashion-MNIST: big-endian, a magic number
// 00 00 <element type> <dimension count>, one 32-bit size per dimension, then the elements.
// Only unsigned bytes (type 0x08) are read, the type of both data sets. Names ending in .gz
// are decompressed with zlib (link ZLIB::ZLIB); other files are read as they are.
//
// The header is untrusted: every error is an idx_error naming the file and what is wrong,
// and no buffer is sized from the header before the file has shown it holds that much (the
// size of a plain file; for a .gz file, the bytes decompressed so far).
#pragma once

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace gradsync_examples {

class idx_error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// dims[0] is the count (images, labels); data is row-major, the product of dims bytes.
struct idx_array {
    std::vector<std::uint32_t> dims;
    std::vector<std::uint8_t> data;
};

// Larger than any IDX data set in use (Fashion-MNIST's training images hold 47 MB), small
// enough that a corrupt header cannot ask for an absurd buffer.
inline constexpr std::uint64_t idx_max_bytes = std::uint64_t{1} << 31;
inline constexpr std::size_t idx_max_dims = 4;

namespace idx_detail {

inline constexpr std::size_t chunk_bytes = std::size_t{1} << 20;

inline std::string hex_bytes(const std::uint8_t* bytes, std::size_t n)
{
    static constexpr char digits[] = "0123456789abcdef";
    std::string text;
    for (std::size_t i = 0; i < n; ++i) {
        if (i > 0)
            text.push_back(' ');
        text.push_back(digits[bytes[i] >> 4]);
        text.push_back(digits[bytes[i] & 0xF]);
    }
    return text;
}

inline std::string file_kind(std::filesystem::file_type type)
{
    switch (type) {
    case std::filesystem::file_type::directory: return "a directory";
    case std::filesystem::file_type::character: return "a character device";
    case std::filesystem::file_type::block: return "a block device";
    case std::filesystem::file_type::fifo: return "a named pipe";
    case std::filesystem::file_type::socket: return "a socket";
    default: return "not a regular file";
    }
}

// The names the IDX format gives its other element types, so a refusal says what the file holds.
inline const char* other_type_name(std::uint8_t code)
{
    switch (code) {
    case 0x09: return "signed byte";
    case 0x0B: return "16-bit integer";
    case 0x0C: return "32-bit integer";
    case 0x0D: return "32-bit float";
    case 0x0E: return "64-bit float";
    default: return nullptr;
    }
}

// "1 byte", "2 bytes".
inline std::string count(std::uint64_t n, const char* noun)
{
    return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

inline std::string errno_text(int error)
{
    return error != 0 ? std::generic_category().message(error) : std::string("unknown error");
}

// A plain or gzip-compressed file, read in order; read() fills `n` bytes unless the data ends first.
class input {
public:
    explicit input(const std::filesystem::path& path) : name_(path.string())
    {
        std::error_code ec;
        const auto status = std::filesystem::status(path, ec);
        if (status.type() == std::filesystem::file_type::not_found)
            throw idx_error(name_ + " does not exist");
        if (ec)
            throw idx_error(name_ + " cannot be examined: " + ec.message());
        // Checked before opening: opening a named pipe would block, a device never ends.
        if (status.type() != std::filesystem::file_type::regular)
            throw idx_error(name_ + " is not a regular file (it is " + file_kind(status.type()) + ")");
        size_ = std::filesystem::file_size(path, ec);
        if (ec)
            throw idx_error(name_ + " cannot be examined: " + ec.message());

        errno = 0;
        plain_.reset(std::fopen(name_.c_str(), "rb"));
        if (!plain_)
            throw idx_error(name_ + " cannot be opened: " + errno_text(errno));
        if (path.extension() != ".gz")
            return;

        // zlib reads a file without the gzip header as it is; a .gz name promises compression.
        std::uint8_t id[2] = {};
        const std::size_t got = std::fread(id, 1, sizeof id, plain_.get());
        if (got == 0)
            throw idx_error(name_ + " is not gzip-compressed (it is empty)");
        if (got < 2 || id[0] != 0x1F || id[1] != 0x8B)
            throw idx_error(name_ + " is not gzip-compressed (it starts with " + hex_bytes(id, got) + ")");
        plain_.reset();
        errno = 0;
        gz_.reset(gzopen(name_.c_str(), "rb"));
        if (!gz_)
            throw idx_error(name_ + " cannot be opened: " + errno_text(errno));
        gzbuffer(gz_.get(), 1U << 16);
    }

    bool compressed() const noexcept { return gz_ != nullptr; }
    // The file's size on disk: for a plain file, an upper bound on what it can hold.
    std::uint64_t size() const noexcept { return size_; }

    std::size_t read(std::uint8_t* out, std::size_t n)
    {
        std::size_t done = 0;
        while (done < n) {
            const std::size_t want = std::min(n - done, chunk_bytes);
            const std::size_t got = gz_ ? read_gz(out + done, want) : read_plain(out + done, want);
            done += got;
            if (got < want)
                break;
        }
        return done;
    }

private:
    struct close_file {
        void operator()(std::FILE* f) const noexcept { std::fclose(f); }
    };
    struct close_gz {
        void operator()(gzFile f) const noexcept { gzclose(f); }
    };

    std::size_t read_plain(std::uint8_t* out, std::size_t n)
    {
        const std::size_t got = std::fread(out, 1, n, plain_.get());
        if (got < n && std::ferror(plain_.get()))
            throw idx_error(name_ + " cannot be read: " + errno_text(errno));
        return got;
    }

    std::size_t read_gz(std::uint8_t* out, std::size_t n)
    {
        const int got = gzread(gz_.get(), out, static_cast<unsigned>(n));
        int code = Z_OK;
        // zlib's message repeats the file's name, which ours already starts with.
        std::string text = gzerror(gz_.get(), &code);
        if (text.starts_with(name_ + ": "))
            text.erase(0, name_.size() + 2);
        // At the end, Z_BUF_ERROR means the input stopped inside the compressed stream.
        if (code == Z_BUF_ERROR)
            throw idx_error(name_ + " is a truncated gzip file (zlib: " + text + ")");
        if (got < 0 || code != Z_OK)
            throw idx_error(name_ + " cannot be decompressed (zlib: " + text + ")");
        return static_cast<std::size_t>(got);
    }

    std::string name_;
    std::uint64_t size_ = 0;
    std::unique_ptr<std::FILE, close_file> plain_;
    std::unique_ptr<gzFile_s, close_gz> gz_;
};

inline std::uint32_t big_endian(const std::uint8_t* p)
{
    return std::uint32_t{p[0]} << 24 | std::uint32_t{p[1]} << 16 | std::uint32_t{p[2]} << 8 | std::uint32_t{p[3]};
}

inline std::string dims_text(const std::vector<std::uint32_t>& dims)
{
    std::string text;
    for (std::size_t i = 0; i < dims.size(); ++i)
        text.append(i > 0 ? " x " : "").append(std::to_string(dims[i]));
    return text;
}

} // namespace idx_detail

inline idx_array read_idx(const std::filesystem::path& path)
{
    using namespace idx_detail;
    const std::string name = path.string();
    input in(path);

    std::uint8_t magic[4] = {};
    if (const std::size_t got = in.read(magic, sizeof magic); got < sizeof magic)
        throw idx_error(name + " holds " + count(got, "byte") + ", too few for an IDX magic number (4)");
    if (magic[0] != 0 || magic[1] != 0 || (magic[2] != 0x08 && !other_type_name(magic[2]))) {
        std::string message = name + " has a bad IDX magic number " + hex_bytes(magic, 4) +
                              " (expected 00 00 08 and the dimension count)";
        if (magic[0] == 0x1F && magic[1] == 0x8B)
            message += "; it looks gzip-compressed, and only names ending in .gz are decompressed";
        throw idx_error(message);
    }
    if (magic[2] != 0x08)
        throw idx_error(name + " holds elements of type 0x" + hex_bytes(magic + 2, 1) + " (" +
                        other_type_name(magic[2]) + "); only 0x08 (unsigned byte) is read");
    const std::size_t rank = magic[3];
    if (rank == 0 || rank > idx_max_dims)
        throw idx_error(name + " has " + count(rank, "dimension") + "; 1 to " +
                        std::to_string(idx_max_dims) + " are read");

    std::uint8_t sizes[4 * idx_max_dims] = {};
    const std::size_t header = sizeof magic + 4 * rank;
    if (const std::size_t got = in.read(sizes, 4 * rank); got < 4 * rank)
        throw idx_error(name + " holds " + count(sizeof magic + got, "byte") + ", too few for its IDX header (" +
                        std::to_string(header) + " for " + count(rank, "dimension") + ")");
    idx_array result;
    for (std::size_t d = 0; d < rank; ++d)
        result.dims.push_back(big_endian(sizes + 4 * d));

    // Each factor is below 2^32 and the running product at most 2^31, so nothing wraps; a
    // size of 0 makes the product 0 whatever the other sizes are.
    std::uint64_t bytes = std::find(result.dims.begin(), result.dims.end(), 0U) != result.dims.end() ? 0 : 1;
    for (std::size_t d = 0; d < rank && bytes > 0; ++d) {
        bytes *= result.dims[d];
        if (bytes > idx_max_bytes)
            throw idx_error(name + " has sizes " + dims_text(result.dims) + ", more than " +
                            std::to_string(idx_max_bytes) + " bytes of data");
    }

    const auto short_data = [&](std::uint64_t held) {
        return idx_error(name + " holds " + count(held, "byte") + " of data, the header promises " +
                         std::to_string(bytes));
    };
    const auto trailing = [&](std::uint64_t extra) {
        return idx_error(name + " has " + count(extra, "byte") + " after the data (" +
                         std::to_string(bytes) + " for sizes " + dims_text(result.dims) + ")");
    };

    if (!in.compressed()) {
        // The file's size bounds the buffer before anything is allocated.
        const std::uint64_t held = in.size() > header ? in.size() - header : 0;
        if (held < bytes)
            throw short_data(held);
        if (held > bytes)
            throw trailing(held - bytes);
        result.data.resize(static_cast<std::size_t>(bytes));
        if (const std::size_t got = in.read(result.data.data(), result.data.size()); got < bytes)
            throw short_data(got); // the file shrank while being read
    } else {
        // The decompressed size is unknown until the end: the buffer grows with what arrives,
        // never beyond what the header promises.
        auto& data = result.data;
        while (data.size() < bytes) {
            const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(bytes - data.size(), chunk_bytes));
            const std::size_t old = data.size();
            if (data.capacity() < old + want)
                data.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(bytes, std::max(2 * data.capacity(), old + want))));
            data.resize(old + want);
            const std::size_t got = in.read(data.data() + old, want);
            data.resize(old + got);
            if (got < want)
                throw short_data(data.size());
        }
    }

    // Counted in a small buffer: the excess of a .gz file can be far larger than its data.
    std::uint8_t rest[4096];
    std::uint64_t extra = 0;
    for (std::size_t got; (got = in.read(rest, sizeof rest)) > 0;)
        extra += got;
    if (extra > 0)
        throw trailing(extra);
    return result;
}

// Images: count x rows x columns.
inline idx_array read_idx_images(const std::filesystem::path& path)
{
    idx_array images = read_idx(path);
    if (images.dims.size() != 3)
        throw idx_error(path.string() + " has " + idx_detail::count(images.dims.size(), "dimension") +
                        "; images have 3 (count, rows, columns)");
    return images;
}

// Labels: one byte per sample.
inline idx_array read_idx_labels(const std::filesystem::path& path)
{
    idx_array labels = read_idx(path);
    if (labels.dims.size() != 1)
        throw idx_error(path.string() + " has " + idx_detail::count(labels.dims.size(), "dimension") +
                        "; labels have 1 (count)");
    return labels;
}

// The images and labels of one split belong together: one label per image, each a class
// below `classes`. The paths only name the files in the message.
inline void check_pair(const idx_array& images, const idx_array& labels, const std::filesystem::path& images_path,
                       const std::filesystem::path& labels_path, std::uint32_t classes)
{
    if (images.dims.empty() || labels.dims.size() != 1)
        throw idx_error(images_path.string() + " and " + labels_path.string() + " are not images and labels");
    if (images.dims[0] != labels.dims[0])
        throw idx_error(images_path.string() + " holds " + std::to_string(images.dims[0]) + " images but " +
                        labels_path.string() + " holds " + std::to_string(labels.dims[0]) + " labels");
    for (std::size_t i = 0; i < labels.data.size(); ++i)
        if (labels.data[i] >= classes)
            throw idx_error(labels_path.string() + " holds label " + std::to_string(labels.data[i]) + " at index " +
                            std::to_string(i) + ", not below the class count " + std::to_string(classes));
}

// Fashion-MNIST as Debian's package dataset-fashion-mnist installs it. read_idx stays generic;
// a caller that defaults to these files calls require_fashion_mnist first, so that a missing
// file also says how to get it.
struct fashion_mnist_files {
    std::filesystem::path train_images, train_labels, test_images, test_labels;
};

inline std::filesystem::path fashion_mnist_dir() { return "/usr/share/datasets/fashion-mnist"; }

inline fashion_mnist_files fashion_mnist_paths(const std::filesystem::path& dir = fashion_mnist_dir())
{
    return {dir / "train-images-idx3-ubyte.gz", dir / "train-labels-idx1-ubyte.gz", dir / "t10k-images-idx3-ubyte.gz",
            dir / "t10k-labels-idx1-ubyte.gz"};
}

inline void require_fashion_mnist(const fashion_mnist_files& files)
{
    for (const auto* file : {&files.train_images, &files.train_labels, &files.test_images, &files.test_labels}) {
        std::error_code ec;
        if (!std::filesystem::exists(*file, ec))
            throw idx_error(file->string() +
                            " does not exist; on Debian, install the package dataset-fashion-mnist "
                            "(apt-get install dataset-fashion-mnist), or name the directory that holds the four files");
    }
}

} // namespace gradsync_examples
