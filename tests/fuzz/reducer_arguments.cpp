// Fuzzes the reducer's argument checks over a local_group of 1..3 ranks: for any count, layer
// sizes (overflowing sums included), algorithm, policy, element type and buffer size, the
// reducer works on every rank exactly when the rules restated below say the arguments are
// valid, and throws gradsync::usage_error on every rank otherwise. Nothing else may escape,
// hang or crash.
#include <gradsync/gradsync.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <span>
#include <vector>

namespace {

// Reads the input front to back; past its end every value is zero.
struct reader {
    const std::uint8_t* p;
    std::size_t left;

    std::uint64_t take(std::size_t bytes)
    {
        std::uint64_t v = 0;
        for (std::size_t i = 0; i < bytes; ++i)
            v = v << 8 | (left ? (--left, *p++) : 0);
        return v;
    }
};

enum class outcome : int { ok, usage, other };

template <class F>
void with_algorithm(unsigned which, unsigned ranks_per_node, F&& f)
{
    switch (which % 5) {
    case 0: f(gradsync::ring{}); break;
    case 1: f(gradsync::recursive_halving{}); break;
    case 2: f(gradsync::recursive_doubling{}); break;
    case 3: f(gradsync::automatic{}); break;
    default: f(gradsync::hierarchical{.ranks_per_node = int(ranks_per_node % 5)}); break;
    }
}

template <class F>
void with_policy(unsigned which, F&& f)
{
    switch (which % 3) {
    case 0: f(gradsync::sum{}); break;
    case 1: f(gradsync::average{}); break;
    default: f(gradsync::adasum{}); break;
    }
}

template <class F>
void with_type(unsigned which, F&& f)
{
    switch (which % 4) {
    case 0: f(gradsync::half{}); break;
    case 1: f(gradsync::bfloat16{}); break;
    case 2: f(float{}); break;
    default: f(double{}); break;
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    reader in{data, size};
    const int ranks = 1 + int(in.take(1) % 3);
    const unsigned algorithm = unsigned(in.take(1)), rpn = unsigned(in.take(1)), policy = unsigned(in.take(1)),
                   type = unsigned(in.take(1));
    int slack = int(in.take(1) % 3) - 1; // the buffer: one short, exact or one long
    // Counts and sizes either small (real buffers) or anywhere in 64 bits (the checks).
    auto quantity = [&] { return in.take(1) % 2 ? std::size_t(in.take(2)) : std::size_t(in.take(8)); };
    const std::size_t count = quantity();
    if (count == 0 && slack < 0)
        slack = 1;
    std::vector<std::size_t> layers(in.take(1) % 6);
    for (std::size_t& l : layers)
        l = quantity();
    // The rules, restated: the sizes must add up to the count without overflow (no sizes:
    // one layer), and hierarchical's ranks_per_node (0: the group's size) must divide N.
    bool valid = true;
    std::size_t sum = 0;
    for (std::size_t l : layers) {
        valid = valid && sum + l >= sum;
        sum += l;
    }
    valid = valid && (layers.empty() || sum == count);
    if (algorithm % 5 == 4 && rpn % 5 != 0)
        valid = valid && ranks % int(rpn % 5) == 0;
    constexpr std::size_t most = std::size_t(1) << 18; // elements a rank may allocate
    if (valid && count > most)
        return 0; // valid, but more than the fuzzer should allocate

    std::vector<outcome> built(std::size_t(ranks), outcome::other), called(std::size_t(ranks), outcome::other);
    gradsync::local_group group(ranks);
    group.run([&](gradsync::local_communicator& comm) {
        const auto r = std::size_t(comm.rank());
        with_type(type, [&](auto t) {
            using T = decltype(t);
            with_policy(policy, [&](auto p) {
                with_algorithm(algorithm, rpn, [&](auto a) {
                    using R = gradsync::reducer<T, gradsync::local_communicator, decltype(p), decltype(a)>;
                    try {
                        R reduce(comm, count, layers, a);
                        built[r] = outcome::ok;
                        std::vector<T> buffer(reduce.count() + std::size_t(slack), T(1.0f));
                        try {
                            reduce(std::span<T>(buffer));
                            called[r] = outcome::ok;
                        } catch (const gradsync::usage_error&) {
                            called[r] = outcome::usage;
                        }
                    } catch (const gradsync::usage_error&) {
                        built[r] = outcome::usage;
                    }
                });
            });
        });
    });
    for (int r = 0; r < ranks; ++r) {
        const auto i = std::size_t(r);
        if (built[i] != (valid ? outcome::ok : outcome::usage))
            std::abort();
        if (valid && called[i] != (slack == 0 ? outcome::ok : outcome::usage))
            std::abort(); // a wrong-sized buffer accepted, or a right one refused
    }
    return 0;
}
