// Fuzzes the profile CSV reader: any text either reads as a valid profile or throws
// profile_error; a profile read back after writing is identical; planning it either works,
// with the optimum never worse than MG-WFBP, or is refused with a usage_error.
#include <gradsync/planner.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

namespace {

void require(bool ok)
{
    if (!ok)
        std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    namespace p = gradsync::planner;
    std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
    p::profile prof;
    try {
        prof = p::read_profile_csv(in, "fuzz.csv");
    } catch (const p::profile_error& e) {
        require(std::string(e.what()).rfind("fuzz.csv", 0) == 0); // the message names the file
        return 0;
    }
    for (const p::layer_profile& l : prof) {
        require(std::isfinite(l.backward_s) && l.backward_s >= 0);
        require(!l.forward_s || (std::isfinite(*l.forward_s) && *l.forward_s >= 0));
    }
    std::ostringstream out;
    p::write_profile_csv(out, prof);
    std::istringstream back(out.str());
    const p::profile again = p::read_profile_csv(back, "written.csv");
    require(again.size() == prof.size());
    for (std::size_t i = 0; i < prof.size(); ++i)
        require(again[i].params == prof[i].params && again[i].backward_s == prof[i].backward_s &&
                again[i].forward_s == prof[i].forward_s);

    const p::linear_cost cost{1e-4, 1e-9};
    try {
        const double greedy = p::simulate(prof, p::mgwfbp(prof, cost), cost).predicted_s;
        const double best = p::simulate(prof, p::optimal(prof, cost), cost).predicted_s;
        require(best <= greedy * (1 + 1e-12));
    } catch (const gradsync::usage_error&) {
        // A profile the planner refuses (its byte count overflows): refused by name, fine.
    }
    return 0;
}
