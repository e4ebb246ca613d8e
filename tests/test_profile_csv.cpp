// The profile CSV format (docs/planner.md): exact round trips, the tolerated variations (column
// order, extra columns, CRLF, blank lines, blanks around fields, a byte order mark), every
// error, each located as "FILE:LINE:COLUMN:", the limits on lines and columns that keep
// reading bounded, and error messages that stay one short line whatever the input holds.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <streambuf>
#include <string>
#include <utility>
#include <vector>

#include <gradsync/planner/profile_csv.hpp>

namespace {

namespace gp = gradsync::planner;
using Catch::Matchers::Contains;

gp::profile read(const std::string& text)
{
    std::istringstream in(text);
    return gp::read_profile_csv(in, "file.csv");
}

std::string write(const gp::profile& p)
{
    std::ostringstream out;
    gp::write_profile_csv(out, p);
    return out.str();
}

bool same(const gp::profile& x, const gp::profile& y)
{
    if (x.size() != y.size())
        return false;
    for (std::size_t l = 0; l < x.size(); ++l)
        if (x[l].name != y[l].name || x[l].params != y[l].params || x[l].backward_s != y[l].backward_s ||
            x[l].forward_s != y[l].forward_s)
            return false;
    return true;
}

// The message of the profile_error that reading `text` throws ("" if none).
std::string error_of(const std::string& text)
{
    try {
        read(text);
    } catch (const gp::profile_error& e) {
        return e.what();
    }
    return "";
}

// An endless input, `pattern` over and over, that counts the bytes it has handed out.
class endless_input : public std::streambuf {
public:
    explicit endless_input(const std::string& pattern)
    {
        for (std::size_t i = 0; i < chunk_.size(); ++i)
            chunk_[i] = pattern[i % pattern.size()];
    }
    std::size_t served() const { return served_; }

protected:
    int_type underflow() override
    {
        served_ += chunk_.size();
        setg(chunk_.data(), chunk_.data(), chunk_.data() + chunk_.size());
        return traits_type::to_int_type(chunk_[0]);
    }

private:
    std::array<char, 4096> chunk_{};
    std::size_t served_ = 0;
};

// The message of reading an endless input, and how much of it was read.
std::pair<std::string, std::size_t> error_of_endless(const std::string& pattern)
{
    endless_input source(pattern);
    std::istream in(&source);
    try {
        gp::read_profile_csv(in, "endless.csv");
    } catch (const gp::profile_error& e) {
        return {e.what(), source.served()};
    }
    return {"", source.served()};
}

// A header of `columns` distinct columns, the required ones first.
std::string wide_header(std::size_t columns)
{
    std::string h = "name,params,backward_ms";
    for (std::size_t c = 3; c < columns; ++c)
        h += ",x" + std::to_string(c);
    return h;
}

} // namespace

TEST_CASE("profile csv: write then read gives the identical profile", "[profile_csv]")
{
    const gp::profile with_forward{{"conv1", 9408, 0.004551, 0.028668},
                                   {"bn1", 128, 0.007145, 0.005507},
                                   {"fc", 2049000, 1.0 / 3, 0.1},
                                   {"", 0, 0.0, 0.0}};
    const std::string text = write(with_forward);
    CHECK(text.rfind("name,params,forward_ms,backward_ms\n", 0) == 0);
    CHECK_THAT(text, Contains("conv1,9408,28.668,4.551\n"));
    CHECK(same(read(text), with_forward));

    gp::profile partly = with_forward;
    partly[2].forward_s.reset(); // an empty forward_ms field: not measured
    const std::string some = write(partly);
    CHECK_THAT(some, Contains("fc,2049000,,"));
    CHECK(same(read(some), partly));

    gp::profile none = with_forward;
    for (gp::layer_profile& l : none)
        l.forward_s.reset(); // no layer has one: no forward_ms column
    const std::string without = write(none);
    CHECK(without.rfind("name,params,backward_ms\n", 0) == 0);
    CHECK(same(read(without), none));
    CHECK(read(write({})).empty());
}

