// Pre-swap shadow validation in the user-space backend (ShadowCopies, run
// by the one specialization cycle): a candidate that treats a sample packet
// differently from the generic handler is refused and never runs; a
// correct one is installed; the live tables are never written by the
// copies, whatever the sample does to them.
#include "UserRouter.h"
#include "runtime/UserShadowSamples.h"

#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>

namespace morpheus::user {
namespace {

using namespace testing;

// The router's sample packets (every outcome at least once), whatever the
// snapshot holds.
HandlerOptions::Shadow routerSamples() {
  HandlerOptions::Shadow shadow;
  shadow.packets = uint32_t(samplePackets().size());
  shadow.samples = [](const core::TableCatalog &, const core::TableSnapshot &, uint64_t,
                      uint32_t) {
    std::vector<ShadowPacket> packets;
    for (Bytes &frame : samplePackets())
      packets.push_back({std::move(frame), 0});
    return packets;
  };
  return shadow;
}

// Compare chains matching the last key byte off by one
// (FaultInjection::breakKeyCompare) make the neighbour lookups miss: the
// first sample packet forwarded through a neighbour is passed instead.
TEST(UserShadowValidation, RefusesACandidateThatTreatsASamplePacketDifferently) {
  core::FaultInjection broken;
  broken.breakKeyCompare = true;
  HandlerOptions options = routerOptions({}, broken);
  options.shadow = routerSamples();
  auto router = loadRouter(options);
  ASSERT_TRUE(router);
  configure(router->tables());
  auto before = router->tables().dump();
  auto cycle = router->specialize();
  ASSERT_THAT_EXPECTED(cycle, llvm::Succeeded());
  EXPECT_EQ(cycle->outcome, core::CycleOutcome::Refused) << cycle->describe();
  EXPECT_NE(cycle->detail.find("shadow validation: packet "), std::string::npos) << cycle->detail;
  EXPECT_EQ(router->trampoline().current(), router->generic()); // never ran
  EXPECT_EQ(router->tables().dump(), before); // the copies' counters are their own
}

TEST(UserShadowValidation, InstallsACorrectCandidateAndLeavesTheLiveTablesAlone) {
  HandlerOptions options = routerOptions();
  options.shadow = routerSamples();
  auto router = loadRouter(options);
  ASSERT_TRUE(router);
  configure(router->tables());
  auto before = router->tables().dump();
  for (int cycle = 0; cycle < 3; ++cycle) {
    auto report = router->specialize();
    ASSERT_THAT_EXPECTED(report, llvm::Succeeded());
    ASSERT_EQ(report->outcome, core::CycleOutcome::Installed) << report->describe();
    EXPECT_GT(report->times.validationMs, 0);
    EXPECT_FALSE(report->times.validationPhases.empty());
  }
  EXPECT_NE(router->trampoline().current(), router->generic());
  EXPECT_EQ(router->tables().dump(), before);
}

// The runtime's packets aimed at the tables' keys (what `user-run` uses)
// find the broken chain too: they carry the neighbours' addresses.
TEST(UserShadowValidation, PacketsAimedAtTheTablesFindABrokenChain) {
  core::FaultInjection broken;
  broken.breakKeyCompare = true;
  HandlerOptions options = routerOptions({}, broken);
  options.shadow = runtime::packetsAimedAtTables(256);
  auto router = loadRouter(options);
  ASSERT_TRUE(router);
  configure(router->tables());
  auto cycle = router->specialize();
  ASSERT_THAT_EXPECTED(cycle, llvm::Succeeded());
  EXPECT_EQ(cycle->outcome, core::CycleOutcome::Refused) << cycle->describe();

  options.faults = {};
  auto correct = loadRouter(options);
  ASSERT_TRUE(correct);
  configure(correct->tables());
  auto installed = correct->specialize();
  ASSERT_THAT_EXPECTED(installed, llvm::Succeeded());
  EXPECT_EQ(installed->outcome, core::CycleOutcome::Installed) << installed->describe();
}

} // namespace
} // namespace morpheus::user
