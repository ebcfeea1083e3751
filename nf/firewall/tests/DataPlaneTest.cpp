// The data plane on the real kernel: verdicts and rule counters against the
// reference classifier for the ClassBench and generated rule sets, and the
// odd packets (port-range edges, ICMP/GRE, truncation, options, fragments,
// VLANs, IPv6, non-IP) and connection tracking.
#include "Harness.h"

#include <arpa/inet.h>
#include <llvm/Testing/Support/Error.h>

namespace morpheus::nf::firewall::testing {
namespace {

uint32_t ip(const char *text) { return packet::parseIpv4(text); }

struct RuleSetCase {
  const char *name;
  const char *file;
  size_t packets;
  bool mixedActions; // flip random rules to DROP, default ACCEPT: order matters
};

void PrintTo(const RuleSetCase &set, std::ostream *out) { *out << set.name; }

class MatchesReference : public ::testing::TestWithParam<RuleSetCase> {};

TEST_P(MatchesReference, ForPacketsInAndAroundTheRules) {
  const RuleSetCase &set = GetParam();
  std::vector<Rule> rules = rulesFromConfig(set.file);
  ASSERT_FALSE(rules.empty());
  LoadOptions options;
  if (set.mixedActions) {
    std::mt19937 random(7);
    for (Rule &rule : rules)
      rule.action = random() % 3 ? FW_ACCEPT : FW_DROP;
    options.defaultAction = FW_ACCEPT;
  }
  Firewall firewall;
  ASSERT_TRUE(firewall.ok());
  firewall.load(rules, options);
  size_t matched = 0;
  for (const Tuple &tuple : tuplesFor(rules, set.packets, 1)) {
    firewall.expectReference(rules, tuple);
    matched += referenceMatch(rules, tuple) < rules.size();
    if (HasFailure())
      break;
  }
  // The corpus must exercise the rules, not just the default.
  EXPECT_GT(matched, set.packets / 2);
}

INSTANTIATE_TEST_SUITE_P(
    Firewall, MatchesReference,
    ::testing::Values(RuleSetCase{"Fw1", "classbench-fw1-449-rules.txt", 3000, false},
                      RuleSetCase{"Fw1MixedActions", "classbench-fw1-449-rules.txt", 2000, true},
                      RuleSetCase{"Fw3", "classbench-fw3-411-rules.txt", 3000, false},
                      RuleSetCase{"Generated1000", "generated-1000-rules.txt", 3000, false},
                      RuleSetCase{"Generated4000", "generated-4000-rules.txt", 1500, false}),
    [](const ::testing::TestParamInfo<RuleSetCase> &info) { return info.param.name; });

TEST(Firewall, ReloadingSwitchesTheWholeRuleSetAtOnce) {
  std::vector<Rule> fw1 = rulesFromConfig("classbench-fw1-449-rules.txt");
  std::vector<Rule> fw3 = rulesFromConfig("classbench-fw3-411-rules.txt");
  Firewall firewall;
  ASSERT_TRUE(firewall.ok());
  // Each load fills the half left by the previous one: fw1 -> 1, fw3 -> 0,
  // fw1 -> 1 again (already there: nothing to rewrite), fw3 -> 0.
  for (const std::vector<Rule> *rules : {&fw1, &fw3, &fw1, &fw3}) {
    firewall.load(*rules);
    for (const Tuple &tuple : tuplesFor(*rules, 300, rules->size()))
      firewall.expectReference(*rules, tuple);
  }
}

TEST(Firewall, UnconfiguredFailsClosedButPassesNonIp) {
  Firewall firewall;
  ASSERT_TRUE(firewall.ok());
  EXPECT_EQ(firewall.run(packetFor(Tuple{})).verdict, XdpDrop);
  Bytes arp = packet::PacketBuilder()
                  .ethernet({2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 2}, 0x0806)
                  .payload(28)
                  .build();
  EXPECT_EQ(firewall.run(arp).verdict, XdpPass);
  EXPECT_EQ(firewall.stat(FW_STAT_NON_IP), 1u);
}

TEST(Firewall, PortRangeEdges) {
  RuleFile file("l4proto=TCP dport=1000:2000 action=ACCEPT\n"
                "l4proto=UDP sport=53 action=ACCEPT\n"
                "sport=0:0 action=ACCEPT\n"
                "dport=65535 action=ACCEPT\n"
                "l4proto=TCP sport=30000:65535 dport=0:10 action=DROP\n"
                "l4proto=TCP sport=20000:65535 action=ACCEPT\n");
  std::vector<Rule> rules = file.rules();
  Firewall firewall;
  ASSERT_TRUE(firewall.ok());
  firewall.load(rules);
  struct Case {
    uint8_t protocol;
    uint16_t sport, dport;
    uint32_t verdict;
  };
  for (const Case &c : std::vector<Case>{
           {Tcp, 5000, 999, XdpDrop},  {Tcp, 5000, 1000, XdpPass}, {Tcp, 5000, 2000, XdpPass},
           {Tcp, 5000, 2001, XdpDrop}, {Udp, 5000, 1500, XdpDrop}, // rule 1 is TCP only
           {Udp, 52, 9, XdpDrop},      {Udp, 53, 9, XdpPass},      {Udp, 54, 9, XdpDrop},
           {Tcp, 0, 9, XdpPass},       {Udp, 0, 9, XdpPass},       {Tcp, 1, 9, XdpDrop},
           {Tcp, 9, 65535, XdpPass},   {Tcp, 9, 65534, XdpDrop},
           {Tcp, 29999, 10, XdpPass},  {Tcp, 30000, 10, XdpDrop},  {Tcp, 65535, 0, XdpDrop},
           {Tcp, 65535, 11, XdpPass},  {Tcp, 19999, 11, XdpDrop},  {Tcp, 20000, 11, XdpPass}}) {
    Tuple tuple;
    tuple.protocol = c.protocol;
    tuple.sport = c.sport;
    tuple.dport = c.dport;
    EXPECT_EQ(firewall.run(packetFor(tuple)).verdict, c.verdict) << describe(tuple);
    firewall.expectReference(rules, tuple);
  }
}

TEST(Firewall, IcmpAndGreMatchOnProtocolAndAddressesOnly) {
  RuleFile file("l4proto=ICMP dst=10.1.0.0/16 action=ACCEPT\n"
                "l4proto=GRE src=192.0.2.1 action=ACCEPT\n"
                "dport=80 action=ACCEPT\n" // TCP or UDP: never ICMP or GRE
                "src=198.51.100.0/24 action=ACCEPT\n");
  std::vector<Rule> rules = file.rules();
  Firewall firewall;
  ASSERT_TRUE(firewall.ok());
  firewall.load(rules);
  struct Case {
    uint8_t protocol;
    const char *src, *dst;
    uint32_t verdict;
  };
  for (const Case &c : std::vector<Case>{{Icmp, "10.9.9.9", "10.1.2.3", XdpPass},
                                         {Icmp, "10.9.9.9", "10.2.2.3", XdpDrop},
                                         {Gre, "192.0.2.1", "10.2.2.3", XdpPass},
                                         {Gre, "192.0.2.2", "10.2.2.3", XdpDrop},
                                         {Gre, "192.0.2.2", "10.1.2.3", XdpDrop},
                                         {Esp, "192.0.2.1", "10.1.2.3", XdpDrop},
                                         {Esp, "198.51.100.7", "10.1.2.3", XdpPass},
                                         {Tcp, "192.0.2.9", "10.2.2.3", XdpPass},
                                         {Udp, "192.0.2.9", "10.2.2.3", XdpPass}}) {
    Tuple tuple;
    tuple.protocol = c.protocol;
    tuple.saddr = ip(c.src);
    tuple.daddr = ip(c.dst);
    EXPECT_EQ(firewall.run(packetFor(tuple)).verdict, c.verdict) << describe(tuple);
    firewall.expectReference(rules, tuple);
  }
}

// A firewall accepting TCP and UDP to port 80 and every ICMP packet.
class OddPackets : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_TRUE(firewall.ok());
    firewall.load(file.rules());
  }
  RuleFile file{"l4proto=TCP dport=257 action=DROP\n" // what NOP options read as ports say
                "dport=80 action=ACCEPT\n"
                "l4proto=ICMP action=ACCEPT\n"
                "src=10.9.0.0/16 l4proto=UDP action=ACCEPT\n"};
  Firewall firewall;
};

