// When something goes wrong the running program keeps running and the
// error says what and where.
#include "PolicyFwd.h"

#include <bpf/bpf.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/in.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <llvm/Testing/Support/Error.h>

namespace morpheus::testing {
namespace {

TEST(Failure, RejectedInstallKeepsTheRunningProgram) {
  PolicyFwd fwd;
  ASSERT_TRUE(fwd.ok());
  fwd.setConfig(CFG_POLICY_ENABLED, ACTION_DROP);
  fwd.specialize();
  int running = fwd.opt().activeFd();
  uint64_t version = fwd.opt().installedVersion();

  fwd.opt().install = [](int) { return makeError("attach point refused the program"); };
  fwd.setConfig(CFG_POLICY_ENABLED, ACTION_PASS);
  runtime::CycleReport failed = fwd.opt().runCycle();
  EXPECT_FALSE(failed.installed());
  EXPECT_EQ(failed.outcome, runtime::CycleOutcome::Failed);
  EXPECT_EQ(failed.detail, "attach point refused the program");
  EXPECT_EQ(fwd.opt().activeFd(), running);
  EXPECT_EQ(fwd.opt().installedVersion(), version);
  // The stale program still answers correctly: its guard defers to the original.
  EXPECT_EQ(runOnce(running, buildPacket(PacketSpec{})).verdict, uint32_t(XDP_PASS));

  fwd.opt().install = nullptr;
  EXPECT_TRUE(fwd.opt().runCycle().installed()) << "the next cycle retries";
}

// FaultInjection::crashAfterTablePasses makes the pipeline crash inside the
// compiler, as a broken pass would (a signal, or an LLVM fatal error that
// would otherwise exit the process): the cycle fails, the running program
// stays, and the next cycle (pristine IR re-read) installs.
TEST(Failure, CrashInAPassCostsOneCycleNotTheProcess) {
  PolicyFwd fwd;
  ASSERT_TRUE(fwd.ok());
  fwd.setConfig(CFG_POLICY_ENABLED, ACTION_DROP);
  fwd.specialize();
  uint32_t action = ACTION_PASS;
  using Crash = core::FaultInjection::Crash;
  for (auto [crash, how, says] :
       {std::tuple{Crash::Segv, "segv", "policy_fwd.bpf.c: specialization crashed"},
        std::tuple{Crash::Abort, "abort", "policy_fwd.bpf.c: specialization crashed"},
        std::tuple{Crash::FatalError, "fatal error",
                   "policy_fwd.bpf.c: specialization failed inside LLVM: test-only"}}) {
    int running = fwd.opt().activeFd();
    fwd.setConfig(CFG_POLICY_ENABLED, action);
    fwd.opt().injectFaults({.crashAfterTablePasses = crash});
    runtime::CycleReport crashed = fwd.opt().runCycle();
    fwd.opt().injectFaults({});
    EXPECT_FALSE(crashed.installed()) << how;
    EXPECT_EQ(crashed.outcome, runtime::CycleOutcome::Failed);
    EXPECT_NE(crashed.detail.find(says), std::string::npos) << crashed.describe();
    EXPECT_EQ(fwd.opt().activeFd(), running);
    EXPECT_EQ(runOnce(running, buildPacket(PacketSpec{})).verdict,
              action == ACTION_PASS ? uint32_t(XDP_PASS) : uint32_t(XDP_DROP))
        << "the stale program must defer to the original";
    runtime::CycleReport next = fwd.opt().runCycle();
    EXPECT_TRUE(next.installed()) << how << ": " << next.describe();
    action = action == ACTION_PASS ? ACTION_DROP : ACTION_PASS;
  }
}

// A map the optimizer can no longer read (its fd replaced behind its back)
// fails the cycle with the map's name; once readable again, cycles install.
TEST(Failure, UnreadableMapFailsTheCycleByName) {
  PolicyFwd fwd;
  ASSERT_TRUE(fwd.ok());
  fwd.setConfig(CFG_POLICY_ENABLED, ACTION_DROP);
  fwd.setPolicy(policyKey(0x0a000001, 80, IPPROTO_UDP), policyValue(ACTION_PASS));
  fwd.specialize();
  int running = fwd.opt().activeFd();
  int policy = fwd.opt().mapFd("policy");
  int saved = dup(policy);
  int notAMap = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(saved, 0);
  ASSERT_EQ(dup2(notAMap, policy), policy);
  fwd.setConfig(CFG_POLICY_ENABLED, ACTION_PASS);
  runtime::CycleReport failed = fwd.opt().runCycle();
  ASSERT_EQ(dup2(saved, policy), policy);
  close(saved);
  close(notAMap);
  EXPECT_FALSE(failed.installed());
  EXPECT_EQ(failed.outcome, runtime::CycleOutcome::Failed);
  EXPECT_TRUE(failed.detail.starts_with("map 'policy'")) << failed.describe();
  EXPECT_EQ(fwd.opt().activeFd(), running);
  EXPECT_TRUE(fwd.opt().runCycle().installed());
}

// Removed pins (the whole pin directory here) are pinned again, guard
// included, so `morpheus map` and client libraries keep reaching the
// program; a pin path taken by another map is reported and left alone.
TEST(Failure, RemovedPinsAreRepaired) {
  PinDir pins("repair");
  PolicyFwd fwd(pins.path());
  ASSERT_TRUE(fwd.ok());
  fwd.setConfig(CFG_POLICY_ENABLED, ACTION_PASS);
  fwd.specialize();
  EXPECT_TRUE(fwd.opt().repairPins().empty());

  std::filesystem::remove_all(pins.path());
  std::vector<std::string> notes = fwd.opt().repairPins();
  for (const char *name : {"map 'policy'", "map 'morpheus_guard'"})
    EXPECT_TRUE(std::any_of(notes.begin(), notes.end(), [&](const std::string &note) {
      return note.starts_with(name) && note.find("pinned again") != std::string::npos;
    })) << name;
  EXPECT_TRUE(fwd.opt().repairPins().empty());

  auto updater = bpf::MapUpdater::open(pins.path() + "/policy");
  ASSERT_THAT_EXPECTED(updater, llvm::Succeeded());
  EXPECT_TRUE(updater->guarded()) << "the guard pin came back too";
  policy_key key = policyKey(0x0a000001, 80, IPPROTO_UDP);
  ASSERT_FALSE(bool(updater->update(bytesOf(key), bytesOf(policyValue(ACTION_DROP)))));
  Bytes packet = buildPacket(PacketSpec{.daddr = 0x0a000001, .dport = 80});
  EXPECT_EQ(runOnce(fwd.opt().activeFd(), packet).verdict, uint32_t(XDP_DROP));

  std::string policyPin = pins.path() + "/policy";
  ASSERT_EQ(unlink(policyPin.c_str()), 0);
  int impostor = bpf_map_create(BPF_MAP_TYPE_HASH, "policy", 8, 16, 8, nullptr);
  ASSERT_GE(impostor, 0);
  ASSERT_EQ(bpf_obj_pin(impostor, policyPin.c_str()), 0);
  close(impostor);
  notes = fwd.opt().repairPins();
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("map 'policy': " + policyPin + " now holds another object"),
            std::string::npos)
      << notes[0];
}

TEST(Failure, PinnedMapWithAnotherLayoutIsRefusedByName) {
  PinDir pins("layout");
  // Someone left a "policy" map with 4-byte keys where Morpheus pins its maps.
  int impostor = bpf_map_create(BPF_MAP_TYPE_HASH, "policy", 4, 16, 8, nullptr);
  ASSERT_GE(impostor, 0);
  ASSERT_EQ(bpf_obj_pin(impostor, (pins.path() + "/policy").c_str()), 0);
  close(impostor);

  runtime::OptimizerOptions options;
  options.pinDir = pins.path();
  auto optimizer =
      runtime::Optimizer::create(sourcePath("examples/policy_fwd.bpf.c"), options);
  ASSERT_FALSE(bool(optimizer));
  std::string message = llvm::toString(optimizer.takeError());
  EXPECT_NE(message.find("map 'policy'"), std::string::npos) << message;
  // Every property that differs, field by field.
  EXPECT_NE(message.find("key size: declared 8, the map has 4"), std::string::npos) << message;
  EXPECT_NE(message.find("max_entries: declared 1024, the map has 8"), std::string::npos)
      << message;
  EXPECT_EQ(message.find("value size"), std::string::npos) << message;
}

TEST(Failure, PinnedMapsAreReusedAcrossRestarts) {
  PinDir pins("restart");
  policy_key key = policyKey(0x0a000001, 80, 17);
  // An instance removes the pins it made when it stops; an operator who
  // wants state kept pins the map once more, and a restart picks it up.
  {
    PolicyFwd first(pins.path());
    ASSERT_TRUE(first.ok());
    first.setPolicy(key, policyValue(ACTION_DROP));
    ASSERT_EQ(bpf_obj_pin(first.opt().mapFd("policy"), (pins.path() + "/kept").c_str()), 0);
  }
  ASSERT_EQ(rename((pins.path() + "/kept").c_str(), (pins.path() + "/policy").c_str()), 0);
  PolicyFwd second(pins.path());
  ASSERT_TRUE(second.ok());
  policy_value value;
  EXPECT_EQ(bpf_map_lookup_elem(second.opt().mapFd("policy"), &key, &value), 0)
      << "the restarted instance did not reuse the pinned map";
}

} // namespace
} // namespace morpheus::testing

