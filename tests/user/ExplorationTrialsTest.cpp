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

const std::vector<std::string> Kinds = {"dir24", "linear", "rte"};

bool leftOut(const TrialPlan &plan, const std::string &pass) {
  return std::find(plan.passesLeftOut.begin(), plan.passesLeftOut.end(), pass) !=
         plan.passesLeftOut.end();
}

TEST(ExplorationTrials, TheBaselineRunsTheGenericHandler) {
  TrialPlan plan = planTrial({{Burst, 32}}, "dir24", Kinds, {"mode"}, {});
  EXPECT_FALSE(plan.specialize);
  EXPECT_EQ(plan.burst, 32u);
  EXPECT_EQ(plan.subBatch, 0u);
  EXPECT_EQ(plan.lpm, "dir24");
  EXPECT_TRUE(plan.points.empty());
}

TEST(ExplorationTrials, APassOrPointSwitchedOnAloneSpecializes) {
  // The routes as code alone: specialized with lpm-as-code, the other LPM
  // pass and the generator left out (before, this ran the generic handler).
  TrialPlan code = planTrial({{Burst, 16}, {LpmAsCode, 1}}, "dir24", Kinds, {}, {"constant-fields"});
  EXPECT_TRUE(code.specialize);
  EXPECT_FALSE(leftOut(code, "lpm-as-code"));
  EXPECT_TRUE(leftOut(code, "lpm-as-array"));
  EXPECT_TRUE(leftOut(code, "custom-generator"));
  EXPECT_TRUE(leftOut(code, "constant-fields")); // --no-pass holds in every trial
  // A handler's point alone: specialized with that point.
  TrialPlan point = planTrial({{Burst, 16}, {"mode", 2}}, "dir24", Kinds, {"mode"}, {});
  EXPECT_TRUE(point.specialize);
  EXPECT_EQ(point.points, (core::PointConfiguration{{"mode", 2}}));
  // The other LPM kind and prefetching alone change the generic handler's
  // build and loop, not whether it is specialized.
  TrialPlan other = planTrial({{Burst, 8}, {Lpm, 2}, {Prefetch, 4}}, "dir24", Kinds, {}, {});
  EXPECT_FALSE(other.specialize);
  EXPECT_EQ(other.lpm, "rte");
  EXPECT_EQ(other.subBatch, 4u);
}

TEST(ExplorationTrials, SpecializedAloneLeavesTheOptionalPassesOut) {
  TrialPlan plan = planTrial({{Burst, 32}, {Specialized, 1}}, "linear", Kinds, {}, {});
  EXPECT_TRUE(plan.specialize);
  EXPECT_TRUE(leftOut(plan, "lpm-as-code"));
  EXPECT_TRUE(leftOut(plan, "lpm-as-array"));
  EXPECT_TRUE(leftOut(plan, "custom-generator"));
}

// The LPM template: one dimension whose values are the kinds other than
// --lpm's, named by them (greedy and exhaustive search never switch on two
// kinds at once), and a trial runs the handler of the kind it names.
TEST(ExplorationTrials, TheLpmDimensionOffersTheOtherKindsByName) {
  user::Dimension lpm = lpmDimension(Kinds, "linear");
  EXPECT_EQ(lpm.name, Lpm);
  EXPECT_EQ(lpm.values, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(lpm.valueNames, (std::vector<std::string>{"dir24", "rte"}));
  EXPECT_EQ(user::describe({{Burst, 8}, {Lpm, 2}}, {lpm}), "burst=8 lpm=rte");
  EXPECT_EQ(user::describe({{Burst, 8}, {Lpm, 2}}), "burst=8 lpm=2");
  for (size_t i = 0; i < lpm.values.size(); ++i)
    EXPECT_EQ(planTrial({{Burst, 8}, {Lpm, lpm.values[i]}}, "linear", Kinds, {}, {}).lpm,
              lpm.valueNames[i]);
}

} // namespace
} // namespace morpheus::cli
