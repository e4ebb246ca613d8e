// What rank 0 prints: one run's "result ..." line for scripts, and the scheduling study's
// tables, with the measured profile written to profile.csv for gradsync-plan.
#pragma once

#include <gradsync/planner/profile.hpp>
#include <gradsync/planner/profile_csv.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "options.hpp"
#include "output.hpp"
#include "schedule_study.hpp"
#include "train.hpp"

namespace fashion_mnist {

inline void print_result(const options& o, int ranks, const outcome& r)
{
    std::printf("result policy=%s reduce=%s compress=%s ranks=%d seed=%llu epochs=%d lr=%g test_accuracy=%.4f "
                "parameters=%016llx seconds=%.1f\n",
                o.policy.c_str(), o.reduce.c_str(), o.compress.c_str(), ranks, static_cast<unsigned long long>(o.seed), o.epochs, o.lr,
                r.test_accuracy, static_cast<unsigned long long>(r.parameters), r.seconds);
    std::fflush(stdout);
}

inline void print_schedule(const options& o, std::int64_t ranks, const gradsync_examples::schedule_result& result)
{
    const auto ms = [](double s) { return 1e3 * s; };
    std::printf("scheduling study: %lld ranks, batch %d per rank, link %.3g ms per message + %.3g ns per byte; "
                "calibrated T(M) = %.3f ms + %.3f ns/B x M (rms %.3f ms); %.3f ms from backward to the first hook\n\n",
                static_cast<long long>(ranks), o.batch, ms(o.schedule.link.alpha), 1e9 * o.schedule.link.beta,
                ms(result.fit.cost.a), 1e9 * result.fit.cost.b, ms(result.fit.residual_rms_s),
                ms(result.before_first_hook_s));
    std::printf("| layer | parameters | backward ms |\n|---|---:|---:|\n");
    for (const gradsync::planner::layer_profile& l : result.profile)
        std::printf("| %s | %llu | %.3f |\n", l.name.c_str(), static_cast<unsigned long long>(l.params),
                    ms(l.backward_s));
    const double plain_s = result.rows.back().measured_s;
    std::printf("\n| method | groups | predicted ms | measured ms | measured / predicted | speedup over allreduce after "
                "backward | synchronize() returned ms |\n|---|---:|---:|---:|---:|---:|---:|\n");
    for (const gradsync_examples::schedule_row& row : result.rows) {
        std::string groups = row.groups.empty() ? std::to_string(result.profile.size()) + " calls after"
                                                : std::to_string(row.groups.size()) + ":";
        for (const std::vector<std::size_t>& g : row.groups) { // appended piece by piece: g++ 12 misreads
            groups.append(" ").append(std::to_string(g.back()));   // a chain of + as an overlapping copy
            if (g.size() > 1)
                groups.append("..").append(std::to_string(g.front()));
        }
        std::printf("| %s | %s | %.2f | %.2f | %.3f | %.2fx | %.2f |\n", row.method.c_str(), groups.c_str(),
                    ms(row.predicted_s), ms(row.measured_s), row.measured_s / row.predicted_s,
                    plain_s / row.measured_s, ms(row.returned_s));
    }
    const std::filesystem::path file = o.out / "profile.csv";
    std::ofstream out = gradsync_examples::open_output(file);
    gradsync::planner::write_profile_csv(out, result.profile);
    gradsync_examples::close_output(out, file);
    std::printf("\nthe profile: %s\n", file.string().c_str());
}

} // namespace fashion_mnist
