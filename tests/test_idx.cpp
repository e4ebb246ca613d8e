// The examples' IDX reader (examples/torch/idx.hpp): round trips of images and labels, plain
// and gzip-compressed, written here; every error, with a message naming the file and what is
// wrong; headers that promise more than the file holds, read without a buffer of that size;
// and, where Debian's dataset-fashion-mnist is installed, the real Fashion-MNIST files.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "idx.hpp"
#include "scratch_dir.hpp"

namespace {

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using gradsync_examples::idx_array;
using gradsync_examples::idx_error;
using gradsync_examples::read_idx;
using gradsync_examples::read_idx_images;
using gradsync_examples::read_idx_labels;
using bytes = std::vector<std::uint8_t>;

// A scratch directory for the files, removed afterwards.
class scratch : public gradsync_test::scratch_dir {
public:
    scratch() : scratch_dir("gradsync_idx_") {}

    // Compressed when the name ends in .gz.
    fs::path write(const std::string& name, const bytes& content) const
    {
        const fs::path path = file(name);
        if (path.extension() == ".gz") {
            gzFile out = gzopen(path.c_str(), "wb");
            REQUIRE(out != nullptr);
            if (!content.empty())
                REQUIRE(gzwrite(out, content.data(), static_cast<unsigned>(content.size())) ==
                        static_cast<int>(content.size()));
            REQUIRE(gzclose(out) == Z_OK);
        } else {
            std::ofstream(path, std::ios::binary)
                .write(reinterpret_cast<const char*>(content.data()), static_cast<std::streamsize>(content.size()));
        }
        return path;
    }

    // Written as it is, whatever the name.
    fs::path write_raw(const std::string& name, const bytes& content) const
    {
        const fs::path path = file(name);
        std::ofstream(path, std::ios::binary)
            .write(reinterpret_cast<const char*>(content.data()), static_cast<std::streamsize>(content.size()));
        return path;
    }

    bytes slurp(const std::string& name) const
    {
        std::ifstream in(file(name), std::ios::binary);
        return bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }

};

void put_be32(bytes& out, std::uint32_t v)
{
    for (int shift = 24; shift >= 0; shift -= 8)
        out.push_back(static_cast<std::uint8_t>(v >> shift));
}

// An IDX header of element type `type` followed by `data`.
bytes idx(const std::vector<std::uint32_t>& dims, const bytes& data, std::uint8_t type = 0x08)
{
    bytes out{0, 0, type, static_cast<std::uint8_t>(dims.size())};
    for (const std::uint32_t d : dims)
        put_be32(out, d);
    out.insert(out.end(), data.begin(), data.end());
    return out;
}

bytes pattern(std::size_t n, std::uint32_t seed)
{
    bytes out(n);
    std::uint32_t x = seed;
    for (auto& b : out) {
        x = x * 1664525U + 1013904223U;
        b = static_cast<std::uint8_t>(x >> 24);
    }
    return out;
}

// The message of the idx_error that `read` throws ("" if none).
template <class Read>
std::string error_of(Read&& read)
{
    try {
        read();
    } catch (const idx_error& e) {
        return e.what();
    }
    return {};
}

std::string read_error(const fs::path& path)
{
    return error_of([&] { read_idx(path); });
}

void check_round_trip(const scratch& dir, const std::string& suffix)
{
    const std::vector<std::uint32_t> image_dims{5, 7, 3};
    const bytes pixels = pattern(5 * 7 * 3, 1);
    const bytes labels_data{0, 9, 3, 3, 7};

    const idx_array images = read_idx_images(dir.write("images" + suffix, idx(image_dims, pixels)));
    CHECK(images.dims == image_dims);
    CHECK(images.data == pixels);

    const fs::path labels_path = dir.write("labels" + suffix, idx({5}, labels_data));
    const idx_array labels = read_idx_labels(labels_path);
    CHECK(labels.dims == std::vector<std::uint32_t>{5});
    CHECK(labels.data == labels_data);
    CHECK_NOTHROW(gradsync_examples::check_pair(images, labels, dir.file("images" + suffix), labels_path, 10));

    // Larger than the reader's 1 MiB chunks, and not a multiple of them.
    const std::vector<std::uint32_t> big_dims{3, 1000, 701};
    const bytes big = pattern(3 * 1000 * 701, 2);
    const idx_array large = read_idx(dir.write("large" + suffix, idx(big_dims, big)));
    CHECK(large.dims == big_dims);
    CHECK(large.data == big);
}

} // namespace

TEST_CASE("images and labels round trip through plain files")
{
    const scratch dir;
    check_round_trip(dir, ".idx");
}

TEST_CASE("images and labels round trip through gzip files")
{
    const scratch dir;
    check_round_trip(dir, ".idx.gz");
}