TEST_F(OddPackets, TruncatedAtEveryByteIsDroppedUntilThePortsAreThere) {
  for (uint8_t protocol : {Tcp, Udp}) {
    for (bool vlan : {false, true}) {
      Tuple tuple;
      tuple.protocol = protocol;
      packet::PacketBuilder builder;
      builder.ethernet({2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 2});
      if (vlan)
        builder.vlan(10);
      packet::Ipv4Options ipv4;
      ipv4.saddr = tuple.saddr;
      ipv4.daddr = tuple.daddr;
      builder.ipv4(ipv4);
      if (protocol == Tcp)
        builder.tcp(tuple.sport, tuple.dport);
      else
        builder.udp(tuple.sport, tuple.dport);
      Bytes whole = builder.build();
      size_t l4End = whole.size(); // no payload: the L4 header is the end
      for (size_t length = 14; length <= l4End; ++length) {
        Bytes cut(whole.begin(), whole.begin() + length);
        uint64_t malformed = firewall.stat(FW_STAT_MALFORMED);
        uint32_t expected = length == l4End ? XdpPass : XdpDrop;
        EXPECT_EQ(firewall.run(cut).verdict, expected)
            << (vlan ? "VLAN " : "") << int(protocol) << " cut at " << length;
        EXPECT_EQ(firewall.stat(FW_STAT_MALFORMED), malformed + (length < l4End))
            << "cut at " << length;
      }
    }
  }
  // ICMP needs nothing past the IPv4 header: rules cannot look further.
  Tuple icmp;
  icmp.protocol = Icmp;
  Bytes whole = packetFor(icmp);
  EXPECT_EQ(firewall.run(Bytes(whole.begin(), whole.begin() + 34)).verdict, XdpPass);
}