TEST_CASE("profile csv: every finite non-negative double survives the trip through milliseconds", "[profile_csv]")
{
    std::mt19937_64 rng(11);
    gp::profile p;
    for (double s : {0.0, 5e-324, 2.2250738585072014e-308, 1e-3, 0.1, 1.0 / 3, 123456.789, 1e300,
                     std::numeric_limits<double>::max()})
        p.push_back({"fixed", 1, s, s});
    while (p.size() < 3000) {
        const double s = std::bit_cast<double>(rng() >> 1); // sign bit clear
        if (std::isfinite(s))
            p.push_back({"random", rng() >> 1, s, std::bit_cast<double>(rng() >> 1)});
        if (!std::isfinite(*p.back().forward_s))
            p.back().forward_s = 0.5;
    }
    CHECK(same(read(write(p)), p));
}

TEST_CASE("profile csv: milliseconds become seconds rounded once", "[profile_csv]")
{
    const gp::profile p = read("name,params,backward_ms,forward_ms\n"
                               "a,1,1.5,2e3\n"
                               "b,2,.5,0.001\n"
                               "c,3,7,\n");
    REQUIRE(p.size() == 3);
    CHECK(p[0].backward_s == 1.5e-3);
    CHECK(p[0].forward_s == 2.0);
    CHECK(p[1].backward_s == 0.5e-3);
    CHECK(p[1].forward_s == 1e-6);
    CHECK(p[2].backward_s == 7e-3);
    CHECK_FALSE(p[2].forward_s.has_value()); // an empty optional field: not measured
    CHECK(p[2].params == 3);
}

TEST_CASE("profile csv: columns in any order, extra columns, CRLF, blanks and a byte order mark", "[profile_csv]")
{
    const gp::profile expected{{"conv", 10, 0.002, std::nullopt}, {"fc", 20, 0.0005, std::nullopt}};
    CHECK(same(read("name,params,backward_ms\nconv,10,2\nfc,20,0.5\n"), expected));
    CHECK(same(read("name,params,backward_ms\nconv,10,2\nfc,20,0.5"), expected)); // no final newline
    CHECK(same(read("backward_ms,kind,params,name\n2,x,10,conv\n0.5,y,20,fc\n"), expected));
    CHECK(same(read("name,params,backward_ms\r\nconv,10,2\r\nfc,20,0.5\r\n"), expected));
    CHECK(same(read("\nname, params ,backward_ms\n\nconv , 10,\t2\n  \nfc,20,0.5\n\n"), expected));
    CHECK(same(read("\xEF\xBB\xBFname,params,backward_ms\nconv,10,2\nfc,20,0.5\n"), expected));
    CHECK(read("name,params,backward_ms\n").empty()); // a header alone: no layers
}