TEST_CASE("sizes of 0 and four dimensions are read")
{
    const scratch dir;
    for (const std::string name : {"empty.idx", "empty.idx.gz"}) {
        const idx_array none = read_idx_images(dir.write(name, idx({0, 28, 28}, {})));
        CHECK(none.dims == std::vector<std::uint32_t>{0, 28, 28});
        CHECK(none.data.empty());
    }
    // A size of 0 makes the product 0, however large the others.
    const idx_array zero = read_idx(dir.write("zero.idx", idx({0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0}, {})));
    CHECK(zero.dims.size() == 4);
    CHECK(zero.data.empty());

    const bytes data = pattern(2 * 3 * 4 * 5, 3);
    const idx_array four = read_idx(dir.write("four.idx.gz", idx({2, 3, 4, 5}, data)));
    CHECK(four.dims == std::vector<std::uint32_t>{2, 3, 4, 5});
    CHECK(four.data == data);
}

TEST_CASE("a missing file or one that is not a regular file is named")
{
    const scratch dir;
    const fs::path missing = dir.file("missing.idx.gz");
    CHECK_THAT(read_error(missing), Contains(missing.string() + " does not exist"));
    // The reader is generic: the hint for the Debian package comes from the Fashion-MNIST helper.
    CHECK_THAT(read_error(missing), !Contains("dataset-fashion-mnist"));

    fs::create_directories(dir.file("folder.idx"));
    CHECK_THAT(read_error(dir.file("folder.idx")), Contains("folder.idx is not a regular file (it is a directory)"));

    // Refused before opening, so the read does not wait for a writer.
    REQUIRE(::mkfifo(dir.file("pipe.idx").c_str(), 0600) == 0);
    CHECK_THAT(read_error(dir.file("pipe.idx")), Contains("pipe.idx is not a regular file (it is a named pipe)"));

    if (fs::exists("/dev/zero"))
        CHECK_THAT(read_error("/dev/zero"), Contains("/dev/zero is not a regular file (it is a character device)"));
}

TEST_CASE("the Fashion-MNIST helper says how to get the files")
{
    const scratch dir;
    const auto files = gradsync_examples::fashion_mnist_paths(dir.file("none"));
    CHECK(files.train_labels == dir.file("none") / "train-labels-idx1-ubyte.gz");
    const std::string message = error_of([&] { gradsync_examples::require_fashion_mnist(files); });
    CHECK_THAT(message, Contains("train-images-idx3-ubyte.gz does not exist"));
    CHECK_THAT(message, Contains("install the package dataset-fashion-mnist"));
    CHECK(gradsync_examples::fashion_mnist_paths().test_images ==
          fs::path("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"));
}

TEST_CASE("a .gz file that is not gzip, or is cut or damaged, is refused with zlib's word")
{
    const scratch dir;
    const bytes content = idx({4, 2, 2}, pattern(16, 4));

    CHECK_THAT(read_error(dir.write_raw("plain.idx.gz", content)),
               Contains("plain.idx.gz is not gzip-compressed (it starts with 00 00)"));
    CHECK_THAT(read_error(dir.write_raw("empty.gz", {})), Contains("empty.gz is not gzip-compressed (it is empty)"));
    CHECK_THAT(read_error(dir.write_raw("one.gz", {0x1F})), Contains("one.gz is not gzip-compressed (it starts with 1f)"));

    // A gzip file under a plain name is read as it is, and the magic number says what it looks like.
    dir.write("whole.idx.gz", content);
    const bytes packed = dir.slurp("whole.idx.gz");
    const std::string misnamed = read_error(dir.write_raw("packed.idx", packed));
    CHECK_THAT(misnamed, Contains("packed.idx has a bad IDX magic number 1f 8b 08"));
    CHECK_THAT(misnamed, Contains("only names ending in .gz are decompressed"));

    for (const std::size_t keep : {std::size_t{3}, std::size_t{12}, packed.size() / 2, packed.size() - 4}) {
        INFO("kept " << keep << " of " << packed.size() << " bytes");
        const fs::path cut = dir.write_raw("cut.idx.gz", bytes(packed.begin(), packed.begin() + keep));
        CHECK_THAT(read_error(cut), Contains("cut.idx.gz is a truncated gzip file (zlib: "));
    }

    // The CRC-32 in the trailer no longer matches the data.
    bytes damaged = packed;
    damaged[damaged.size() - 8] ^= 0xFF;
    CHECK_THAT(read_error(dir.write_raw("damaged.idx.gz", damaged)),
               Contains("damaged.idx.gz cannot be decompressed (zlib: incorrect data check)"));
}