TEST_F(OddPackets, PortsAreReadAfterIpOptions) {
  for (uint8_t words = 1; words <= 10; ++words) {
    Tuple tuple; // TCP to port 80
    Bytes packet = packetFor(tuple, words);
    EXPECT_EQ(firewall.run(packet).verdict, XdpPass) << int(words) << " option words";
    // The options present, the ports cut off.
    size_t l4 = 14 + 20 + 4 * words;
    EXPECT_EQ(firewall.run(Bytes(packet.begin(), packet.begin() + l4 + 3)).verdict, XdpDrop);
  }
}

TEST_F(OddPackets, BadIhlAndVersionAreMalformed) {
  Bytes packet = packetFor(Tuple{});
  for (uint8_t versionIhl : {0x44, 0x40, 0x65, 0x4f}) { // IHL 4, 0; version 6; IHL 15 > packet
    Bytes bad = packet;
    bad[14] = versionIhl;
    bad.resize(14 + 56); // IHL 15 needs 60 bytes
    uint64_t malformed = firewall.stat(FW_STAT_MALFORMED);
    EXPECT_EQ(firewall.run(bad).verdict, XdpDrop) << std::hex << int(versionIhl);
    EXPECT_EQ(firewall.stat(FW_STAT_MALFORMED), malformed + 1);
  }
}

