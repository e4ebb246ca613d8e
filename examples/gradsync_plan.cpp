// gradsync-plan: which layers' gradients to merge into one allreduce, from a layer profile and
// the cost model T(M) = alpha + beta·M (docs/planner.md). Prints a readable plan or one JSON
// object, optionally compares every planner and draws the timeline as SVG.
//
// Every error (bad flags, an unreadable or malformed profile) ends with exit status 2 and one
// line on stderr; nothing is printed on stdout then. A note on stderr, before planning, says
// when a profile is too large for the default planner (optimal_default_layers).
#include <gradsync/planner/cost_model.hpp>
#include <gradsync/planner/profile.hpp>
#include <gradsync/planner/profile_csv.hpp>
#include <gradsync/planner/svg.hpp>

#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "plan_tool/json.hpp"
#include "plan_tool/options.hpp"
#include "plan_tool/planning.hpp"
#include "plan_tool/summary.hpp"

namespace {

using namespace plan_tool;

int run(int argc, char** argv)
{
    const options o = parse_options(argc, argv);
    if (o.help) {
        std::fputs(usage_text, stdout);
        return 0;
    }
    // "-" reads standard input: read_profile_csv(path) takes regular files only.
    const gp::profile p =
        o.profile == "-" ? gp::read_profile_csv(std::cin, "<stdin>") : gp::read_profile_csv(o.profile);
    const gp::linear_cost cost{*o.alpha, *o.beta};
    check_times_finite(p, cost, o.bytes_per_element);

    const method_choice choice = choose_method(o, p.size());
    const planned chosen = run_planner(choice.method, p, cost, o.bytes_per_element);
    const std::vector<planned> compared =
        o.compare ? compare_planners(chosen, choice.optimal_runs, p, cost, o.bytes_per_element) : std::vector<planned>{};

    // Written before anything is printed, so that a failure leaves stdout empty.
    if (!o.svg.empty()) {
        std::ostringstream drawing;
        const std::string title = o.profile + ": " + chosen.method.name + ", alpha " + num(*o.alpha) + " s, beta " +
                                  num(*o.beta) + " s/B";
        gp::write_timeline_svg(drawing, p, chosen.groups, chosen.time, title);
        std::ofstream svg(o.svg, std::ios::binary);
        svg << drawing.str();
        svg.close();
        if (!svg)
            fail("--svg: cannot write '" + o.svg + "'");
    }
    if (o.json)
        print_json(o, p, chosen, compared);
    else
        print_summary(o, p, chosen, compared);
    if (std::fflush(stdout) != 0)
        fail("writing to standard output failed");
    return 0;
}

// One line on stderr, whatever the message holds.
int report(const std::string& what)
{
    std::string line = "gradsync-plan: " + what;
    for (char& c : line)
        if (c == '\n' || c == '\r')
            c = ' ';
    std::fprintf(stderr, "%s\n", line.c_str());
    return 2;
}

} // namespace

int main(int argc, char** argv)
{
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        return report(e.what());
    } catch (...) {
        return report("unknown error");
    }
}