TEST_CASE("a bad magic number is shown in hex, other element types by name")
{
    const scratch dir;
    CHECK_THAT(read_error(dir.write("text.idx", {'I', 'D', 'X', '3', 0, 0, 0, 1})),
               Contains("text.idx has a bad IDX magic number 49 44 58 33"));
    CHECK_THAT(read_error(dir.write("high.idx.gz", {0, 1, 8, 1, 0, 0, 0, 0})),
               Contains("high.idx.gz has a bad IDX magic number 00 01 08 01"));
    CHECK_THAT(read_error(dir.write("unknown.idx", idx({1}, {0}, 0x07))),
               Contains("unknown.idx has a bad IDX magic number 00 00 07 01"));
    CHECK_THAT(read_error(dir.write("short.idx", {0, 0, 8})),
               Contains("short.idx holds 3 bytes, too few for an IDX magic number (4)"));
    CHECK_THAT(read_error(dir.write("nothing.idx", {})),
               Contains("nothing.idx holds 0 bytes, too few for an IDX magic number (4)"));

    const std::array<std::pair<std::uint8_t, const char*>, 5> others{{{0x09, "0x09 (signed byte)"},
                                                                      {0x0B, "0x0b (16-bit integer)"},
                                                                      {0x0C, "0x0c (32-bit integer)"},
                                                                      {0x0D, "0x0d (32-bit float)"},
                                                                      {0x0E, "0x0e (64-bit float)"}}};
    for (const auto& [code, name] : others) {
        for (const std::string file : {"typed.idx", "typed.idx.gz"}) {
            INFO(file << " of type " << name);
            const std::string message = read_error(dir.write(file, idx({2}, {0, 0, 0, 0, 0, 0, 0, 0}, code)));
            CHECK_THAT(message, Contains(file + " holds elements of type " + name));
            CHECK_THAT(message, Contains("only 0x08 (unsigned byte) is read"));
        }
    }
}

TEST_CASE("dimension counts of 0 and above 4 are refused, a cut header is named")
{
    const scratch dir;
    CHECK_THAT(read_error(dir.write("flat.idx", {0, 0, 8, 0})), Contains("flat.idx has 0 dimensions; 1 to 4 are read"));
    CHECK_THAT(read_error(dir.write("five.idx.gz", idx({1, 1, 1, 1, 1}, {7}))),
               Contains("five.idx.gz has 5 dimensions; 1 to 4 are read"));
    CHECK_THAT(read_error(dir.write("wide.idx", {0, 0, 8, 255})), Contains("wide.idx has 255 dimensions"));

    bytes cut = idx({60000, 28, 28}, {});
    cut.resize(10);
    for (const std::string name : {"cut.idx", "cut.idx.gz"})
        CHECK_THAT(read_error(dir.write(name, cut)),
                   Contains(name + " holds 10 bytes, too few for its IDX header (16 for 3 dimensions)"));
}

TEST_CASE("sizes beyond 2^31 bytes are refused before anything is read")
{
    const scratch dir;
    // 2^32 wraps to 0 in 32 bits; 2^16 x 2^16 x 2^16 wraps a 32-bit product twice.
    CHECK_THAT(read_error(dir.write("wrap.idx", idx({65536, 65536}, {}))),
               Contains("wrap.idx has sizes 65536 x 65536, more than 2147483648 bytes of data"));
    CHECK_THAT(read_error(dir.write("cube.idx.gz", idx({65536, 65536, 65536}, {}))),
               Contains("cube.idx.gz has sizes 65536 x 65536 x 65536, more than 2147483648 bytes"));
    CHECK_THAT(read_error(dir.write("huge.idx", idx({0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}, {}))),
               Contains("huge.idx has sizes 4294967295 x 4294967295 x 4294967295 x 4294967295, more than"));
    CHECK_THAT(read_error(dir.write("over.idx", idx({2147483649U}, {}))),
               Contains("over.idx has sizes 2147483649, more than 2147483648 bytes"));

    // Exactly 2^31 passes the limit; the file's size (plain) or the bytes that arrive (gzip)
    // refuse it without a 2 GiB buffer.
    CHECK_THAT(read_error(dir.write("limit.idx", idx({32768, 256, 256}, {1, 2, 3}))),
               Contains("limit.idx holds 3 bytes of data, the header promises 2147483648"));
    CHECK_THAT(read_error(dir.write("limit.idx.gz", idx({32768, 256, 256}, {1, 2, 3}))),
               Contains("limit.idx.gz holds 3 bytes of data, the header promises 2147483648"));
}

