// The layer-merge planner's model (docs/planner.md): profiles and their CSV form, cost models,
// the timeline simulation, the planners (wfbp, single, bucket, mgwfbp, optimal) and the SVG
// picture. Pure computation; the calibration routine, which communicates, is included by
// name: <gradsync/runtime/calibration.hpp>.
#pragma once

#include <gradsync/planner/bucket.hpp>
#include <gradsync/planner/cost_model.hpp>
#include <gradsync/planner/merge_plan.hpp>
#include <gradsync/planner/mgwfbp.hpp>
#include <gradsync/planner/optimal.hpp>
#include <gradsync/planner/profile.hpp>
#include <gradsync/planner/profile_csv.hpp>
#include <gradsync/planner/single.hpp>
#include <gradsync/planner/svg.hpp>
#include <gradsync/planner/timeline.hpp>
#include <gradsync/planner/wfbp.hpp>
