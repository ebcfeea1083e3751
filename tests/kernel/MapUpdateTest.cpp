// A control-plane update through Morpheus is visible to the very next
// packet: the running specialized program falls back to the original at
// once, and the next compilation specializes for the new contents.
#include "PolicyFwd.h"

#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <linux/in.h>

#include <cstdlib>

namespace morpheus::testing {
namespace {

std::string hex(const Bytes &bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (uint8_t byte : bytes) {
    out += digits[byte >> 4];
    out += digits[byte & 15];
  }
  return out;
}

int morpheusCli(const std::string &arguments) {
  std::string command = binPath("morpheus") + " " + arguments;
  return WEXITSTATUS(std::system(command.c_str()));
}

class MapUpdate : public ::testing::Test {
protected:
  PinDir pins{"update"};
};

TEST_F(MapUpdate, CliUpdateReachesNextPacketBeforeAndAfterRecompilation) {
  PolicyFwd fwd(pins.path());
  ASSERT_TRUE(fwd.ok());
  fwd.setConfig(CFG_POLICY_ENABLED, ACTION_PASS);
  policy_key key = policyKey(0x0a000001, 80, IPPROTO_UDP);
  fwd.setPolicy(key, policyValue(ACTION_DROP));
  fwd.specialize();
  int before = fwd.opt().activeFd();
  Bytes packet = buildPacket(PacketSpec{.daddr = 0x0a000001, .dport = 80});
  ASSERT_EQ(runOnce(before, packet).verdict, uint32_t(XDP_DROP));

  std::string pin = pins.path() + "/policy";
  ASSERT_EQ(morpheusCli("map update " + pin + " " + hex(bytesOf(key)) + " " +
                        hex(bytesOf(policyValue(ACTION_PASS)))),
            0);
  // Same program as before the update: its guard now defers to the original.
  EXPECT_EQ(runOnce(before, packet).verdict, uint32_t(XDP_PASS));

  runtime::CycleReport report = fwd.specialize();
  int after = fwd.opt().activeFd();
  ASSERT_NE(after, before);
  EXPECT_EQ(report.version, fwd.opt().guard().version());
  EXPECT_EQ(runOnce(after, packet).verdict, uint32_t(XDP_PASS));
  EXPECT_FALSE(fwd.references(after, "policy"));

  ASSERT_EQ(morpheusCli("map delete " + pin + " " + hex(bytesOf(key))), 0);
  EXPECT_EQ(runOnce(after, packet).verdict, uint32_t(XDP_PASS)); // default action
  fwd.setConfig(CFG_POLICY_ENABLED, ACTION_DROP);
  EXPECT_EQ(runOnce(after, packet).verdict, uint32_t(XDP_DROP));
  fwd.specialize();
  EXPECT_EQ(runOnce(fwd.opt().activeFd(), packet).verdict, uint32_t(XDP_DROP));
}

TEST_F(MapUpdate, ValueOnlyChangeRespecializesEvenWithoutGuardBump) {
  // An update that bypasses Morpheus (plain bpf syscall) is not guarded, but
  // the next cycle still sees that the inlined value changed.
  PolicyFwd fwd(pins.path());
  ASSERT_TRUE(fwd.ok());
  fwd.setConfig(CFG_POLICY_ENABLED, ACTION_PASS);
  fwd.specialize();
  EXPECT_EQ(fwd.opt().runCycle().outcome, "unchanged");
  config dropAll = {CFG_POLICY_ENABLED, ACTION_DROP};
  uint32_t zero = 0;
  ASSERT_EQ(bpf_map_update_elem(fwd.opt().mapFd("config"), &zero, &dropAll, BPF_ANY), 0);
  fwd.specialize();
  Bytes packet = buildPacket(PacketSpec{});
  EXPECT_EQ(runOnce(fwd.opt().activeFd(), packet).verdict, uint32_t(XDP_DROP));
}

TEST_F(MapUpdate, CompilationDuringAnUpdateNeverValidatesStaleContents) {
  // The worst interleaving, made deterministic: a cycle runs after the
  // update began but before the map write lands, so it could only
  // specialize the old contents. It must not install anything.
  PolicyFwd fwd;
  ASSERT_TRUE(fwd.ok());
  fwd.setConfig(CFG_POLICY_ENABLED, ACTION_PASS);
  policy_key key = policyKey(0x0a000001, 80, IPPROTO_UDP);
  fwd.setPolicy(key, policyValue(ACTION_DROP));
  fwd.specialize();
  Bytes packet = buildPacket(PacketSpec{.daddr = 0x0a000001, .dport = 80});
  {
    bpf::GuardWord::Update update(&fwd.opt().guard());
    runtime::CycleReport racing = fwd.opt().runCycle();
    EXPECT_FALSE(racing.installed) << racing.outcome;
    EXPECT_TRUE(racing.outcome.starts_with("deferred")) << racing.outcome;
    policy_value pass = policyValue(ACTION_PASS);
    ASSERT_EQ(bpf_map_update_elem(fwd.opt().mapFd("policy"), &key, &pass, BPF_ANY), 0);
  }
  EXPECT_EQ(runOnce(fwd.opt().activeFd(), packet).verdict, uint32_t(XDP_PASS))
      << "code compiled mid-update still trusted the old entry";
  fwd.specialize();
  EXPECT_EQ(runOnce(fwd.opt().activeFd(), packet).verdict, uint32_t(XDP_PASS));
}

TEST_F(MapUpdate, BadCliInputIsRejectedAndChangesNothing) {
  PolicyFwd fwd(pins.path());
  ASSERT_TRUE(fwd.ok());
  uint64_t version = fwd.opt().guard().version();
  std::string pin = pins.path() + "/policy";
  EXPECT_EQ(morpheusCli("map update " + pin + " 0a000001 01000000 2>/dev/null"), 1)
      << "a 4-byte key for an 8-byte map";
  EXPECT_EQ(morpheusCli("map update " + pin + " zz 00 2>/dev/null"), 1);
  EXPECT_EQ(morpheusCli("map update " + pins.path() + "/nosuchmap 00 00 2>/dev/null"), 1);
  EXPECT_EQ(morpheusCli("map update " + pin + " 2>/dev/null"), 2);
  EXPECT_EQ(fwd.opt().guard().version(), version) << "rejected input bumped the guard";
  uint8_t next[8];
  EXPECT_NE(bpf_map_get_next_key(fwd.opt().mapFd("policy"), nullptr, next), 0)
      << "rejected input changed the map";
}

} // namespace
} // namespace morpheus::testing