TEST_CASE("truncated data and bytes after the data are refused with both counts")
{
    const scratch dir;
    const bytes data = pattern(60, 5);
    for (const std::string suffix : {".idx", ".idx.gz"}) {
        INFO("suffix " << suffix);
        CHECK_THAT(read_error(dir.write("short" + suffix, idx({3, 4, 5}, bytes(data.begin(), data.begin() + 50)))),
                   Contains("short" + suffix + " holds 50 bytes of data, the header promises 60"));
        CHECK_THAT(read_error(dir.write("bare" + suffix, idx({3, 4, 5}, {}))),
                   Contains("bare" + suffix + " holds 0 bytes of data, the header promises 60"));
        bytes longer = data;
        longer.insert(longer.end(), {1, 2, 3, 4, 5, 6, 7});
        CHECK_THAT(read_error(dir.write("long" + suffix, idx({3, 4, 5}, longer))),
                   Contains("long" + suffix + " has 7 bytes after the data (60 for sizes 3 x 4 x 5)"));
        CHECK_THAT(read_error(dir.write("empty_long" + suffix, idx({0, 28, 28}, {9}))),
                   Contains("empty_long" + suffix + " has 1 byte after the data"));
    }
    // More excess than one read buffer holds, counted in full.
    CHECK_THAT(read_error(dir.write("tail.idx.gz", idx({2}, bytes(100002, 0)))),
               Contains("tail.idx.gz has 100000 bytes after the data"));
}

TEST_CASE("images need 3 dimensions, labels 1")
{
    const scratch dir;
    const fs::path labels = dir.write("labels.idx", idx({4}, {1, 2, 3, 4}));
    const fs::path images = dir.write("images.idx.gz", idx({1, 2, 2}, {1, 2, 3, 4}));
    CHECK_THAT(error_of([&] { read_idx_images(labels); }),
               Contains("labels.idx has 1 dimension; images have 3 (count, rows, columns)"));
    CHECK_THAT(error_of([&] { read_idx_labels(images); }),
               Contains("images.idx.gz has 3 dimensions; labels have 1 (count)"));
    CHECK(read_idx_images(images).dims.size() == 3);
    CHECK(read_idx_labels(labels).dims.size() == 1);
}

TEST_CASE("check_pair wants one label per image, each below the class count")
{
    const idx_array images{{3, 2, 2}, bytes(12, 0)};
    const idx_array labels{{3}, {0, 4, 2}};
    const idx_array fewer{{2}, {0, 1}};
    const auto check = [&](const idx_array& l, std::uint32_t classes) {
        return error_of([&] { gradsync_examples::check_pair(images, l, "img.gz", "lab.gz", classes); });
    };
    CHECK(check(labels, 5).empty());
    CHECK_THAT(check(fewer, 5), Contains("img.gz holds 3 images but lab.gz holds 2 labels"));
    CHECK_THAT(check(labels, 4), Contains("lab.gz holds label 4 at index 1, not below the class count 4"));
    CHECK_THAT(check(labels, 0), Contains("lab.gz holds label 0 at index 0, not below the class count 0"));
    CHECK_THAT(error_of([&] { gradsync_examples::check_pair(labels, images, "img.gz", "lab.gz", 5); }),
               Contains("are not images and labels"));
}

TEST_CASE("Debian's Fashion-MNIST: 60000 and 10000 images of 28 x 28, 6000 training labels per class")
{
    const auto files = gradsync_examples::fashion_mnist_paths();
    if (!fs::exists(files.train_labels)) {
        WARN("skipped: " << files.train_labels.string() << " is absent (Debian package dataset-fashion-mnist)");
        return;
    }
    REQUIRE_NOTHROW(gradsync_examples::require_fashion_mnist(files));

    const idx_array train_images = read_idx_images(files.train_images);
    const idx_array train_labels = read_idx_labels(files.train_labels);
    const idx_array test_images = read_idx_images(files.test_images);
    const idx_array test_labels = read_idx_labels(files.test_labels);
    CHECK(train_images.dims == std::vector<std::uint32_t>{60000, 28, 28});
    CHECK(test_images.dims == std::vector<std::uint32_t>{10000, 28, 28});
    CHECK(train_images.data.size() == 60000U * 28 * 28);
    CHECK(test_images.data.size() == 10000U * 28 * 28);
    CHECK_NOTHROW(gradsync_examples::check_pair(train_images, train_labels, files.train_images, files.train_labels, 10));
    CHECK_NOTHROW(gradsync_examples::check_pair(test_images, test_labels, files.test_images, files.test_labels, 10));

    std::array<std::size_t, 10> per_class{};
    for (const std::uint8_t label : train_labels.data)
        if (label < per_class.size())
            ++per_class[label];
    for (std::size_t c = 0; c < per_class.size(); ++c) {
        INFO("class " << c);
        CHECK(per_class[c] == 6000);
    }
}