TEST_CASE("profile csv: each error names file, line and column", "[profile_csv]")
{
    struct bad {
        const char* text;
        const char* location;
        const char* says;
    };
    const std::vector<bad> cases{
        {"", "file.csv:1:1: ", "empty file"},
        {"\n\r\n", "file.csv:1:1: ", "empty file"},
        {"params,backward_ms\n1,1\n", "file.csv:1:1: ", "missing required column 'name'"},
        {"name,backward_ms\na,1\n", "file.csv:1:1: ", "missing required column 'params'"},
        {"name,params,forward_ms\na,1,1\n", "file.csv:1:1: ", "missing required column 'backward_ms'"},
        {"\nname,params\n", "file.csv:2:1: ", "missing required column 'backward_ms'"},
        {"name,params,backward_ms,params\n", "file.csv:1:25: ", "duplicate column 'params'"},
        {"name,params,backward_ms\na,1,1\nb,x,3\n", "file.csv:3:3: ", "params 'x' is not a non-negative integer"},
        {"name,params,backward_ms\na,1,1\nb,1.5,3\n", "file.csv:3:3: ", "params '1.5' is not a non-negative"},
        {"name,params,backward_ms\na,-3,1\n", "file.csv:2:3: ", "params '-3' is not a non-negative"},
        {"name,params,backward_ms\na,+3,1\n", "file.csv:2:3: ", "params '+3' is not a non-negative"},
        {"name,params,backward_ms\na,,1\n", "file.csv:2:3: ", "params is empty"},
        {"name,params,backward_ms\na,99999999999999999999,1\n", "file.csv:2:3: ", "does not fit in 64 bits"},
        {"name,params,backward_ms\na,1,1\nbb,2,fast\n", "file.csv:3:6: ", "backward_ms 'fast' is not a number"},
        {"name,params,backward_ms\na,1,1e\n", "file.csv:2:5: ", "backward_ms '1e' is not a number"},
        {"name,params,backward_ms\na,1,1.2.3\n", "file.csv:2:5: ", "is not a number"},
        {"name,params,backward_ms\na,1,-0.5\n", "file.csv:2:5: ", "backward_ms '-0.5' is negative"},
        {"name,params,backward_ms\na,1,nan\n", "file.csv:2:5: ", "backward_ms 'nan' is not finite"},
        {"name,params,backward_ms\na,1,-inf\n", "file.csv:2:5: ", "'-inf' is not finite"},
        {"name,params,backward_ms\na,1,1e400\n", "file.csv:2:5: ", "out of the range"},
        {"name,params,backward_ms\na,1,\n", "file.csv:2:5: ", "backward_ms is empty"},
        {"name,forward_ms,params,backward_ms\na,Infinity,1,1\n", "file.csv:2:3: ", "forward_ms 'Infinity' is not finite"},
        {"name,forward_ms,params,backward_ms\na,-1,1,1\n", "file.csv:2:3: ", "forward_ms '-1' is negative"},
        {"name,params,backward_ms\na,1,1\nb,2\n", "file.csv:3:4: ", "row has 2 fields, the header has 3"},
        {"name,params,backward_ms\na,1,1,7\n", "file.csv:2:6: ", "row has 4 fields, the header has 3"},
        {"name,params,backward_ms\n\"a\",1,1\n", "file.csv:2:1: ", "quoted fields are not supported"},
        {"name,params,backward_ms\na\"b,1,1\n", "file.csv:2:2: ", "quoted fields are not supported"},
        {"name,params,backward_ms\nab\rc,1,1\r\n", "file.csv:2:3: ", "carriage return inside a line"},
        {"name,params,backward_ms\r\na,1,1\r\nb,2,x\r\n", "file.csv:3:5: ", "backward_ms 'x' is not a number"},
        {"\xEF\xBB\xBFname,params,backward_ms\n", "file.csv:1:1: ", nullptr},
        {"\xEF\xBB\xBFname,params,params\n", "file.csv:1:16: ", "duplicate column 'params'"},
    };
    for (const bad& c : cases) {
        INFO("input: " << c.text);
        const std::string message = error_of(c.text);
        if (!c.says) {
            CHECK(message.empty());
            continue;
        }
        CHECK(message.rfind(c.location, 0) == 0);
        CHECK_THAT(message, Contains(c.says));
        CHECK(message.find('\n') == std::string::npos);
    }
}

TEST_CASE("profile csv: a line holds at most max_profile_line_bytes bytes, and reading stops there", "[profile_csv]")
{
    const std::size_t limit = gp::max_profile_line_bytes;
    REQUIRE(limit == 65536);
    const std::string header = "name,params,backward_ms\n";
    const std::string row_end = ",1,1";
    const std::string longest_name(limit - row_end.size(), 'n');
    const gp::profile p = read(header + longest_name + row_end + "\n" + "fc,2,2");
    REQUIRE(p.size() == 2);
    CHECK(p[0].name == longest_name);
    CHECK(read(header + longest_name.substr(1) + row_end + "\r\n").size() == 1); // the CR counts
    CHECK(read(header + longest_name + row_end).size() == 1);                   // no final line feed

    const std::string message = error_of(header + longest_name + "n" + row_end + "\nfc,2,2\n");
    CHECK(message.rfind("file.csv:2:65537: ", 0) == 0);
    CHECK_THAT(message, Contains("line is longer than the limit of 65536 bytes"));
    CHECK(error_of(header + longest_name + row_end + "\r\n").rfind("file.csv:2:65537: ", 0) == 0);

    // Input without end: refused after one line's worth, whatever the bytes.
    for (const std::string& pattern : std::vector<std::string>{"n", "name,", "a,1,1,", {'\0'}, {'x', '\0'}}) {
        INFO("pattern of " << pattern.size() << " bytes");
        const auto [what, served] = error_of_endless(pattern);
        CHECK(what.rfind("endless.csv:1:", 0) == 0);
        CHECK(served <= limit + 2 * 4096);
        CHECK(what.size() < 200);
    }
    CHECK_THAT(error_of_endless("n").first, Contains("endless.csv:1:65537: line is longer than the limit"));
    CHECK_THAT(error_of_endless({'\0'}).first, Contains("endless.csv:1:1: NUL byte"));
    CHECK_THAT(error_of_endless({'x', '\0'}).first, Contains("endless.csv:1:2: NUL byte"));
}

