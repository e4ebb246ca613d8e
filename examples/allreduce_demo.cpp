// Four ranks as threads of this process allreduce a fused gradient buffer of three layers
// with each algorithm and policy, then check every rank against the sum computed here.
#include <gradsync/gradsync.hpp>

#include <cmath>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

namespace {

constexpr int ranks = 4;
const std::vector<std::size_t> layers{1000, 24, 65536};

float gradient(int rank, std::size_t i) { return float(rank + 1) * 0.5f + float(i % 5); }

template <class Policy, class Algorithm>
bool demo(const char* policy, const char* algorithm)
{
    std::size_t count = 0;
    for (std::size_t n : layers)
        count += n;
    std::vector<std::vector<float>> result(ranks);
    gradsync::local_group group(ranks);
    group.run([&](gradsync::local_communicator& comm) {
        std::vector<float> grad(count);
        for (std::size_t i = 0; i < count; ++i)
            grad[i] = gradient(comm.rank(), i);
        gradsync::reducer<float, gradsync::local_communicator, Policy, Algorithm> reduce(comm, layers);
        reduce(std::span<float>(grad));
        result[std::size_t(comm.rank())] = std::move(grad);
    });

    double worst = 0;
    bool identical = true;
    for (std::size_t i = 0; i < count; ++i) {
        double expect = 0;
        for (int r = 0; r < ranks; ++r)
            expect += gradient(r, i);
        if (std::string(policy) == "average")
            expect /= ranks;
        worst = std::max(worst, std::abs(double(result[0][i]) - expect));
        for (int r = 1; r < ranks; ++r)
            identical = identical && result[std::size_t(r)][i] == result[0][i];
    }
    std::printf("  %-8s %-19s grad[0] = %6.2f on every rank, max error %.1e, ranks identical: %s\n", policy,
                algorithm, double(result[0][0]), worst, identical ? "yes" : "NO");
    return identical && worst == 0;
}

} // namespace

int main()
{
    std::printf("gradsync: %d ranks (threads) reduce %zu layers of %zu, %zu and %zu fp32 gradients\n", ranks,
                layers.size(), layers[0], layers[1], layers[2]);
    std::printf("  rank r holds grad[i] = (r+1)/2 + i%%5, so grad[0] sums to %.1f\n",
                double(gradient(0, 0) + gradient(1, 0) + gradient(2, 0) + gradient(3, 0)));
    bool ok = true;
    ok &= demo<gradsync::sum, gradsync::ring>("sum", "ring");
    ok &= demo<gradsync::sum, gradsync::recursive_halving>("sum", "recursive_halving");
    ok &= demo<gradsync::sum, gradsync::recursive_doubling>("sum", "recursive_doubling");
    ok &= demo<gradsync::sum, gradsync::automatic>("sum", "automatic");
    ok &= demo<gradsync::average, gradsync::ring>("average", "ring");
    ok &= demo<gradsync::average, gradsync::automatic>("average", "automatic");
    std::printf(ok ? "all results exact and identical on every rank\n" : "MISMATCH\n");
    return ok ? 0 : 1;
}
