// What a configuration of `user-run --explore` runs (cli/ExplorationTrials):
// the generic handler only when no specialization is switched on; any pass
// or point switched on specializes by itself, the passes not switched on
// left out.
#include "cli/ExplorationTrials.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace morpheus::cli {
namespace {

using namespace dimension;

bool leftOut(const TrialPlan &plan, const std::string &pass) {
  return std::find(plan.passesLeftOut.begin(), plan.passesLeftOut.end(), pass) !=
         plan.passesLeftOut.end();
}

TEST(ExplorationTrials, TheBaselineRunsTheGenericHandler) {
  TrialPlan plan = planTrial({{Burst, 32}}, "dir24", {"mode"}, {});
  EXPECT_FALSE(plan.specialize);
  EXPECT_EQ(plan.burst, 32u);
  EXPECT_EQ(plan.subBatch, 0u);
  EXPECT_FALSE(plan.otherLpm);
  EXPECT_TRUE(plan.points.empty());
}

TEST(ExplorationTrials, APassOrPointSwitchedOnAloneSpecializes) {
  // The routes as code alone: specialized with lpm-as-code, the other LPM
  // pass and the generator left out (before, this ran the generic handler).
  TrialPlan code = planTrial({{Burst, 16}, {LpmAsCode, 1}}, "dir24", {}, {"constant-fields"});
  EXPECT_TRUE(code.specialize);
  EXPECT_FALSE(leftOut(code, "lpm-as-code"));
  EXPECT_TRUE(leftOut(code, "lpm-as-array"));
  EXPECT_TRUE(leftOut(code, "custom-generator"));
  EXPECT_TRUE(leftOut(code, "constant-fields")); // --no-pass holds in every trial
  // A handler's point alone: specialized with that point.
  TrialPlan point = planTrial({{Burst, 16}, {"mode", 2}}, "dir24", {"mode"}, {});
  EXPECT_TRUE(point.specialize);
  EXPECT_EQ(point.points, (core::PointConfiguration{{"mode", 2}}));
  // The other LPM kind and prefetching alone change the generic handler's
  // build and loop, not whether it is specialized.
  TrialPlan other = planTrial({{Burst, 8}, {otherLpm("dir24"), 1}, {Prefetch, 4}}, "dir24", {}, {});
  EXPECT_FALSE(other.specialize);
  EXPECT_TRUE(other.otherLpm);
  EXPECT_EQ(other.subBatch, 4u);
  EXPECT_EQ(otherLpm("linear"), "lpm_dir24");
}

TEST(ExplorationTrials, SpecializedAloneLeavesTheOptionalPassesOut) {
  TrialPlan plan = planTrial({{Burst, 32}, {Specialized, 1}}, "linear", {}, {});
  EXPECT_TRUE(plan.specialize);
  EXPECT_TRUE(leftOut(plan, "lpm-as-code"));
  EXPECT_TRUE(leftOut(plan, "lpm-as-array"));
  EXPECT_TRUE(leftOut(plan, "custom-generator"));
}

} // namespace
} // namespace morpheus::cli