TEST_CASE("profile csv: at most max_profile_columns columns, a header read in one pass", "[profile_csv]")
{
    const std::size_t most = gp::max_profile_columns;
    REQUIRE(most == 256);
    std::string row = "conv,10,2";
    for (std::size_t c = 3; c < most; ++c)
        row += ",v";
    const gp::profile p = read(wide_header(most) + "\n" + row + "\n");
    REQUIRE(p.size() == 1);
    CHECK(p[0].params == 10);
    CHECK(p[0].backward_s == 0.002);

    const std::string too_wide = wide_header(most + 1);
    const std::size_t extra_comma = too_wide.rfind(',') + 1;
    const std::string message = error_of(too_wide + "\n" + row + ",v\n");
    CHECK(message.rfind("file.csv:1:" + std::to_string(extra_comma) + ": ", 0) == 0);
    CHECK_THAT(message, Contains("header has more than 256 columns"));

    // A row with many more fields than the header: counted up to the limit, no further.
    std::string long_row = "conv,10,2";
    for (int c = 0; c < 30000; ++c)
        long_row += ",7";
    CHECK_THAT(error_of("name,params,backward_ms\n" + long_row + "\n"),
               Contains("file.csv:2:10: row has more than 256 fields, the header has 3"));

    // Duplicates are found among many columns, the first occurrence named.
    CHECK_THAT(error_of(wide_header(most - 1) + ",x200\n"), Contains("duplicate column 'x200' (also field 201)"));

    // The widest headers there are: 65536 bytes of commas (65537 empty fields) stop at the
    // column limit, a 100 000-column header (889 KB) at the line limit. A quadratic header
    // would run into the test's timeout.
    CHECK_THAT(error_of(std::string(gp::max_profile_line_bytes, ',') + "\n"),
               Contains("file.csv:1:256: header has more than 256 columns"));
    std::string huge = "name,params,backward_ms";
    for (int c = 3; c < 100000; ++c)
        huge += ",column" + std::to_string(c);
    REQUIRE(huge.size() > 880000);
    CHECK_THAT(error_of(huge + "\nconv,1,1\n"), Contains("file.csv:1:65537: line is longer than the limit"));
}

TEST_CASE("profile csv: a NUL byte is refused by line and column, the message whole", "[profile_csv]")
{
    using namespace std::string_literals;
    const std::string in_name = error_of("name,params,backward_ms\nco\0nv,1,1\n"s);
    CHECK(in_name == "file.csv:2:3: NUL byte (a profile is text)");
    CHECK(error_of("name,para\0ms,backward_ms\n"s).rfind("file.csv:1:10: NUL byte", 0) == 0);
    CHECK(error_of("\xEF\xBB\xBF\0name,params,backward_ms\n"s).rfind("file.csv:1:4: NUL byte", 0) == 0);
    CHECK(error_of("name,params,backward_ms\na,1,1\n\0"s).rfind("file.csv:3:1: NUL byte", 0) == 0);
}

TEST_CASE("profile csv: errors quote input escaped and cut short", "[profile_csv]")
{
    // Control bytes, bytes above ASCII, quotes and backslashes escaped; the message one line.
    const std::string escaped = error_of("name,params,backward_ms\na,1\x01\x1b[31m\xff'\\,1\n");
    CHECK_THAT(escaped, Contains(R"(params '1\x01\x1b[31m\xff\'\\' is not a non-negative integer)"));
    CHECK(std::all_of(escaped.begin(), escaped.end(), [](char c) { return c >= 0x20 && c < 0x7f; }));
    CHECK_THAT(error_of("name,params,backward_ms,t\x7f,t\x7f\n"), Contains("duplicate column 't\\x7f' (also field 4)"));

    // A field of any length: its first 40 bytes, "..." and its length.
    const std::string field = std::string(60000, '9') + "x";
    const std::string cut = error_of("name,params,backward_ms\na," + field + ",1\n");
    CHECK(cut == "file.csv:2:3: params '" + std::string(40, '9') + "...' (60001 bytes) is not a non-negative integer "
                                                                     "(digits only, no sign or decimal point)");
    CHECK(error_of("name,params,backward_ms\na,1," + std::string(40, '5') + "x\n").size() < 150); // 41 bytes: cut
    CHECK_THAT(error_of("name,params,backward_ms\na,1," + std::string(39, '5') + "x\n"),
               Contains("'" + std::string(39, '5') + "x' is not a number")); // 40 bytes: whole

    // Layer names in the planner's own errors, and their numbers in shortest form.
    const std::string name = std::string(5000, 'L') + "\n";
    CHECK_THROWS_WITH(gp::layer_bytes({{name, std::numeric_limits<std::uint64_t>::max(), 1.0, {}}}, 4),
                      Contains("layer 0 ('" + std::string(40, 'L') + "...' (5001 bytes)): the gradient bytes"));
    CHECK_THROWS_WITH(gp::validate_profile({{"a\tb", 1, -1e300, {}}}),
                      Contains("layer 0 ('a\\x09b') has backward time -1e+300 s"));
    std::ostringstream out;
    CHECK_THROWS_WITH(gp::write_profile_csv(out, {{name, 1, 1.0, {}}}), Contains("...' (5001 bytes) has a comma"));
}

