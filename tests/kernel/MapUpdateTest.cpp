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

// One shell word: the bytes in hex, quoted.
std::string hex(const Bytes &bytes) { return "'" + toHex(bytes) + "'"; }

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

  core::CycleReport report = fwd.specialize();
  int after = fwd.opt().activeFd();
  ASSERT_NE(after, before);
  EXPECT_EQ(report.version, fwd.opt().guard().version());
  EXPECT_EQ(runOnce(after, packet).verdict, uint32_t(XDP_PASS));
  EXPECT_TRUE(PolicyFwd::inlined(report, "policy"));

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
  EXPECT_EQ(fwd.opt().runCycle().outcome, core::CycleOutcome::Unchanged);
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
    auto update = bpf::GuardWord::Update::begin(&fwd.opt().guard());
    ASSERT_THAT_EXPECTED(update, llvm::Succeeded());
    core::CycleReport racing = fwd.opt().runCycle();
    EXPECT_FALSE(racing.installed()) << racing.describe();
    EXPECT_EQ(racing.outcome, core::CycleOutcome::Deferred) << racing.describe();
    policy_value pass = policyValue(ACTION_PASS);
    ASSERT_EQ(bpf_map_update_elem(fwd.opt().mapFd("policy"), &key, &pass, BPF_ANY), 0);
  }
  EXPECT_EQ(runOnce(fwd.opt().activeFd(), packet).verdict, uint32_t(XDP_PASS))
      << "code compiled mid-update still trusted the old entry";
  fwd.specialize();
  EXPECT_EQ(runOnce(fwd.opt().activeFd(), packet).verdict, uint32_t(XDP_PASS));
}

// Exit status and everything the command printed.
std::pair<int, std::string> morpheusCliOutput(const std::string &arguments) {
  std::string command = binPath("morpheus") + " " + arguments + " 2>&1";
  std::string text;
  FILE *pipe = popen(command.c_str(), "r");
  char buffer[4096];
  while (size_t got = fread(buffer, 1, sizeof(buffer), pipe))
    text.append(buffer, got);
  return {WEXITSTATUS(pclose(pipe)), text};
}

// An update through Morpheus always invalidates specialized code: with the
// guard's pin beside the map removed (a running Morpheus pins it again only
// at its next period), `morpheus map` bumps the guard that is held with the
// map: by the running Morpheus (here this process) between versions, by
// the specialized program once there is one. The next packet sees each
// update; none is written silently stale.
TEST_F(MapUpdate, AGuardPinRemovedBetweenUpdatesStillInvalidates) {
  PolicyFwd fwd(pins.path());
  ASSERT_TRUE(fwd.ok());
  fwd.setConfig(CFG_POLICY_ENABLED, ACTION_PASS);
  policy_key key = policyKey(0x0a000001, 80, IPPROTO_UDP);
  std::string pin = pins.path() + "/policy", guardPin = pins.path() + "/morpheus_guard";
  auto update = [&](uint32_t action) {
    return morpheusCliOutput("map update " + pin + " " + hex(bytesOf(key)) + " " +
                             hex(bytesOf(policyValue(action))));
  };
  ASSERT_EQ(unlink(guardPin.c_str()), 0);
  uint64_t version = fwd.opt().guard().version();
  auto [status, said] = update(ACTION_DROP);
  EXPECT_EQ(status, 0) << said;
  EXPECT_EQ(said, "morpheus: warning: the guard's pin beside " + pin + " is gone (a running "
                  "Morpheus pins it again within a period): bumping the guard process " +
                  std::to_string(getpid()) + " (kernel_tests) holds with the map\n");
  EXPECT_GT(fwd.opt().guard().version(), version) << "no specialized code yet, but a "
                                                     "compilation in flight must not install";

  fwd.opt().repairPins();
  ASSERT_EQ(access(guardPin.c_str(), F_OK), 0) << "pinned again";
  fwd.specialize();
  int specialized = fwd.opt().activeFd();
  Bytes packet = buildPacket(PacketSpec{.daddr = 0x0a000001, .dport = 80});
  ASSERT_EQ(runOnce(specialized, packet).verdict, uint32_t(XDP_DROP));
  ASSERT_EQ(update(ACTION_PASS).first, 0);
  EXPECT_EQ(runOnce(specialized, packet).verdict, uint32_t(XDP_PASS));

  fwd.specialize();
  specialized = fwd.opt().activeFd();
  ASSERT_EQ(runOnce(specialized, packet).verdict, uint32_t(XDP_PASS));
  ASSERT_EQ(unlink(guardPin.c_str()), 0);
  std::tie(status, said) = update(ACTION_DROP);
  EXPECT_EQ(status, 0) << said;
  // Found through a program using both maps, or (the version inlined the
  // map and reads it no more) the process holding both.
  EXPECT_NE(said.find("bumping the guard "), std::string::npos) << said;
  EXPECT_EQ(runOnce(specialized, packet).verdict, uint32_t(XDP_DROP))
      << "the specialized program ran on the old entry after the update";
}

