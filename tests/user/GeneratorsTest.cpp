// Custom generators (core/LookupGenerator.h, backend/user/Generators.h) on
// the real JIT: the LPM library's nested-if generator, registered for the
// probe's routes table, answers as the table for prefixes nested at every
// length (both LPM kinds) and as a brute-force longest match; a route
// change between bursts is seen by the next burst and the next cycle
// generates the code again; a generator that fails is declined with its
// reason and the table's lookup keeps serving.
#include "LpmProbe.h"
#include "UserRouter.h"
#include "backend/user/Generators.h"

#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>

namespace morpheus::user {
namespace {

using testing::addressesAround;
using testing::answerIn;
using testing::bytesOfValue;
using testing::decisionOn;
using testing::longestMatch;
using testing::lpmKey;
using testing::nestedRoutes;
using testing::probeFor;
using testing::Route;

std::unique_ptr<Handler> loadProbe(const std::string &kind,
                                   std::vector<core::LookupGenerator> generators = {}) {
  HandlerOptions options;
  options.cflags = {"-DLPM_KIND=" + kind};
  options.generators = std::move(generators);
  return testing::loadLpmProbe(options);
}

void addRoutes(Handler &handler, const std::vector<Route> &routes) {
  for (const Route &route : routes)
    ASSERT_THAT_ERROR(handler.tables().update("routes", lpmKey(route.length, route.first()),
                                              bytesOfValue<uint32_t>(route.value)),
                      llvm::Succeeded());
}

ReplayRing probesFor(const std::vector<uint32_t> &addresses) {
  ReplayRing ring;
  for (uint32_t address : addresses)
    ring.frames.push_back(probeFor(address));
  for (uint32_t length : {0u, 8u, 24u, 31u, 33u}) // not the whole address: the lookup
    ring.frames.push_back(probeFor(0x0a0b0c0du, length));
  for (uint32_t i = 0; i < ring.frames.size(); ++i)
    ring.sequence.push_back(i);
  return ring;
}

class NestedIfLpm : public ::testing::TestWithParam<std::string> {};

TEST_P(NestedIfLpm, NestedPrefixesAtEveryLengthAnswerAsTheTable) {
  auto generic = loadProbe(GetParam()), generated = loadProbe(GetParam(), {nestedIfLpm("routes")});
  ASSERT_TRUE(generic && generated);
  std::vector<Route> routes = nestedRoutes();
  addRoutes(*generic, routes);
  addRoutes(*generated, routes);

  auto cycle = generated->specialize();
  ASSERT_THAT_EXPECTED(cycle, llvm::Succeeded());
  ASSERT_EQ(cycle->outcome, core::CycleOutcome::Installed);
  const core::SiteDecision *decision = decisionOn(cycle->log, "routes");
  ASSERT_TRUE(decision);
  EXPECT_TRUE(decision->applied) << decision->detail;
  EXPECT_EQ(decision->pass, "custom-generator");
  EXPECT_NE(decision->detail.find("'nested-if-lpm' over 37 entries"), std::string::npos)
      << decision->detail;
  // The source nests each prefix in the longest one containing it.
  core::TableContents contents;
  contents.complete = true;
  for (const Route &route : {Route{0, 0, 1}, Route{8, 0x0a000000u, 2}, Route{16, 0x0a010000u, 3}})
    contents.entries.push_back({lpmKey(route.length, route.first()), bytesOfValue(route.value)});
  auto source = nestedIfLpmSource(generated->tables().catalog().at("routes"), contents);
  ASSERT_THAT_EXPECTED(source, llvm::Succeeded());
  EXPECT_NE(source->find("if ((a & 0x0u) == 0x0u) {\n\t\tanswer = 0;\n\t\tif ((a & "
                         "0xff000000u) == 0xa000000u) {\n\t\t\tanswer = 1;\n\t\t\tif ((a & "
                         "0xffff0000u) == 0xa010000u)"),
            std::string::npos)
      << *source;

  std::vector<uint32_t> addresses = addressesAround(routes);
  ReplayRing ring = probesFor(addresses);
  std::vector<PacketResult> expected = EventLoop(generic->trampoline(), 8).collect(ring);
  std::vector<PacketResult> actual = EventLoop(generated->trampoline(), 8).collect(ring);
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i)
    ASSERT_EQ(actual[i], expected[i]) << "packet " << i;
  for (size_t i = 0; i < addresses.size(); ++i) {
    std::optional<uint32_t> truth = longestMatch(routes, addresses[i]);
    EXPECT_EQ(answerIn(actual[i]), truth.value_or(0xffffffffu)) << "address " << addresses[i];
  }
}

// A more specific route added between bursts: the installed code is stale
// from the next packet on (its guard fails: the table answers), and the next
// cycle generates code that holds the new route.
TEST_P(NestedIfLpm, ARouteChangeBetweenBurstsIsSeenByTheNextBurst) {
  auto probe = loadProbe(GetParam(), {nestedIfLpm()}); // by kind: every LPM table
  ASSERT_TRUE(probe);
  addRoutes(*probe, {{8, 0x0a000000u, 1}, {16, 0x0a010000u, 2}});
  auto first = probe->specialize();
  ASSERT_THAT_EXPECTED(first, llvm::Succeeded());
  ASSERT_TRUE(decisionOn(first->log, "routes") && decisionOn(first->log, "routes")->applied);

  ReplayRing ring{{probeFor(0x0a010203u), probeFor(0x0a010909u)}, {0, 1, 0, 1, 0, 1}, 0};
  int burst = 0;
  std::optional<core::CycleReport> second;
  std::vector<PacketResult> results = EventLoop(probe->trampoline(), 2).collect(ring, [&] {
    if (burst++ == 0) {
      addRoutes(*probe, {{24, 0x0a010200u, 3}});
    } else if (burst == 2) {
      auto cycle = probe->specialize();
      ASSERT_THAT_EXPECTED(cycle, llvm::Succeeded());
      second = std::move(*cycle);
    }
  });
  ASSERT_EQ(results.size(), 6u);
  const uint32_t expected[6] = {2, 2, /*new route*/ 3, 2, /*generated again*/ 3, 2};
  for (size_t i = 0; i < 6; ++i)
    EXPECT_EQ(answerIn(results[i]), expected[i]) << "packet " << i;
  ASSERT_TRUE(second);
  EXPECT_EQ(second->outcome, core::CycleOutcome::Installed);
  const core::SiteDecision *again = decisionOn(second->log, "routes");
  ASSERT_TRUE(again && again->applied);
  EXPECT_NE(again->detail.find("over 3 entries"), std::string::npos) << again->detail;
}

INSTANTIATE_TEST_SUITE_P(UserGenerators, NestedIfLpm, ::testing::ValuesIn(testing::lpmKinds()),
                         [](const auto &info) { return testing::lpmKindTestName(info.param); });

// Generators that fail: one that reports an error, one whose C does not
// compile, one that writes a global. Each is declined with its reason, only
// custom-generator runs, so the routes lookup stays the table's, and every
// packet is answered as the generic handler answers it.
TEST(UserGenerators, AFailingGeneratorIsDeclinedWithItsReasonAndTheLookupServes) {
  auto generic = loadProbe("MU_LPM_DIR24");
  ASSERT_TRUE(generic);
  std::vector<Route> routes = nestedRoutes();
  addRoutes(*generic, routes);
  struct Failing {
    core::LookupGenerator generator;
    std::string reason;
  };
  auto fromSource = [](std::string source) {
    return generatorFromSource("broken", "routes", std::nullopt, "broken",
                               [source](const core::TableInfo &, const core::TableContents &)
                                   -> Expected<std::string> { return source; });
  };
  std::vector<Failing> failing = {
      {generatorFromSource("refuses", "routes", std::nullopt, "refuses",
                           [](const core::TableInfo &table, const core::TableContents &contents)
                               -> Expected<std::string> {
                             return makeError("{0}: {1} entries, too many for me", table.name,
                                              contents.entries.size());
                           }),
       "generator 'refuses': routes: 37 entries, too many for me"},
      {fromSource("long long broken(const void *key) { return nonsense; }"),
       "use of undeclared identifier 'nonsense'"},
      {fromSource("long long calls;\n"
                  "long long broken(const void *key) { return calls++; }"),
       "its function 'broken': it writes memory off its stack"},
  };
  ReplayRing ring = probesFor(addressesAround(routes));
  std::vector<PacketResult> expected = EventLoop(generic->trampoline(), 8).collect(ring);
  for (Failing &test : failing) {
    auto probe = loadProbe("MU_LPM_DIR24", {test.generator});
    ASSERT_TRUE(probe);
    addRoutes(*probe, routes);
    ASSERT_THAT_ERROR(probe->customizePasses({"custom-generator"}), llvm::Succeeded());
    auto cycle = probe->specialize();
    ASSERT_THAT_EXPECTED(cycle, llvm::Succeeded());
    EXPECT_EQ(cycle->outcome, core::CycleOutcome::Installed);
    const core::SiteDecision *decision = decisionOn(cycle->log, "routes");
    ASSERT_TRUE(decision);
    EXPECT_FALSE(decision->applied);
    EXPECT_EQ(decision->pass, "custom-generator");
    EXPECT_NE(decision->detail.find(test.reason), std::string::npos) << decision->detail;
    std::vector<PacketResult> actual = EventLoop(probe->trampoline(), 8).collect(ring);
    ASSERT_EQ(actual.size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i)
      ASSERT_EQ(actual[i], expected[i]) << test.generator.name << ", packet " << i;
  }
}

} // namespace
} // namespace morpheus::user
