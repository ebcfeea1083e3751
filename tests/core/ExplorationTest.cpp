// What a measured exploration tries and in which order it serves it
// (core/ExplorationCandidates): the model's version first, one alternative
// per pass that rewrote a site where the model was close, the closest
// first, within the trial budget; slices interleaved with the generic
// program, a version measured slower than it dropped at once, the lowest
// median no slower than it chosen.
#include "core/ExplorationCandidates.h"

#include <gtest/gtest.h>
#include <llvm/ADT/STLExtras.h>

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

// Two decisions: the routes' search chosen with the derived table
// predicted 5.5 ns slower (close), the ports' direct index 25 ns under the
// map (not close).
SpecializationLog closeRoutesAndFarPorts() {
  SpecializationLog log;
  log.decisions.push_back(rewritten("routes", Representation::PrefixSearch,
                                    {{Representation::PrefixSearch, 4.4},
                                     {Representation::DerivedArray, 9.9},
                                     {Representation::OriginalMap, 41.2}}));
  log.decisions.push_back(rewritten("ports", Representation::DirectIndex,
                                    {{Representation::DirectIndex, 4},
                                     {Representation::OriginalMap, 29}}));
  return log;
}

TEST(ExplorationCandidates, CloseChoicesGiveTheVersionWithoutTheirPass) {
  SpecializationLog log = closeRoutesAndFarPorts();
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

TEST(ExplorationCandidates, TheThirdRepresentationIsTwoPassesAway) {
  // The 20 routes as the model prices them: the derived table, then the
  // derived hashes, then the search; the search is built only with both
  // derived passes left out, and costs them both in the candidate's
  // settings. The map's lookup is not close (16.6 ns).
  SpecializationLog log;
  log.decisions.push_back(rewritten("routes", Representation::DerivedArray,
                                    {{Representation::DerivedArray, 5.4},
                                     {Representation::DerivedHash, 7},
                                     {Representation::PrefixSearch, 9},
                                     {Representation::OriginalMap, 22}}));
  auto candidates = explorationCandidates(log, 5);
  ASSERT_EQ(leftOut(candidates), (std::vector<std::vector<std::string>>{
                                     {}, {"lpm-as-array"}, {"lpm-as-array", "lpm-as-hash"}}));
  EXPECT_DOUBLE_EQ(candidates[2].predictedGapNs, 9 - 5.4);
  EXPECT_NE(candidates[2].description.find("without lpm-as-array and lpm-as-hash"),
            std::string::npos)
      << candidates[2].description;
  VersionSettings search = candidateSettings(candidates[2], VersionSettings{});
  ASSERT_TRUE(search.tablePasses);
  EXPECT_FALSE(llvm::is_contained(*search.tablePasses, "lpm-as-array"));
  EXPECT_FALSE(llvm::is_contained(*search.tablePasses, "lpm-as-hash"));
  EXPECT_TRUE(llvm::is_contained(*search.tablePasses, "lpm-as-code"));
  // A representation whose pass is already left out cannot be built: the
  // derived hashes priced a second time name no further version.
  SpecializationLog repeated;
  repeated.decisions.push_back(rewritten("routes", Representation::DerivedArray,
                                         {{Representation::DerivedArray, 5},
                                          {Representation::DerivedHash, 6},
                                          {Representation::DerivedHash, 7}}));
  EXPECT_EQ(leftOut(explorationCandidates(repeated, 5)),
            (std::vector<std::vector<std::string>>{{}, {"lpm-as-array"}}));
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

TEST(ExplorationSchedule, ASlowRoundDropsOnlyWhatIsSlowerThanItsGenericSlice) {
  // The l2switch's third round on a loaded machine: the generic program's
  // slice ran 40 % slow. The model's version, slower than the generic
  // median so far but faster than that slice, serves on; the vlans'
  // lookup, slower than both, is dropped.
  ExplorationSchedule schedule(2, 4);
  for (double ns : {202.2, 172.0, 164.3, 205.0, 176.5, 157.8, 286.3, 242.8, 300.0})
    schedule.record(*schedule.next(), ns);
  EXPECT_FALSE(schedule.dropped(1));
  EXPECT_TRUE(schedule.dropped(2));
  EXPECT_EQ(schedule.next(), std::optional<size_t>(0)) << "a fourth round";
  schedule.record(0, 204.0);
  schedule.record(1, 175.0);
  EXPECT_FALSE(schedule.next());
  EXPECT_EQ(schedule.choice(), 1u);
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

TEST(ExplorationShortfall, ThePredictedSavingIsTheMapLessTheChoiceAtEveryRewrittenSite) {
  SpecializationLog log;
  log.decisions.push_back(rewritten("routes", Representation::DerivedArray,
                                    {{Representation::DerivedArray, 10},
                                     {Representation::PrefixSearch, 40},
                                     {Representation::OriginalMap, 30}}));
  log.decisions.push_back(rewritten("ports", Representation::CompareChain,
                                    {{Representation::CompareChain, 2},
                                     {Representation::OriginalMap, 29}}));
  // Not applied, or the map kept: no saving predicted there.
  SiteDecision declined = rewritten("x", Representation::CompareChain,
                                    {{Representation::CompareChain, 1},
                                     {Representation::OriginalMap, 50}});
  declined.applied = false;
  log.decisions.push_back(declined);
  log.decisions.push_back(rewritten("kept", Representation::OriginalMap,
                                    {{Representation::OriginalMap, 29}}));
  EXPECT_DOUBLE_EQ(predictedSavingNs(log), (30 - 10) + (29 - 2));
  EXPECT_DOUBLE_EQ(predictedSavingNs(SpecializationLog{}), 0);
}

TEST(ExplorationShortfall, ShortWhenUnderTheFractionByMoreThanTheNoise) {
  // 40 ns predicted: half is 20; short below 20 - 5 ns measured.
  EXPECT_FALSE(gainFallsShort(40, 100, 60));  // 40 saved, as predicted
  EXPECT_FALSE(gainFallsShort(40, 100, 84));  // 16 saved: within the noise of half
  EXPECT_TRUE(gainFallsShort(40, 100, 86));   // 14 saved
  EXPECT_TRUE(gainFallsShort(40, 100, 110));  // slower than the generic program
  // Saving more than predicted is never short, nor is a prediction of none.
  EXPECT_FALSE(gainFallsShort(10, 100, 40));
  EXPECT_FALSE(gainFallsShort(0, 100, 120));
  // Fraction 0 turns the trigger off; a larger one asks for more.
  EXPECT_FALSE(gainFallsShort(40, 100, 110, ShortfallThreshold{0, 5}));
  EXPECT_TRUE(gainFallsShort(40, 100, 70, ShortfallThreshold{1, 5}));
  EXPECT_FALSE(gainFallsShort(40, 100, 70, ShortfallThreshold{1, 15}));
}

TEST(ExplorationShortfall, WidenedCandidatesAreTheDecisionsNotCloseNotTriedYet) {
  // The routes' decision is close: tried first. The ports' and the vips'
  // are far apart (25 and 60 ns): tried only when the gain falls short.
  SpecializationLog log = closeRoutesAndFarPorts();
  log.decisions.push_back(rewritten("vips", Representation::CompareChain,
                                    {{Representation::CompareChain, 2},
                                     {Representation::OriginalMap, 62}}));
  std::vector<ExplorationCandidate> close = explorationCandidates(log, 3);
  ASSERT_EQ(leftOut(close), (std::vector<std::vector<std::string>>{{}, {"lpm-as-code"}}));
  // The routes' map lookup (36.8 ns over the search) is two passes away.
  EXPECT_EQ(leftOut(widenedCandidates(log, 4, close)),
            (std::vector<std::vector<std::string>>{
                {"hash-as-array"}, {"lpm-as-array", "lpm-as-code"}, {"inline-small-table"}}));
  // The trial budget counts the model's version: two more at most.
  EXPECT_EQ(widenedCandidates(log, 2, close).size(), 1u);
  // Nothing close: the model's version alone was tried; every priced
  // alternative is left to widen with.
  std::vector<ExplorationCandidate> modelOnly = explorationCandidates(log, 3, {0, 0});
  ASSERT_EQ(modelOnly.size(), 1u);
  EXPECT_EQ(leftOut(widenedCandidates(log, 5, modelOnly)),
            (std::vector<std::vector<std::string>>{{"lpm-as-code"},
                                                   {"hash-as-array"},
                                                   {"lpm-as-array", "lpm-as-code"},
                                                   {"inline-small-table"}}));
  // No priced decision (the l2switch's compare chains today): nothing.
  EXPECT_TRUE(widenedCandidates(SpecializationLog{}, 3, modelOnly).empty());
}

TEST(ExplorationSchedule, ExtendingServesTheNewVersionsAndKeepsTheDroppedOnesOut) {
  ExplorationSchedule schedule(2, 1); // generic, model, one alternative
  schedule.record(*schedule.next(), 50); // generic
  schedule.record(*schedule.next(), 45); // the model's
  schedule.record(*schedule.next(), 55); // the alternative: slower, dropped
  EXPECT_FALSE(schedule.next());
  schedule.extend(2);
  ASSERT_EQ(schedule.size(), 5u);
  std::vector<size_t> served;
  for (double ns : {50.0, 44.0, 40.0, 60.0}) {
    size_t slot = *schedule.next();
    served.push_back(slot);
    schedule.record(slot, ns);
  }
  EXPECT_FALSE(schedule.next());
  EXPECT_EQ(served, (std::vector<size_t>{0, 1, 3, 4})) << "the dropped version serves no more";
  EXPECT_EQ(schedule.measured(2).size(), 1u);
  EXPECT_EQ(schedule.measured(1).size(), 2u) << "the model's version measured again";
  EXPECT_TRUE(schedule.dropped(4));
  EXPECT_EQ(schedule.choice(), 3u);
}

TEST(ExplorationSchedule, ExtendingAfterTheModelWasDroppedMeasuresTheNewOnes) {
  ExplorationSchedule schedule(1, 2); // a check: generic and the model's version
  schedule.record(*schedule.next(), 50);
  schedule.record(*schedule.next(), 70); // slower: dropped, the check ends
  EXPECT_FALSE(schedule.next());
  schedule.extend(1);
  std::vector<size_t> served;
  while (std::optional<size_t> slot = schedule.next()) {
    served.push_back(*slot);
    schedule.record(*slot, *slot == 0 ? 50 : 48);
  }
  EXPECT_EQ(served, (std::vector<size_t>{0, 2, 0, 2}));
  EXPECT_EQ(schedule.choice(), 2u);
}

TEST(ExplorationTraffic, HotKeysMoveWhenHalfOfASitesKeysAreReplaced) {
  Bytes a{1}, b{2}, c{3}, d{4};
  std::map<unsigned, std::vector<Bytes>> before{{7, {a, b, c, d}}};
  EXPECT_FALSE(hotKeysMoved(before, before));
  EXPECT_FALSE(hotKeysMoved(before, {{7, {d, c, b, a}}})) << "the order is no move";
  EXPECT_FALSE(hotKeysMoved(before, {{7, {a, b, Bytes{5}, Bytes{6}}}})) << "half kept";
  EXPECT_TRUE(hotKeysMoved(before, {{7, {a, Bytes{5}, Bytes{6}, Bytes{8}}}}));
  EXPECT_TRUE(hotKeysMoved(before, {{7, {}}})) << "the fast path dropped";
  EXPECT_TRUE(hotKeysMoved({}, {{3, {a}}})) << "a fast path where there was none";
  EXPECT_FALSE(hotKeysMoved({{3, {}}}, {})) << "no fast path either way";
}

// A compare chain inline-small-table built (Constants lowering: no price).
SiteDecision chained(const std::string &table) {
  SiteDecision decision;
  decision.table = table;
  decision.decider = Decider::InlineSmallTablePass;
  decision.pass = "inline-small-table";
  decision.applied = true;
  return decision;
}

void inlineEntries(SpecializationLog &log, const std::string &table, size_t entries) {
  for (size_t i = 0; i < entries; ++i)
    log.inlined[table].push_back(TableEntry{Bytes{uint8_t(i)}, Bytes{1}});
}

TEST(ExplorationCandidates, UnpricedChainsAreTriedAsLookupsByALowerInlineLimit) {
  SpecializationLog log;
  // The l2switch's: its ports (6 entries) inlined at two sites, a VLAN
  // table of 3; nothing priced.
  log.decisions.push_back(chained("ports"));
  log.decisions.push_back(chained("ports"));
  log.decisions.push_back(chained("vlans"));
  inlineEntries(log, "ports", 6);
  inlineEntries(log, "vlans", 3);
  std::vector<ExplorationCandidate> candidates = explorationCandidates(log, 3);
  ASSERT_EQ(candidates.size(), 3u);
  EXPECT_FALSE(candidates[0].inlineLimit);
  // The longest chain first: limit 5 keeps the ports' lookup, the VLANs
  // still inlined; limit 2 keeps both.
  EXPECT_EQ(candidates[1].inlineLimit, 5u);
  EXPECT_TRUE(candidates[1].leftOut.empty());
  EXPECT_NE(candidates[1].description.find("'ports' (6 entries)"), std::string::npos)
      << candidates[1].description;
  EXPECT_EQ(candidates[2].inlineLimit, 2u);
  // A priced close decision goes first; the budget then keeps one chain.
  log.decisions.push_back(rewritten("routes", Representation::PrefixSearch,
                                    {{Representation::PrefixSearch, 4.4},
                                     {Representation::DerivedArray, 9.9}}));
  candidates = explorationCandidates(log, 3);
  ASSERT_EQ(candidates.size(), 3u);
  EXPECT_EQ(candidates[1].leftOut, std::vector<std::string>{"lpm-as-code"});
  EXPECT_EQ(candidates[2].inlineLimit, 5u);
  // Tried already, so nothing to widen with but the remaining chain.
  std::vector<ExplorationCandidate> widened = widenedCandidates(log, 3, candidates);
  ASSERT_EQ(widened.size(), 1u);
  EXPECT_EQ(widened[0].inlineLimit, 2u);
}

TEST(ExplorationCandidates, ACandidatesSettingsAreTheModelsWithItsChanges) {
  VersionSettings model{std::vector<std::string>{"inline-small-table", "lpm-as-code"}, 64};
  ExplorationCandidate modelVersion;
  EXPECT_EQ(candidateSettings(modelVersion, model), model);
  ExplorationCandidate without{.leftOut = {"lpm-as-code"}};
  EXPECT_EQ(candidateSettings(without, model),
            (VersionSettings{std::vector<std::string>{"inline-small-table"}, 64}));
  ExplorationCandidate lower{.inlineLimit = 5};
  EXPECT_EQ(candidateSettings(lower, model).inlineLimit, 5u);
  EXPECT_EQ(candidateSettings(lower, model).tablePasses, model.tablePasses);
  // Never above the model's limit (its tables were read no further).
  EXPECT_EQ(candidateSettings(ExplorationCandidate{.inlineLimit = 100}, model).inlineLimit, 64u);
  // All passes (unset) without one: every other pass, in order.
  VersionSettings all{std::nullopt, 64};
  std::optional<std::vector<std::string>> passes = candidateSettings(without, all).tablePasses;
  ASSERT_TRUE(passes);
  EXPECT_FALSE(llvm::is_contained(*passes, "lpm-as-code"));
  EXPECT_TRUE(llvm::is_contained(*passes, "inline-small-table"));
}

} // namespace
} // namespace morpheus::core