TEST_F(MapUpdate, BadCliInputIsRejectedAndChangesNothing) {
  PolicyFwd fwd(pins.path());
  ASSERT_TRUE(fwd.ok());
  policy_key key = policyKey(0x0a000001, 80, IPPROTO_UDP);
  fwd.setPolicy(key, policyValue(ACTION_DROP));
  uint64_t version = fwd.opt().guard().version();
  std::string pin = pins.path() + "/policy", missing = pins.path() + "/nosuchmap";
  std::string k = hex(bytesOf(key)), v = hex(bytesOf(policyValue(ACTION_PASS)));
  struct Case {
    std::string arguments;
    int status;
    std::string message;
  };
  const Case cases[] = {
      {"map update " + pin + " 0a000001 " + v, 1,
       "map '" + pin + "': key has 4 bytes, the map's keys have 8"},
      {"map update " + pin + " " + k + " 0100", 1,
       "map '" + pin + "': value has 2 bytes, the map's values have 16"},
      {"map update " + pin + " zz " + v, 1, "map '" + pin + "' key: unexpected character 'z'"},
      {"map update " + pin + " " + k + " 0a0", 1,
       "map '" + pin + "' value: '0a0' has an odd number of hex digits"},
      {"map delete " + pin + " 0a00", 1, "map '" + pin + "': key has 2 bytes"},
      {"map update " + missing + " 00 00", 1,
       "map '" + missing + "': cannot open the pinned map: No such file"},
      {"map dump " + missing, 1, "map '" + missing + "': cannot open the pinned map"},
      {"map update " + pin + " " + k + " " + v + " --flags sometimes", 2,
       "morpheus: map update: --flags: 'sometimes' is not one of any, exist, noexist"},
      {"map update " + pin, 2, "morpheus: map update: KEY is required"},
      {"map update " + pins.path() + "/morpheus_guard 00000000 " + std::string(32, '0'), 1,
       "morpheus: map '" + pins.path() + "/morpheus_guard': Morpheus's own guard "
       "(morpheus_guard), not a table of the program"}};
  for (const Case &bad : cases) {
    auto [status, text] = morpheusCliOutput(bad.arguments);
    EXPECT_EQ(status, bad.status) << bad.arguments << "\n" << text;
    EXPECT_NE(text.find(bad.message), std::string::npos) << bad.arguments << "\n" << text;
  }
  EXPECT_EQ(fwd.opt().guard().version(), version) << "rejected input bumped the guard";

  // Well-formed, but the kernel refuses it (the key exists): named, and
  // the map keeps its entry.
  auto [status, text] = morpheusCliOutput("map update " + pin + " " + k + " " + v +
                                          " --flags noexist");
  EXPECT_EQ(status, 1);
  EXPECT_NE(text.find("map '" + pin + "': update of key"), std::string::npos) << text;
  EXPECT_NE(text.find("File exists"), std::string::npos) << text;

  policy_value value;
  ASSERT_EQ(bpf_map_lookup_elem(fwd.opt().mapFd("policy"), &key, &value), 0);
  EXPECT_EQ(value.action, uint32_t(ACTION_DROP)) << "rejected input changed the entry";
  uint8_t next[8];
  EXPECT_EQ(bpf_map_get_next_key(fwd.opt().mapFd("policy"), &key, next), -ENOENT)
      << "rejected input added an entry";
}

} // namespace
} // namespace morpheus::testing
