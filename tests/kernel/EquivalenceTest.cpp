// The specialized program must do exactly what the original does: same
// verdict, same output bytes, same counter updates, for every packet of a
// generated set, under several configurations, and also once its guard has
// been tripped (it then hands packets to the original).
#include "PolicyFwd.h"

#include <linux/if_ether.h>
#include <linux/in.h>

#include <random>

namespace morpheus::testing {
namespace {

struct Configuration {
  const char *name;
  uint32_t flags;
  uint32_t defaultAction;
  unsigned entries;    // policy entries to install
  bool policyInlined;  // the specialized code no longer references `policy`
};

std::vector<policy_key> keysFor(unsigned count) {
  std::vector<policy_key> keys;
  for (unsigned i = 0; i < count; ++i) {
    uint8_t proto = i % 3 == 0 ? IPPROTO_UDP : i % 3 == 1 ? IPPROTO_TCP : IPPROTO_ICMP;
    keys.push_back(policyKey(0x0a000001 + i, proto == IPPROTO_ICMP ? 0 : 80 + i % 4, proto));
  }
  return keys;
}

PacketSpec specFor(const policy_key &key) {
  PacketSpec spec;
  spec.daddr = ntohl(key.daddr);
  spec.dport = ntohs(key.dport);
  spec.protocol = key.proto;
  return spec;
}

std::vector<Bytes> corpus(const std::vector<policy_key> &keys) {
  std::vector<Bytes> packets;
  std::mt19937 random(42);
  for (const policy_key &key : keys) {
    PacketSpec spec = specFor(key);
    packets.push_back(buildPacket(spec));
    spec.dport += 1000; // same address, another port
    packets.push_back(buildPacket(spec));
  }
  for (int i = 0; i < 40; ++i) { // addresses nobody configured
    PacketSpec spec;
    spec.daddr = random();
    spec.dport = random() % 1024;
    spec.protocol = i % 2 ? IPPROTO_TCP : IPPROTO_UDP;
    packets.push_back(buildPacket(spec));
  }
  PacketSpec base = keys.empty() ? PacketSpec{} : specFor(keys.front());
  Bytes whole = buildPacket(base);
  for (size_t length = ETH_HLEN; length < whole.size(); ++length)
    packets.emplace_back(whole.begin(), whole.begin() + length);
  for (uint8_t ttl : {0, 1, 2}) {
    PacketSpec spec = base;
    spec.ttl = ttl;
    packets.push_back(buildPacket(spec));
  }
  for (uint16_t frag : {0x2000, 0x0005, 0x4000}) { // MF, offset, DF
    PacketSpec spec = base;
    spec.fragOff = frag;
    packets.push_back(buildPacket(spec));
  }
  for (uint8_t ihl : {4, 6, 15}) {
    PacketSpec spec = base;
    spec.ihl = ihl < 5 ? 5 : ihl;
    Bytes packet = buildPacket(spec);
    packet[ETH_HLEN] = 0x40 | ihl;
    packets.push_back(packet);
  }
  for (uint16_t type : {ETH_P_IPV6, ETH_P_ARP, ETH_P_8021Q}) {
    PacketSpec spec = base;
    spec.etherType = type;
    packets.push_back(buildPacket(spec));
  }
  return packets;
}

void expectSameBehaviour(PolicyFwd &fwd, int original, int specialized,
                         const std::vector<Bytes> &packets) {
  size_t index = 0;
  for (const Bytes &packet : packets) {
    std::vector<uint64_t> before = fwd.stats();
    RunResult expected = runOnce(original, packet);
    std::vector<uint64_t> middle = fwd.stats();
    RunResult actual = runOnce(specialized, packet);
    std::vector<uint64_t> after = fwd.stats();
    SCOPED_TRACE("packet " + std::to_string(index++) + " (" +
                 std::to_string(packet.size()) + " bytes)");
    EXPECT_EQ(actual.verdict, expected.verdict);
    EXPECT_EQ(actual.output, expected.output);
    for (size_t stat = 0; stat < before.size(); ++stat)
      EXPECT_EQ(after[stat] - middle[stat], middle[stat] - before[stat])
          << "stat " << stat;
  }
}

class Equivalence : public ::testing::TestWithParam<Configuration> {};

TEST_P(Equivalence, SpecializedMatchesOriginal) {
  const Configuration &config = GetParam();
  PolicyFwd fwd;
  ASSERT_TRUE(fwd.ok());
  fwd.setConfig(config.flags, config.defaultAction);
  std::vector<policy_key> keys = keysFor(config.entries);
  for (size_t i = 0; i < keys.size(); ++i)
    fwd.setPolicy(keys[i], policyValue(i % 3, i));
  core::CycleReport report = fwd.specialize();
  ASSERT_TRUE(report.installed());

  int original = fwd.opt().originalFd();
  int specialized = fwd.opt().activeFd();
  ASSERT_NE(original, specialized);
  // The configuration array is always folded into constants.
  EXPECT_TRUE(PolicyFwd::inlined(report, "config"));
  EXPECT_TRUE(fwd.references(original, "config"));
  EXPECT_EQ(PolicyFwd::inlined(report, "policy"), config.policyInlined);
  EXPECT_FALSE(PolicyFwd::inlined(report, "stats")); // written per packet
  EXPECT_TRUE(fwd.references(specialized, "stats"));

  std::vector<Bytes> packets = corpus(keys.empty() ? keysFor(3) : keys);
  expectSameBehaviour(fwd, original, specialized, packets);

  // A tripped guard sends every packet to the original: still the same.
  fwd.opt().guard().bump();
  expectSameBehaviour(fwd, original, specialized, packets);
}

INSTANTIATE_TEST_SUITE_P(
    PolicyFwd, Equivalence,
    ::testing::Values(
        Configuration{"AllFeaturesSmallPolicy",
                      CFG_POLICY_ENABLED | CFG_TTL_CHECK | CFG_DROP_FRAGMENTS,
                      ACTION_PASS, 6, true},
        Configuration{"PolicyDisabledDefaultDrop", 0, ACTION_DROP, 6, true},
        Configuration{"EmptyPolicyTable", CFG_POLICY_ENABLED, ACTION_TX, 0, true},
        Configuration{"PolicyLargerThanInlineLimit", CFG_POLICY_ENABLED | CFG_TTL_CHECK,
                      ACTION_DROP, 100, false}),
    [](const ::testing::TestParamInfo<Configuration> &info) { return info.param.name; });

} // namespace
} // namespace morpheus::testing
