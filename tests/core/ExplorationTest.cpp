// What a measured exploration tries and in which order it serves it
// (core/ExplorationCandidates): the model's version first, one alternative
// per pass that rewrote a site where the model was close, the closest
// first, within the trial budget; slices interleaved with the generic
// program, a version measured slower than it dropped at once, the lowest
// median no slower than it chosen.
#include "core/ExplorationCandidates.h"

#include <gtest/gtest.h>

namespace morpheus::core {
namespace {

SiteDecision rewritten(const std::string &table, Representation chosen,
                       std::vector<CandidateCost> costs, std::string memoryDeclined = "") {
  SiteDecision decision;
  decision.table = table;
  decision.pass = passOf(chosen);
  decision.applied = true;
  RepresentationChoice choice;
  choice.chosen = chosen;
  for (const CandidateCost &cost : costs)
    if (cost.representation == chosen)
      choice.predictedNs = cost.ns;
  choice.candidates = std::move(costs);
  choice.memoryDeclined = std::move(memoryDeclined);
  decision.choice = choice;
  return decision;
}

std::vector<std::vector<std::string>> leftOut(const std::vector<ExplorationCandidate> &all) {
  std::vector<std::vector<std::string>> passes;
  for (const ExplorationCandidate &candidate : all)
    passes.push_back(candidate.leftOut);
  return passes;
}

TEST(ExplorationCandidates, CloseChoicesGiveTheVersionWithoutTheirPass) {
  SpecializationLog log;
  // Search chosen, the derived table predicted 5.5 ns slower: close.
  log.decisions.push_back(rewritten("routes", Representation::PrefixSearch,
                                    {{Representation::PrefixSearch, 4.4},
                                     {Representation::DerivedArray, 9.9},
                                     {Representation::OriginalMap, 41.2}}));
  // A direct index 25 ns under the map: not close.
  log.decisions.push_back(rewritten("ports", Representation::DirectIndex,
                                    {{Representation::DirectIndex, 4},
                                     {Representation::OriginalMap, 29}}));
  auto candidates = explorationCandidates(log, 3);
  ASSERT_EQ(candidates.size(), 2u);
  EXPECT_TRUE(candidates[0].leftOut.empty());
  EXPECT_EQ(candidates[1].leftOut, std::vector<std::string>{"lpm-as-code"});
  EXPECT_DOUBLE_EQ(candidates[1].predictedGapNs, 9.9 - 4.4);
  EXPECT_NE(candidates[1].description.find("derived"), std::string::npos)
      << candidates[1].description;
  // A wider margin takes the direct index too, the closer one first.
  auto wide = explorationCandidates(log, 3, ExplorationMargin{30, 0});
  EXPECT_EQ(leftOut(wide), (std::vector<std::vector<std::string>>{
                               {}, {"lpm-as-code"}, {"hash-as-array"}}));
}

TEST(ExplorationCandidates, TheBudgetKeepsTheClosestAndTheModelsVersionAlways) {
  SpecializationLog log;
  log.decisions.push_back(rewritten("a", Representation::DerivedHash,
                                    {{Representation::DerivedHash, 10},
                                     {Representation::PrefixSearch, 18}}));
  log.decisions.push_back(rewritten("b", Representation::DirectIndex,
                                    {{Representation::DirectIndex, 3},
                                     {Representation::OriginalMap, 5}}));
  EXPECT_EQ(leftOut(explorationCandidates(log, 2)),
            (std::vector<std::vector<std::string>>{{}, {"hash-as-array"}}));
  EXPECT_EQ(leftOut(explorationCandidates(log, 0)), (std::vector<std::vector<std::string>>{{}}));
  EXPECT_EQ(explorationCandidates(log, 10).size(), 3u);
}

TEST(ExplorationCandidates, OnePerPassAtItsClosestSite) {
  SpecializationLog log;
  log.decisions.push_back(rewritten("v4", Representation::PrefixSearch,
                                    {{Representation::PrefixSearch, 5},
                                     {Representation::DerivedArray, 12}}));
  log.decisions.push_back(rewritten("v6", Representation::PrefixSearch,
                                    {{Representation::PrefixSearch, 6},
                                     {Representation::DerivedHash, 8}}));
  auto candidates = explorationCandidates(log, 5);
  ASSERT_EQ(candidates.size(), 2u);
  EXPECT_DOUBLE_EQ(candidates[1].predictedGapNs, 2);
  EXPECT_NE(candidates[1].description.find("'v6'"), std::string::npos);
}

TEST(ExplorationCandidates, NotCloseMemoryOrNothingToCompareWith) {
  SpecializationLog log;
  // Far apart, but the model set a cheaper table aside for its memory: a
  // judgement worth measuring.
  log.decisions.push_back(rewritten("routes", Representation::PrefixSearch,
                                    {{Representation::DerivedArray, 3},
                                     {Representation::PrefixSearch, 40},
                                     {Representation::OriginalMap, 90}},
                                    "the derived table's 128 KiB save too little"));
  // Declined sites, and sites with no prediction, are no decision to revisit.
  SiteDecision declined = rewritten("x", Representation::CompareChain,
                                    {{Representation::CompareChain, 1},
                                     {Representation::OriginalMap, 2}});
  declined.applied = false;
  log.decisions.push_back(declined);
  SiteDecision unpriced;
  unpriced.applied = true;
  unpriced.table = "y";
  log.decisions.push_back(unpriced);
  EXPECT_EQ(leftOut(explorationCandidates(log, 5)),
            (std::vector<std::vector<std::string>>{{}, {"lpm-as-code"}}));
}

TEST(ExplorationSchedule, InterleavesRoundsAndDropsWhatIsSlowerThanGeneric) {
  ExplorationSchedule schedule(3, 2); // generic, model, two alternatives
  std::vector<size_t> served;
  auto serve = [&](double ns) {
    size_t slot = *schedule.next();
    served.push_back(slot);
    schedule.record(slot, ns);
  };
  serve(50); // generic
  serve(20); // the model's
  serve(60); // slower than generic: dropped at once
  serve(15);
  serve(52); // round 2: generic
  serve(22);
  serve(14);
  EXPECT_FALSE(schedule.next());
  EXPECT_EQ(served, (std::vector<size_t>{0, 1, 2, 3, 0, 1, 3}));
  EXPECT_TRUE(schedule.dropped(2));
  EXPECT_EQ(schedule.measured(2).size(), 1u) << "a slower version serves one slice";
  EXPECT_DOUBLE_EQ(*schedule.median(0), 51);
  EXPECT_DOUBLE_EQ(*schedule.median(3), 14.5);
  EXPECT_EQ(schedule.choice(), 3u);
}

TEST(ExplorationSchedule, TheGenericProgramWhenNothingIsFaster) {
  ExplorationSchedule schedule(2, 3);
  schedule.record(*schedule.next(), 30); // generic
  schedule.record(*schedule.next(), 31); // model: slower
  schedule.skip(*schedule.next());       // not built
  EXPECT_FALSE(schedule.next()) << "only the generic program left: nothing to compare";
  EXPECT_EQ(schedule.choice(), 0u);
}

TEST(ExplorationSchedule, EqualToGenericIsNotSlower) {
  ExplorationSchedule schedule(1, 1);
  schedule.record(*schedule.next(), 30);
  schedule.record(*schedule.next(), 30);
  EXPECT_FALSE(schedule.next());
  EXPECT_EQ(schedule.choice(), 1u);
}

} // namespace
} // namespace morpheus::core
