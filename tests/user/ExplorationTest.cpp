// The exploration machinery (backend/user/Exploration.h): the search
// strategies over a metric the test controls (which configurations they
// propose, which one they keep), the Explorer's trials, its choice and its
// re-exploration when the metric moves by 25 % or periodically; then the
// Explorer driving a real JIT-compiled handler from the event loop's own
// measurements.
#include "UserRouter.h"
#include "backend/user/EventLoop.h"
#include "backend/user/Exploration.h"

#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>

#include <random>
#include <set>

namespace morpheus::user {
namespace {

const std::vector<Dimension> TwoDimensions = {{"rounds", {1, 2, 4, 8}, true},
                                              {"short", {1}, true}};

// A metric with its best at rounds=4 with short on.
double syntheticMetric(const Configuration &configuration) {
  double metric = 100;
  if (auto rounds = configuration.find("rounds"); rounds != configuration.end())
    metric += rounds->second == 4 ? 50 : 10;
  if (configuration.count("short"))
    metric += 20;
  return metric;
}

std::vector<Configuration> proposals(SearchStrategy &strategy,
                                     const std::vector<Dimension> &dimensions) {
  std::vector<Configuration> proposed;
  strategy.start(dimensions);
  while (auto next = strategy.next()) {
    proposed.push_back(*next);
    strategy.report(*next, syntheticMetric(*next));
  }
  return proposed;
}

TEST(Exploration, ExhaustiveSearchTriesEveryCombinationAndKeepsTheBest) {
  auto strategy = exhaustiveSearch();
  std::vector<Configuration> proposed = proposals(*strategy, TwoDimensions);
  EXPECT_EQ(proposed.size(), 5u * 2u);
  EXPECT_EQ(std::set<Configuration>(proposed.begin(), proposed.end()).size(), 10u);
  EXPECT_EQ(proposed.front(), Configuration{}); // the generic handler first
  EXPECT_EQ(strategy->best(), (Configuration{{"rounds", 4}, {"short", 1}}));

  auto limited = exhaustiveSearch(3);
  EXPECT_EQ(proposals(*limited, TwoDimensions).size(), 3u);
}

TEST(Exploration, GreedySearchMovesOneDimensionAtATime) {
  auto strategy = greedySearch();
  std::vector<Configuration> proposed = proposals(*strategy, TwoDimensions);
  // The baseline, four values of rounds, then short beside the best rounds.
  ASSERT_EQ(proposed.size(), 1u + 4u + 1u);
  EXPECT_EQ(proposed[0], Configuration{});
  EXPECT_EQ(proposed[5], (Configuration{{"rounds", 4}, {"short", 1}}));
  EXPECT_EQ(strategy->best(), (Configuration{{"rounds", 4}, {"short", 1}}));
}

TEST(Exploration, PointDimensionsComeFromTheSpaceAndGenericPointsFromThePolicy) {
  std::vector<core::SpecializationPoint> space(3);
  space[0] = {"rounds", core::PointKind::Enum, {1, 2}, 0, 0, 1};
  space[1] = {"late", core::PointKind::Generic, {}, 0, 0, 1};
  space[2] = {"short", core::PointKind::Assume, {1}, 0, 0, 1};
  std::vector<Dimension> dimensions = pointDimensions(space);
  ASSERT_EQ(dimensions.size(), 2u); // a generic point without values is left out
  EXPECT_EQ(dimensions[0].name, "rounds");
  EXPECT_EQ(dimensions[1].name, "short");
  dimensions = pointDimensions(space, {{"late", {3, 5}}});
  ASSERT_EQ(dimensions.size(), 3u);
  EXPECT_EQ(dimensions[1].values, (std::vector<int64_t>{3, 5}));
}

TEST(Exploration, TheExplorerMeasuresEachTrialThenSettlesAndReExploresWhenTheMetricMoves) {
  std::vector<Configuration> applied;
  ExplorerOptions options;
  options.windowsPerTrial = 3;
  Explorer explorer(TwoDimensions, greedySearch(),
                    [&](const Configuration &c) {
                      applied.push_back(c);
                      return llvm::Error::success();
                    },
                    options);
  ASSERT_THAT_ERROR(explorer.start(), llvm::Succeeded());
  double scale = 1;
  // Windows: the metric of what runs, with noise in the median's reach.
  auto window = [&](int noise) {
    return explorer.observe(syntheticMetric(explorer.current()) * scale + noise);
  };
  while (explorer.exploring())
    for (int noise : {-1, 0, 40}) // one outlier per trial: the median ignores it
      ASSERT_THAT_ERROR(window(noise), llvm::Succeeded());
  ASSERT_TRUE(explorer.chosen());
  EXPECT_EQ(explorer.chosen()->configuration, (Configuration{{"rounds", 4}, {"short", 1}}));
  EXPECT_EQ(explorer.chosen()->metric, 170);
  EXPECT_EQ(explorer.trials().size(), 6u);
  EXPECT_EQ(applied.back(), explorer.chosen()->configuration);

  // Settled: moves below the threshold change nothing.
  scale = 0.8;
  for (int i = 0; i < 5; ++i)
    ASSERT_THAT_ERROR(window(0), llvm::Succeeded());
  EXPECT_FALSE(explorer.exploring());
  // A 30 % drop starts a new exploration, whose reason says so.
  scale = 0.7;
  ASSERT_THAT_ERROR(window(0), llvm::Succeeded());
  EXPECT_TRUE(explorer.exploring());
  ASSERT_EQ(explorer.reasons().size(), 2u);
  EXPECT_NE(explorer.reasons()[1].find("moved by -30 %"), std::string::npos)
      << explorer.reasons()[1];
  EXPECT_EQ(explorer.current(), Configuration{}); // the baseline again
}

TEST(Exploration, PeriodicReExploration) {
  ExplorerOptions options;
  options.windowsPerTrial = 1;
  options.reexploreEvery = 4;
  Explorer explorer({{"rounds", {1, 2}, true}}, exhaustiveSearch(),
                    [](const Configuration &) { return llvm::Error::success(); }, options);
  ASSERT_THAT_ERROR(explorer.start(), llvm::Succeeded());
  unsigned windows = 0;
  while (explorer.exploring() && windows < 10)
    ASSERT_THAT_ERROR(explorer.observe(100 + double(windows++)), llvm::Succeeded());
  EXPECT_EQ(windows, 3u);
  for (int i = 0; i < 3; ++i)
    ASSERT_THAT_ERROR(explorer.observe(102), llvm::Succeeded());
  EXPECT_FALSE(explorer.exploring());
  ASSERT_THAT_ERROR(explorer.observe(102), llvm::Succeeded());
  EXPECT_TRUE(explorer.exploring());
  EXPECT_EQ(explorer.reasons().back(), "periodic, after 4 windows");
}

// The Explorer on a real handler: every trial is a configuration compiled
// by the JIT and installed, measured by the event loop (packets/s of the
// loop thread's CPU time); the chosen one is the trial with the highest
// measurement, it is what runs at the end, and it treats packets as the
// generic handler does. (Which configuration wins is the machine's
// business: the test asserts the bookkeeping, not a speed.)
TEST(Exploration, TheExplorerDrivesARealHandlerFromTheLoopsMeasurements) {
  const std::string source = std::string(MORPHEUS_SOURCE_DIR) + "/tests/user/handlers/spec_points.c";
  HandlerOptions handlerOptions;
  handlerOptions.entry = "spec_points";
  auto handler = Handler::load(source, handlerOptions);
  auto generic = Handler::load(source, handlerOptions);
  ASSERT_THAT_EXPECTED(handler, llvm::Succeeded());
  ASSERT_THAT_EXPECTED(generic, llvm::Succeeded());
  std::vector<core::CycleOutcome> outcomes;
  ExplorerOptions options;
  options.windowsPerTrial = 1;
  Explorer explorer(pointDimensions((*handler)->specializationSpace()), exhaustiveSearch(),
                    [&](const Configuration &configuration) -> llvm::Error {
                      auto cycle = (*handler)->specialize(configuration);
                      if (!cycle)
                        return cycle.takeError();
                      outcomes.push_back(cycle->outcome);
                      return llvm::Error::success();
                    },
                    options);
  ASSERT_THAT_ERROR(explorer.start(), llvm::Succeeded());

  std::mt19937 random(7);
  ReplayRing ring;
  for (int i = 0; i < 64; ++i) {
    Bytes frame(40 + random() % 60);
    for (uint8_t &byte : frame)
      byte = uint8_t(random());
    frame[14] = i % 8 ? 4 : 2; // mostly rounds=4
    ring.frames.push_back(frame);
    ring.sequence.push_back(i);
  }
  EventLoop loop((*handler)->trampoline(), 16);
  while (explorer.exploring())
    ASSERT_THAT_ERROR(explorer.observe(loop.run(ring, 20).packetsPerSecond()),
                      llvm::Succeeded());
  EXPECT_EQ(explorer.trials().size(), 5u * 2u); // rounds (off + 4) x short (off, on)
  for (core::CycleOutcome outcome : outcomes)
    EXPECT_EQ(outcome, core::CycleOutcome::Installed);
  double best = 0;
  for (const Trial &trial : explorer.trials())
    best = std::max(best, trial.metric);
  ASSERT_TRUE(explorer.chosen());
  EXPECT_EQ(explorer.chosen()->metric, best);
  EXPECT_EQ((*handler)->configuration(), explorer.chosen()->configuration);

  std::vector<PacketResult> expected = EventLoop((*generic)->trampoline(), 16).collect(ring);
  std::vector<PacketResult> actual = loop.collect(ring);
  EXPECT_EQ(actual, expected);
}

// The policy's own pass pipeline (Iridescent's customize_opts): the router's
// neighbours become a compare chain with every pass, not without
// inline-small-table; an unknown pass is refused by name.
TEST(PolicyApi, ACustomPipelineRunsOnlyItsPasses) {
  auto router = testing::loadRouter();
  ASSERT_TRUE(router);
  testing::configure(router->tables());
  auto passesOn = [&](const std::string &table) {
    std::set<std::string> passes;
    auto cycle = router->specialize();
    EXPECT_THAT_EXPECTED(cycle, llvm::Succeeded());
    if (cycle)
      for (const core::SiteDecision &decision : cycle->log.decisions)
        if (decision.table == table && decision.applied)
          passes.insert(decision.pass);
    return passes;
  };
  EXPECT_EQ(passesOn("neighbors"), std::set<std::string>{"inline-small-table"});
  ASSERT_THAT_ERROR(router->customizePasses({"table-elimination", "constant-key-lookup"}),
                    llvm::Succeeded());
  EXPECT_TRUE(passesOn("neighbors").empty());
  std::string message = toString(router->customizePasses({"inline-everything"}));
  EXPECT_NE(message.find("'inline-everything'"), std::string::npos) << message;
}

} // namespace
} // namespace morpheus::user