TEST_F(OddPackets, NonFirstFragmentsOnlyMatchPortlessRules) {
  std::vector<Rule> rules = file.rules();
  Tuple first; // UDP to port 80, more fragments follow: has its ports
  first.protocol = Udp;
  first.fragment = 0x2000;
  Tuple later = first; // offset 185 * 8: what looks like ports is payload
  later.fragment = 185;
  Tuple laterFromTrusted = later;
  laterFromTrusted.saddr = ip("10.9.1.1");
  Tuple dontFragment = first;
  dontFragment.fragment = 0x4000;

  EXPECT_EQ(firewall.run(packetFor(first)).verdict, XdpPass);
  EXPECT_EQ(firewall.stat(FW_STAT_FRAGMENT), 0u);
  EXPECT_EQ(firewall.run(packetFor(later)).verdict, XdpDrop);
  EXPECT_EQ(firewall.run(packetFor(laterFromTrusted)).verdict, XdpPass);
  EXPECT_EQ(firewall.stat(FW_STAT_FRAGMENT), 2u);
  EXPECT_EQ(firewall.run(packetFor(dontFragment)).verdict, XdpPass);
  for (const Tuple &tuple : {first, later, laterFromTrusted, dontFragment})
    firewall.expectReference(rules, tuple);
}

Bytes ipv6Packet() {
  return packet::PacketBuilder()
      .ethernet({2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 2})
      .ipv6()
      .udp(1000, 80)
      .payload(8)
      .build();
}

TEST(Firewall, Ipv6IsAcceptedOrDroppedWholesale) {
  Firewall firewall;
  ASSERT_TRUE(firewall.ok());
  std::vector<Rule> acceptAll = RuleFile("action=ACCEPT\n").rules();
  firewall.load(acceptAll);
  EXPECT_EQ(firewall.run(ipv6Packet()).verdict, XdpDrop);
  LoadOptions options;
  options.ipv6Accept = true;
  firewall.load({}, options);
  EXPECT_EQ(firewall.run(ipv6Packet()).verdict, XdpPass);
  EXPECT_EQ(firewall.stat(FW_STAT_IPV6), 2u);
  EXPECT_EQ(firewall.hits(FW_DEFAULT_SLOT), 0u);
}

TEST_F(OddPackets, VlanTagsUpToTwoAreLookedThrough) {
  auto tagged = [](std::vector<uint16_t> tpids, uint16_t dport, uint16_t etherType = 0) {
    packet::PacketBuilder builder;
    builder.ethernet({2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 2});
    for (uint16_t tpid : tpids)
      builder.vlan(5, 0, tpid);
    if (etherType) // a frame whose payload is not IPv4 (ARP)
      return builder.payload(28).build();
    return builder.ipv4().tcp(1234, dport).build();
  };
  EXPECT_EQ(firewall.run(tagged({0x8100}, 80)).verdict, XdpPass);
  EXPECT_EQ(firewall.run(tagged({0x8100}, 81)).verdict, XdpDrop);
  EXPECT_EQ(firewall.run(tagged({0x88a8, 0x8100}, 80)).verdict, XdpPass);
  EXPECT_EQ(firewall.run(tagged({0x88a8, 0x8100}, 81)).verdict, XdpDrop);
  uint64_t malformed = firewall.stat(FW_STAT_MALFORMED);
  EXPECT_EQ(firewall.run(tagged({0x88a8, 0x8100, 0x8100}, 80)).verdict, XdpDrop);
  EXPECT_EQ(firewall.stat(FW_STAT_MALFORMED), malformed + 1);

  Bytes arp = tagged({0x8100}, 0, 0x0806);
  arp[16] = 0x08; // inner EtherType: ARP
  arp[17] = 0x06;
  EXPECT_EQ(firewall.run(arp).verdict, XdpPass);
  EXPECT_EQ(firewall.stat(FW_STAT_NON_IP), 1u);
}

