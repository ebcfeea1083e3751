// Restarting the node agent (`morpheus daemon`) under traffic: kill -9, or
// an upgrade with --take-over while the old agent runs, neither detaches
// nor slows a data plane, and no packet is lost. The agent runs two
// programs: policy_fwd loaded and attached by Morpheus on one veth, and
// policy_fwd adopted from an owner (a plain libbpf loader in this test,
// attached through a pinned XDP link) on another. Frames flow through both
// veths the whole time; every one must be counted by the program's own
// stats map (a packet dropped by a failed tail call, or sent while nothing
// is attached, is counted by nobody). A watcher records every program the
// loaded program's link runs: each must be a specialized version (one that
// checks the guard), so the data plane never went back to generic code.
#include "AgentRestart.h"

#include <signal.h>

#include <gtest/gtest.h>

namespace morpheus::testing {
namespace {

using namespace std::chrono_literals;

TEST(AgentRestart, KillNineThenANewAgentTakesOverWithNoPacketLostOrGenericCode) {
  Scene scene("agentkill");
  ASSERT_GE(scene.owner.program, 0);
  std::optional<LoadedMaps> maps;
  std::optional<ChildProcess> first(std::in_place, "agentkill", scene.agent());
  startServing(scene, *first, maps);
  if (HasFatalFailure())
    return;
  Serving before = serving(scene);
  ASSERT_TRUE(specialized(before.loadedProgram));
  ASSERT_NE(before.adoptedVersion, 0u);
  Traffic traffic(scene.loaded, scene.adopted);
  LinkWatcher watcher(scene.loadedLink());
  LinkWatcher adoptedHook(scene.ownerLink());
  std::this_thread::sleep_for(300ms);

  kill(first->pid(), SIGKILL);
  EXPECT_FALSE(first->wait(10s)) << "killed, not exited";
  first.reset();
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(linkProgramAt(scene.loadedLink()), before.loadedProgram)
      << "the specialized version serves on after kill -9";
  EXPECT_EQ(scene.owner.linkProgram(), before.trampoline) << "the trampoline stays on the hook";
  // An update through Morpheus with no agent running (`morpheus map`
  // bumps the pinned guard): the version left serving falls back to the
  // original through its fallback array, which must still hold it (an
  // empty one answers XDP_ABORTED: packets nobody counts).
  ChildProcess update("agentkill-map",
                      {binPath("morpheus"), "map", "update", scene.loadedPins() + "/policy",
                       hex(policyKey(0x0a000001, 80, IPPROTO_UDP)),
                       hex(policyValue(ACTION_DROP, 100))});
  std::optional<int> updated = update.wait(20s);
  ASSERT_TRUE(updated && *updated == 0) << update.log();
  std::this_thread::sleep_for(300ms);

  ChildProcess second("agentkill-again", scene.agent());
  expectNextAgentTookOver(scene, second, before, traffic, *maps, watcher, adoptedHook);
}

TEST(AgentRestart, TakeOverWhileTheOldAgentRunsKeepsTheSpecializedVersionServing) {
  Scene scene("agentup");
  ASSERT_GE(scene.owner.program, 0);
  std::optional<LoadedMaps> maps;
  ChildProcess first("agentup", scene.agent());
  startServing(scene, first, maps);
  if (HasFatalFailure())
    return;
  Serving before = serving(scene);
  ASSERT_TRUE(specialized(before.loadedProgram));
  Traffic traffic(scene.loaded, scene.adopted);
  LinkWatcher watcher(scene.loadedLink());
  LinkWatcher adoptedHook(scene.ownerLink());
  std::this_thread::sleep_for(300ms);

  ChildProcess second("agentup-next", scene.agent(/*takeOver=*/true));
  std::optional<int> status = first.wait(60s);
  ASSERT_TRUE(status) << "the old agent did not exit\n" << first.log();
  EXPECT_EQ(*status, 0) << first.log();
  EXPECT_NE(first.log().find("agent: handed over; exiting"), std::string::npos) << first.log();
  EXPECT_NE(first.log().find("the running version stays attached for the next Morpheus"),
            std::string::npos)
      << first.log();
  expectNextAgentTookOver(scene, second, before, traffic, *maps, watcher, adoptedHook);
  EXPECT_NE(second.log().find("handed over; taking its programs over"), std::string::npos)
      << second.log();
}

} // namespace
} // namespace morpheus::testing
