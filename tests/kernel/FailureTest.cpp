// When something goes wrong the running program keeps running and the
// error says what and where.
#include "PolicyFwd.h"

#include <bpf/bpf.h>
#include <linux/bpf.h>

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
  EXPECT_FALSE(failed.installed);
  EXPECT_EQ(failed.outcome, "failed: attach point refused the program");
  EXPECT_EQ(fwd.opt().activeFd(), running);
  EXPECT_EQ(fwd.opt().installedVersion(), version);
  // The stale program still answers correctly: its guard defers to the original.
  EXPECT_EQ(runOnce(running, buildPacket(PacketSpec{})).verdict, uint32_t(XDP_PASS));

  fwd.opt().install = nullptr;
  EXPECT_TRUE(fwd.opt().runCycle().installed) << "the next cycle retries";
}

// A pass that crashes (here on purpose, through the test-only switch) costs
// one cycle: the process lives on, the running program is unchanged and
// still correct, and the next cycle specializes as if nothing happened.
TEST(Failure, CrashingPassCostsOneCycleNotTheProcess) {
  PolicyFwd fwd;
  ASSERT_TRUE(fwd.ok());
  fwd.setConfig(CFG_POLICY_ENABLED, ACTION_DROP);
  fwd.specialize();
  int running = fwd.opt().activeFd();

  fwd.setConfig(CFG_POLICY_ENABLED, ACTION_PASS);
  setenv("MORPHEUS_TEST_CRASH_PASSES", "1", 1);
  runtime::CycleReport crashed = fwd.opt().runCycle();
  unsetenv("MORPHEUS_TEST_CRASH_PASSES");
  EXPECT_FALSE(crashed.installed);
  EXPECT_NE(crashed.outcome.find("crashed (signal 11)"), std::string::npos) << crashed.outcome;
  EXPECT_NE(crashed.outcome.find("policy_fwd"), std::string::npos) << crashed.outcome;
  EXPECT_EQ(fwd.opt().activeFd(), running);
  EXPECT_EQ(runOnce(running, buildPacket(PacketSpec{})).verdict, uint32_t(XDP_PASS));

  runtime::CycleReport after = fwd.opt().runCycle();
  ASSERT_TRUE(after.installed) << after.outcome;
  EXPECT_EQ(runOnce(fwd.opt().activeFd(), buildPacket(PacketSpec{})).verdict,
            uint32_t(XDP_PASS));
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
  EXPECT_NE(message.find("8-byte keys"), std::string::npos) << message;
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

TEST(ProgramTypes, ProgramsWithoutAFallbackStayUnspecialized) {
  runtime::OptimizerOptions options;
  auto created =
      runtime::Optimizer::create(sourcePath("tests/kernel/two_programs.bpf.c"), options);
  ASSERT_TRUE(bool(created)) << llvm::toString(created.takeError());
  runtime::Optimizer &opt = **created;
  uint32_t zero = 0, pass = XDP_PASS;
  ASSERT_EQ(bpf_map_update_elem(opt.mapFd("verdict"), &zero, &pass, BPF_ANY), 0);
  runtime::CycleReport report = opt.runCycle();
  ASSERT_TRUE(report.installed) << report.outcome;
  bool entrySpecialized = false, egressKept = false;
  for (const core::SiteDecision &decision : report.log.decisions) {
    entrySpecialized |= decision.function == "entry" && decision.applied;
    egressKept |= decision.function == "egress" && !decision.applied &&
                  decision.detail.find("without a guard") != std::string::npos;
    EXPECT_FALSE(decision.function == "egress" && decision.applied);
  }
  EXPECT_TRUE(entrySpecialized);
  EXPECT_TRUE(egressKept);
  EXPECT_EQ(runOnce(opt.activeFd(), buildPacket(PacketSpec{})).verdict, uint32_t(XDP_PASS));
}

} // namespace
} // namespace morpheus::testing