TEST(Firewall, DefaultActionApplies) {
  std::vector<Rule> rules = RuleFile("l4proto=UDP action=DROP\n").rules();
  Firewall firewall;
  ASSERT_TRUE(firewall.ok());
  LoadOptions options;
  options.defaultAction = FW_ACCEPT;
  firewall.load(rules, options);
  Tuple udp;
  udp.protocol = Udp;
  EXPECT_EQ(firewall.run(packetFor(udp)).verdict, XdpDrop);
  EXPECT_EQ(firewall.run(packetFor(Tuple{})).verdict, XdpPass);
  EXPECT_EQ(firewall.hits(0), 1u);
  EXPECT_EQ(firewall.hits(FW_DEFAULT_SLOT), 1u);
}

class Conntrack : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_TRUE(firewall.ok());
    rules = RuleFile("src=10.0.0.0/24 dport=80 action=ACCEPT\n").rules();
  }
  static Tuple reply(const Tuple &tuple) {
    Tuple back = tuple;
    std::swap(back.saddr, back.daddr);
    std::swap(back.sport, back.dport);
    return back;
  }
  std::vector<Rule> rules;
  Firewall firewall;
};

TEST_F(Conntrack, RepliesOfAcceptedFlowsAreAccepted) {
  LoadOptions options;
  options.conntrack = true;
  firewall.load(rules, options);
  for (uint8_t protocol : {Tcp, Udp}) {
    Tuple out;
    out.protocol = protocol;
    out.saddr = ip("10.0.0.5");
    out.daddr = ip("192.0.2.80");
    out.sport = 40000;
    EXPECT_EQ(firewall.run(packetFor(reply(out))).verdict, XdpDrop) << "before the flow";
    EXPECT_EQ(firewall.run(packetFor(out)).verdict, XdpPass);
    EXPECT_EQ(firewall.run(packetFor(reply(out))).verdict, XdpPass) << int(protocol);
    Tuple otherPort = reply(out);
    otherPort.dport = 40001;
    EXPECT_EQ(firewall.run(packetFor(otherPort)).verdict, XdpDrop);
  }
  EXPECT_EQ(firewall.stat(FW_STAT_ESTABLISHED), 2u);

  auto flows = readFlows(firewall.pinDir());
  ASSERT_THAT_EXPECTED(flows, llvm::Succeeded());
  ASSERT_EQ(flows->size(), 2u);
  const fw_flow &flow = flows->front().key;
  EXPECT_EQ(ntohl(flow.saddr), ip("192.0.2.80"));
  EXPECT_EQ(ntohl(flow.daddr), ip("10.0.0.5"));
  EXPECT_EQ(ntohs(flow.sport), 80);
  EXPECT_EQ(ntohs(flow.dport), 40000);

  auto kept = expireFlows(firewall.pinDir(), 3600ull * 1000000000);
  ASSERT_THAT_EXPECTED(kept, llvm::Succeeded());
  EXPECT_EQ(*kept, 0u);
  auto expired = expireFlows(firewall.pinDir(), 0);
  ASSERT_THAT_EXPECTED(expired, llvm::Succeeded());
  EXPECT_EQ(*expired, 2u);
  Tuple out;
  out.saddr = ip("10.0.0.5");
  out.daddr = ip("192.0.2.80");
  EXPECT_EQ(firewall.run(packetFor(reply(out))).verdict, XdpDrop) << "after expiry";
}

TEST_F(Conntrack, OffByDefault) {
  firewall.load(rules);
  Tuple out;
  out.saddr = ip("10.0.0.5");
  EXPECT_EQ(firewall.run(packetFor(out)).verdict, XdpPass);
  EXPECT_EQ(firewall.run(packetFor(reply(out))).verdict, XdpDrop);
  auto flows = readFlows(firewall.pinDir());
  ASSERT_TRUE(bool(flows));
  EXPECT_TRUE(flows->empty());
}

} // namespace
} // namespace morpheus::nf::firewall::testing