TEST_CASE("profile csv: a path is read only when it is a regular file", "[profile_csv]")
{
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path();
    CHECK_THROWS_WITH(gp::read_profile_csv(dir), Contains(dir.string() + ": is a directory, not a regular file"));
    CHECK_THROWS_AS(gp::read_profile_csv(dir), gp::profile_error);
    if (fs::exists("/dev/zero"))
        CHECK_THROWS_WITH(gp::read_profile_csv("/dev/zero"), Contains("/dev/zero: is a character device"));

    // Opening a FIFO would wait for a writer: refused before.
    const fs::path fifo = dir / ("gradsync_profile_fifo_" + std::to_string(std::random_device{}()));
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK_THROWS_WITH(gp::read_profile_csv(fifo), Contains(fifo.string() + ": is a FIFO (named pipe)"));
    fs::remove(fifo);
}

TEST_CASE("profile csv: a file on disk reads back, a missing one is named", "[profile_csv]")
{
    const std::filesystem::path missing = std::filesystem::temp_directory_path() / "gradsync_no_such_profile.csv";
    std::filesystem::remove(missing);
    CHECK_THROWS_WITH(gp::read_profile_csv(missing), Contains(missing.string() + ": cannot open"));
    CHECK_THROWS_AS(gp::read_profile_csv(missing), gradsync::usage_error);

    const std::filesystem::path file =
        std::filesystem::temp_directory_path() / ("gradsync_profile_" + std::to_string(std::random_device{}()) + ".csv");
    const gp::profile p{{"conv", 10, 0.25, 0.125}, {"fc", 20, 0.5, 1.0}};
    {
        std::ofstream out(file, std::ios::binary);
        gp::write_profile_csv(out, p);
    }
    const gp::profile back = gp::read_profile_csv(file);
    std::filesystem::remove(file);
    CHECK(same(back, p));

    std::ofstream bad_file(file, std::ios::binary);
    bad_file << "name,params,backward_ms\nconv,1,x\n";
    bad_file.close();
    CHECK_THROWS_WITH(gp::read_profile_csv(file), Contains(file.string() + ":2:8: backward_ms 'x'"));
    std::filesystem::remove(file);
}

TEST_CASE("profile csv: profiles that cannot be written are refused", "[profile_csv]")
{
    std::ostringstream out;
    CHECK_THROWS_WITH(gp::write_profile_csv(out, {{"a,b", 1, 1.0, {}}}), Contains("layer 0's name 'a,b'"));
    CHECK_THROWS_AS(gp::write_profile_csv(out, {{"x", 1, 1.0, {}}, {"\"q\"", 1, 1.0, {}}}), gradsync::usage_error);
    CHECK_THROWS_AS(gp::write_profile_csv(out, {{" padded", 1, 1.0, {}}}), gradsync::usage_error);
    CHECK_THROWS_AS(gp::write_profile_csv(out, {{"line\nbreak", 1, 1.0, {}}}), gradsync::usage_error);
    CHECK_THROWS_WITH(gp::write_profile_csv(out, {{"ok", 1, 1.0, {}}, {"neg", 1, -1.0, {}}}),
                      Contains("layer 1 ('neg')"));
    CHECK_THROWS_AS(gp::write_profile_csv(out, {{"inf", 1, 1.0, std::numeric_limits<double>::infinity()}}),
                    gradsync::usage_error);
}