namespace morpheus::testing {
namespace {

// The devmap program cannot join the entry's fallback program array; it
// falls back inside the program instead, so it is specialized and guarded.
TEST(ProgramTypes, ProgramsWithoutAFallbackSlotFallBackInsideTheProgram) {
  runtime::OptimizerOptions options;
  auto created =
      runtime::Optimizer::create(sourcePath("tests/kernel/two_programs.bpf.c"), options);
  ASSERT_THAT_EXPECTED(created, llvm::Succeeded());
  runtime::Optimizer &opt = **created;
  uint32_t zero = 0, pass = XDP_PASS;
  ASSERT_EQ(bpf_map_update_elem(opt.mapFd("verdict"), &zero, &pass, BPF_ANY), 0);
  runtime::CycleReport report = opt.runCycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  bool entrySpecialized = false, egressSpecialized = false;
  for (const core::SiteDecision &decision : report.log.decisions) {
    entrySpecialized |= decision.function == "entry" && decision.applied;
    egressSpecialized |= decision.function == "egress" && decision.applied;
  }
  EXPECT_TRUE(entrySpecialized);
  EXPECT_TRUE(egressSpecialized);
  for (const core::GuardDecision &guard : report.log.guards)
    EXPECT_EQ(guard.fallback, core::Fallback::InProgram) << guard.function << ": " << guard.detail;
  EXPECT_EQ(report.log.guards.size(), 2u);
  EXPECT_EQ(runOnce(opt.activeFd(), buildPacket(PacketSpec{})).verdict, uint32_t(XDP_PASS));
}

} // namespace
} // namespace morpheus::testing
