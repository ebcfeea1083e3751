// LPM tables of the user-space backend specialized by the core's
// lpm-as-code pass (the nested-if template of NFMorph/Iridescent: the
// prefixes as a search over address intervals), with the real JIT, on
// tests/user/handlers/lpm_probe.c, whose packets carry what the table
// answered: prefixes nested at every length agree with the table and with
// a brute-force longest match, for both LPM kinds; a control-plane change
// is seen by the very next burst (the stale version's guard fails) and the
// next cycle builds the search for the new routes. Constant keys of short
// prefix lengths get the kernel's trie's answers from the tables and from
// constant-key-lookup alike.
#include "LpmProbe.h"
#include "UserRouter.h"

#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>

#include <cstring>
#include <optional>

namespace morpheus::user {
namespace {

using testing::addressesAround;
using testing::answerIn;
using testing::decisionOn;
using testing::longestMatch;
using testing::nestedRoutes;
using testing::Route;
using testing::bytesOfValue;
using testing::lpmKey;
using testing::probeFor;

std::unique_ptr<Handler> loadProbe(const std::string &kind) {
  HandlerOptions options;
  options.cflags = {"-DLPM_KIND=" + kind};
  return testing::loadLpmProbe(options);
}

class LpmAsCodeOnUserTables : public ::testing::TestWithParam<std::string> {};

// Prefixes of every length 0..32 nested around 10.11.12.13, beside a few
// disjoint ones: the search answers every interval bound (a prefix's first
// and last address and their neighbours) and random addresses as the table
// does, and as the longest match does; keys of other prefix lengths take
// the table's own lookup.
TEST_P(LpmAsCodeOnUserTables, NestedPrefixesAtEveryLengthAnswerAsTheTable) {
  auto generic = loadProbe(GetParam()), specialized = loadProbe(GetParam());
  ASSERT_TRUE(generic && specialized);
  std::vector<Route> routes = nestedRoutes();
  for (Handler *handler : {generic.get(), specialized.get()})
    for (const Route &route : routes)
      ASSERT_THAT_ERROR(handler->tables().update("routes", lpmKey(route.length, route.first()),
                                                 bytesOfValue<uint32_t>(route.value)),
                        llvm::Succeeded());

  auto cycle = specialized->specialize();
  ASSERT_THAT_EXPECTED(cycle, llvm::Succeeded());
  ASSERT_EQ(cycle->outcome, core::CycleOutcome::Installed);
  const core::SiteDecision *decision = decisionOn(cycle->log, "routes");
  ASSERT_TRUE(decision);
  EXPECT_TRUE(decision->applied) << decision->detail;
  EXPECT_EQ(decision->pass, "lpm-as-code");
  auto ir = specialized->specializedIR();
  ASSERT_THAT_EXPECTED(ir, llvm::Succeeded());
  EXPECT_NE(ir->find("routes.search"), std::string::npos);

  std::vector<uint32_t> addresses = addressesAround(routes);
  ReplayRing ring;
  for (uint32_t address : addresses)
    ring.frames.push_back(probeFor(address));
  for (uint32_t length : {0u, 8u, 24u, 31u, 33u}) // not the whole address: the lookup
    ring.frames.push_back(probeFor(0x0a0b0c0du, length));
  for (uint32_t i = 0; i < ring.frames.size(); ++i)
    ring.sequence.push_back(i);

  std::vector<PacketResult> expected = EventLoop(generic->trampoline(), 8).collect(ring);
  std::vector<PacketResult> actual = EventLoop(specialized->trampoline(), 8).collect(ring);
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i)
    ASSERT_EQ(actual[i], expected[i]) << "packet " << i;
  for (size_t i = 0; i < addresses.size(); ++i) {
    std::optional<uint32_t> truth = longestMatch(routes, addresses[i]);
    EXPECT_EQ(actual[i].verdict, truth ? MU_TX : MU_DROP) << "address " << addresses[i];
    EXPECT_EQ(answerIn(actual[i]), truth.value_or(0xffffffffu)) << "address " << addresses[i];
  }
}

// Routes change between bursts through the control plane: the installed
// search is stale from the next packet on, its guard fails and the generic
// lookup answers with the new routes; the next cycle builds a search that
// holds them.
TEST_P(LpmAsCodeOnUserTables, ARouteChangeIsSeenByTheNextBurst) {
  auto probe = loadProbe(GetParam());
  ASSERT_TRUE(probe);
  TableSet &tables = probe->tables();
  ASSERT_THAT_ERROR(tables.update("routes", lpmKey(8, 0x0a000000u), bytesOfValue<uint32_t>(1)),
                    llvm::Succeeded());
  ASSERT_THAT_ERROR(tables.update("routes", lpmKey(16, 0x0a010000u), bytesOfValue<uint32_t>(2)),
                    llvm::Succeeded());
  auto first = probe->specialize();
  ASSERT_THAT_EXPECTED(first, llvm::Succeeded());
  ASSERT_EQ(first->outcome, core::CycleOutcome::Installed);
  ASSERT_TRUE(decisionOn(first->log, "routes") && decisionOn(first->log, "routes")->applied);
  HandlerFunction stale = probe->trampoline().current();

  // Two packets a burst: 10.1.2.3 and 10.1.9.9.
  ReplayRing ring{{probeFor(0x0a010203u), probeFor(0x0a010909u)}, {}, 0};
  for (int burst = 0; burst < 4; ++burst)
    ring.sequence.insert(ring.sequence.end(), {0, 1});
  int burst = 0;
  std::optional<core::CycleReport> second;
  auto controlPlane = [&] {
    switch (burst++) {
    case 0: // a more specific route for 10.1.2.0/24
      ASSERT_THAT_ERROR(tables.update("routes", lpmKey(24, 0x0a010200u), bytesOfValue<uint32_t>(3)),
                        llvm::Succeeded());
      EXPECT_EQ(probe->trampoline().current(), stale); // still installed, now stale
      break;
    case 1: { // the next cycle
      auto cycle = probe->specialize();
      ASSERT_THAT_EXPECTED(cycle, llvm::Succeeded());
      second = std::move(*cycle);
      break;
    }
    case 2: // 10.1.0.0/16 withdrawn: 10.1.9.9 falls back to 10.0.0.0/8
      ASSERT_THAT_ERROR(tables.remove("routes", lpmKey(16, 0x0a010000u)), llvm::Succeeded());
      break;
    }
  };
  std::vector<PacketResult> results = EventLoop(probe->trampoline(), 2).collect(ring, controlPlane);
  ASSERT_EQ(results.size(), 8u);
  const uint32_t expected[8] = {2, 2, /*new route*/ 3, 2, /*rebuilt*/ 3, 2, /*withdrawn*/ 3, 1};
  for (size_t i = 0; i < 8; ++i)
    EXPECT_EQ(answerIn(results[i]), expected[i]) << "packet " << i;
  ASSERT_TRUE(second);
  EXPECT_EQ(second->outcome, core::CycleOutcome::Installed);
  const core::SiteDecision *rebuilt = decisionOn(second->log, "routes");
  ASSERT_TRUE(rebuilt && rebuilt->applied);
  EXPECT_NE(rebuilt->detail.find("3 prefixes"), std::string::npos) << rebuilt->detail;
}

// Constant keys of prefix length 0 and 8 (tests/user/handlers/
// constant_prefixes.c): the generic handler asks the table, the
// specialized one has constant-key-lookup's answers, which are the
// kernel's trie's; both must say that a /16 and a /24 holding the address
// answer neither key, a /8 the second, a /0 both. Before the tables
// honoured the key's prefix length, the generic handler answered both
// keys with the /24.
TEST_P(LpmAsCodeOnUserTables, ConstantKeysOfShortPrefixLengthsAnswerAsTheKernelsTrie) {
  HandlerOptions options;
  options.cflags = {"-DLPM_KIND=" + GetParam()};
  options.entry = "constant_prefixes";
  auto generic = Handler::load(MORPHEUS_SOURCE_DIR "/tests/user/handlers/constant_prefixes.c",
                               options);
  ASSERT_THAT_EXPECTED(generic, llvm::Succeeded());
  auto specialized = Handler::load(
      MORPHEUS_SOURCE_DIR "/tests/user/handlers/constant_prefixes.c", options);
  ASSERT_THAT_EXPECTED(specialized, llvm::Succeeded());
  struct Step {
    uint32_t length, address, value;
    uint32_t wholeAnswer, shortAnswer; // what the /0 and /8 keys find afterwards
  };
  const Step steps[] = {{16, 0x0a0b0000u, 16, 0xffffffffu, 0xffffffffu},
                        {24, 0x0a0b0c00u, 24, 0xffffffffu, 0xffffffffu},
                        {8, 0x0a000000u, 8, 0xffffffffu, 8},
                        {0, 0, 100, 100, 8}};
  for (const Step &step : steps) {
    for (auto *handler : {generic->get(), specialized->get()})
      ASSERT_THAT_ERROR(handler->tables().update("routes", lpmKey(step.length, step.address),
                                                 bytesOfValue<uint32_t>(step.value)),
                        llvm::Succeeded());
    auto cycle = (*specialized)->specialize();
    ASSERT_THAT_EXPECTED(cycle, llvm::Succeeded());
    ASSERT_EQ(cycle->outcome, core::CycleOutcome::Installed);
    const core::SiteDecision *decision = decisionOn(cycle->log, "routes");
    ASSERT_TRUE(decision && decision->applied && decision->pass == "constant-key-lookup")
        << (decision ? decision->pass + ": " + decision->detail : "no decision");
    Bytes frame(16, 0);
    for (auto *handler : {generic->get(), specialized->get()}) {
      PacketResult result = runPacket((*handler).trampoline().current(), frame, 0);
      uint32_t whole, shortRoute;
      std::memcpy(&whole, result.bytes.data(), 4);
      std::memcpy(&shortRoute, result.bytes.data() + 4, 4);
      const char *which = handler == generic->get() ? "generic" : "specialized";
      EXPECT_EQ(whole, step.wholeAnswer) << which << ", /0 key after the /" << step.length;
      EXPECT_EQ(shortRoute, step.shortAnswer) << which << ", /8 key after the /" << step.length;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(UserLpm, LpmAsCodeOnUserTables, ::testing::ValuesIn(testing::lpmKinds()),
                         [](const auto &info) { return testing::lpmKindTestName(info.param); });

} // namespace
} // namespace morpheus::user
