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
// An adopted program whose maps are kept generic depends on nothing polled:
// its version serves on across the restart too (the trampoline's slot is
// watched and never empties); a polled one gives way to the owner's program
// between the agents.
#include "AgentRestart.h"
#include "XdpHooks.h"

#include <signal.h>

#include <gtest/gtest.h>
#include <llvm/Support/FormatVariadic.h>

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
  ProgramWatcher watcher = linkWatcher(scene.loadedLink());
  ProgramWatcher adoptedHook = linkWatcher(scene.ownerLink());
  std::this_thread::sleep_for(300ms);

  kill(first->pid(), SIGKILL);
  EXPECT_FALSE(first->wait(10s)) << "killed, not exited";
  first.reset();
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(linkProgramAt(scene.loadedLink()), before.loadedProgram)
      << "the specialized version serves on after kill -9";
  EXPECT_EQ(scene.owner.linkProgram(), before.trampoline) << "the trampoline stays on the hook";
  EXPECT_EQ(servedThrough(before.trampoline, scene.ownerArray()), 0u)
      << "the adopted version depends on maps the owner writes, which nobody polls now: the "
         "owner's program serves";
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
  ProgramWatcher watcher = linkWatcher(scene.loadedLink());
  ProgramWatcher adoptedHook = linkWatcher(scene.ownerLink());
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

// The adopted program with its maps kept generic (other_writers:
// keep-generic): its versions depend on nothing polled, so the agent pins
// the trampoline's Morpheus array (and the array the version falls back
// through) and the version serves on after kill -9 or a handover; the
// next agent lets it serve until its own first cycle replaces it. A
// watcher on the trampoline's slot sees the old agent's version, then the
// new one's, and never an empty slot (the owner's program serving).
void adoptedVersionServesAcross(const std::string &tag, bool killNine) {
  Scene scene(tag, /*socketSeenByAgent=*/"", "    other_writers: keep-generic\n");
  ASSERT_GE(scene.owner.program, 0);
  std::optional<LoadedMaps> maps;
  std::optional<ChildProcess> first(std::in_place, tag, scene.agent());
  startServing(scene, *first, maps);
  if (::testing::Test::HasFatalFailure())
    return;
  Serving before = serving(scene);
  ASSERT_NE(before.adoptedVersion, 0u);
  EXPECT_TRUE(waitFor([&] { return access(scene.servedArray().c_str(), F_OK) == 0; }, 5s))
      << "a version that depends on nothing polled is pinned to serve on\n"
      << first->log();
  nlohmann::json status =
      askControlSocket(scene.socket, {{"op", "status"}, {"program", "adopted"}});
  EXPECT_EQ(status["status"]["kept_generic"],
            nlohmann::json(std::vector<std::string>{"config", "policy", "stats"}))
      << status.dump();
  Traffic traffic(scene.loaded, scene.adopted);
  ProgramWatcher watcher = linkWatcher(scene.loadedLink());
  ProgramWatcher adoptedHook = linkWatcher(scene.ownerLink());
  ProgramWatcher slot([&] { return servedThrough(before.trampoline, scene.ownerArray()); });
  std::this_thread::sleep_for(300ms);

  std::optional<ChildProcess> second;
  if (killNine) {
    kill(first->pid(), SIGKILL);
    EXPECT_FALSE(first->wait(10s)) << "killed, not exited";
    std::this_thread::sleep_for(300ms);
    EXPECT_EQ(servedThrough(before.trampoline, scene.ownerArray()), before.adoptedVersion)
        << "the adopted version serves on after kill -9";
    second.emplace(tag + "-again", scene.agent());
  } else {
    second.emplace(tag + "-next", scene.agent(/*takeOver=*/true));
    std::optional<int> status = first->wait(60s);
    ASSERT_TRUE(status) << "the old agent did not exit\n" << first->log();
    EXPECT_EQ(*status, 0) << first->log();
    EXPECT_NE(first->log().find("the version it runs serves on (it depends on nothing polled)"),
              std::string::npos)
        << first->log();
  }
  first.reset();
  expectNextAgentTookOver(scene, *second, before, traffic, *maps, watcher, adoptedHook, &slot);
  EXPECT_NE(second->log().find(llvm::formatv("the version an earlier run left (program {0}) "
                                             "serves on until this run's first cycle",
                                             before.adoptedVersion)
                                   .str()),
            std::string::npos)
      << second->log();
  std::vector<ProgramWatcher::Seen> seen = slot.programs();
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.front().id, before.adoptedVersion);
  EXPECT_GE(seen.size(), 2u) << "the new agent installed its own version";
  std::string served;
  for (const ProgramWatcher::Seen &program : seen)
    served += " " + std::to_string(program.id);
  for (const ProgramWatcher::Seen &program : seen)
    EXPECT_NE(program.id, 0u) << "the trampoline's slot emptied (the owner's program served): "
                              << served << "\n"
                              << second->log();
}

TEST(AgentRestart, AnAdoptedVersionThatDependsOnNothingPolledServesOnAfterKillNine) {
  adoptedVersionServesAcross("agentkeepkill", /*killNine=*/true);
}

TEST(AgentRestart, AnAdoptedVersionThatDependsOnNothingPolledServesAcrossATakeOver) {
  adoptedVersionServesAcross("agentkeepup", /*killNine=*/false);
}

} // namespace
} // namespace morpheus::testing
