// The data plane on the real kernel (BPF_PROG_TEST_RUN), configured through
// the control plane's loader: packet in -> verdict, output bytes, and map
// side effects.
#include "LbTestSupport.h"

#include <linux/if_ether.h>
#include <llvm/Testing/Support/Error.h>

namespace morpheus::nf::lb::testing {
namespace {

class DataPlane : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_TRUE(lb.ok());
    lb.load(baseConfig());
    config = parsed(baseConfig());
  }

  std::vector<uint64_t> eventDelta(const std::vector<uint64_t> &before) {
    std::vector<uint64_t> after = maps.events();
    for (size_t i = 0; i < after.size(); ++i)
      after[i] -= before[i];
    return after;
  }

  static std::vector<uint64_t> only(lb_event event, uint64_t count = 1) {
    std::vector<uint64_t> counts(LB_EV_MAX, 0);
    counts[event] = count;
    return counts;
  }

  uint32_t addressOf(uint32_t realIndex) { return ntohl(maps.real(realIndex).addr); }

  void expectPassedUntouched(const Bytes &packet) {
    RunResult result = lb.run(packet);
    EXPECT_EQ(result.verdict, uint32_t(XDP_PASS));
    EXPECT_EQ(result.output, packet);
  }

  void expectDropped(const Bytes &packet, lb_event why) {
    auto before = maps.events();
    RunResult result = lb.run(packet);
    EXPECT_EQ(result.verdict, uint32_t(XDP_DROP)) << morpheus::hexDump(packet);
    EXPECT_EQ(eventDelta(before), only(why));
  }

  LbProgram lb;
  MapView maps = viewOf(lb.nf());
  LbConfig config;
};

TEST_F(DataPlane, TcpSynIsEncapsulatedTowardTheRingsReal) {
  Flow flow;
  uint32_t expected = maps.expectedReal(config, flow);
  ASSERT_NE(expected, 0u);
  Bytes syn = packetOf(flow);
  auto before = maps.events();
  RunResult result = lb.run(syn);
  expectEncapsulated(result, syn, addressOf(expected));
  EXPECT_EQ(eventDelta(before), only(LB_EV_FLOW_NEW));
  // The ring the data plane read is the one the test computed.
  lb_flow_key key = flowKey(flow);
  uint32_t vipIndex = maps.vip(WebVip, 80, IPPROTO_TCP)->index;
  EXPECT_EQ(maps.ringSlot(vipIndex, lb_flow_hash(&key) % LB_RING_SIZE), expected);
}

TEST_F(DataPlane, ManyFlowsFollowTheRingAndSpreadOverTheReals) {
  std::map<uint32_t, int> perReal;
  for (uint16_t port = 1000; port < 1300; ++port) {
    Flow flow;
    flow.sport = port;
    Bytes syn = packetOf(flow);
    RunResult result = lb.run(syn);
    uint32_t expected = addressOf(maps.expectedReal(config, flow));
    ASSERT_EQ(outerDestination(result), expected) << "sport " << port;
    ++perReal[expected];
  }
  EXPECT_EQ(perReal.size(), 3u);
  // 10.1.0.3 has weight 2: about half of 300 flows.
  EXPECT_GT(perReal[0x0a010003], 100);
  EXPECT_LT(perReal[0x0a010003], 200);
}

TEST_F(DataPlane, NewFlowIsRememberedInTheFlowTable) {
  Flow flow;
  EXPECT_FALSE(maps.flow(flow));
  auto start = maps.flowCount();
  lb.run(packetOf(flow));
  auto entry = maps.flow(flow);
  ASSERT_TRUE(entry);
  EXPECT_EQ(entry->real, maps.expectedReal(config, flow));
  EXPECT_GT(entry->last_seen_ns, 0u);
  EXPECT_EQ(maps.flowCount(), start + 1);

  auto before = maps.events();
  Shape ack;
  ack.tcpFlags = 0x10;
  lb.run(packetOf(flow, ack));
  EXPECT_EQ(eventDelta(before), only(LB_EV_FLOW_HIT));
  EXPECT_EQ(maps.flowCount(), start + 1);
  EXPECT_GE(maps.flow(flow)->last_seen_ns, entry->last_seen_ns);
}

TEST_F(DataPlane, EstablishedFlowKeepsItsRealWhenTheRingIsRebuilt) {
  // Rebuild the web VIP's ring without 10.1.0.1 and with two new reals.
  std::string changed = replaced(baseConfig(), "real 10.1.0.1\n", "real 10.1.0.4\nreal 10.1.0.5\n");
  LbConfig after = parsed(changed);

  // Pick flows before the reload: their old real must not be the one removed.
  std::vector<Flow> candidates;
  for (uint16_t port = 2000; port < 2200; ++port) {
    Flow flow;
    flow.sport = port;
    if (maps.expectedReal(config, flow) != maps.realIndexOf(0x0a010001))
      candidates.push_back(flow);
  }
  std::map<uint16_t, uint32_t> firstReal;
  for (const Flow &flow : candidates)
    firstReal[flow.sport] = outerDestination(lb.run(packetOf(flow)));
  uint32_t removedIndex = maps.realIndexOf(0x0a010001);

  lb.load(changed);
  EXPECT_EQ(maps.realIndexOf(0x0a010001), 0u) << "the removed real is deactivated";
  int moved = 0;
  Shape ack;
  ack.tcpFlags = 0x10;
  for (const Flow &flow : candidates) {
    uint32_t ringNow = addressOf(maps.expectedReal(after, flow));
    if (ringNow == firstReal[flow.sport])
      continue;
    ++moved;
    // Established: the old real. A new flow on the same slot: the new ring.
    EXPECT_EQ(outerDestination(lb.run(packetOf(flow, ack))), firstReal[flow.sport]);
    maps.forgetFlow(flow);
    EXPECT_EQ(outerDestination(lb.run(packetOf(flow))), ringNow);
  }
  EXPECT_GT(moved, 0) << "the new ring must move some of these flows";
  EXPECT_NE(removedIndex, 0u);
}

TEST_F(DataPlane, FlowOfARemovedRealIsRebalanced) {
  Flow flow;
  uint16_t port = 3000;
  for (; port < 4000; ++port) {
    flow.sport = port;
    if (maps.expectedReal(config, flow) == maps.realIndexOf(0x0a010001))
      break;
  }
  ASSERT_EQ(outerDestination(lb.run(packetOf(flow))), 0x0a010001u);
  std::string changed = replaced(baseConfig(), "real 10.1.0.1\n", "");
  lb.load(changed);
  auto before = maps.events();
  RunResult result = lb.run(packetOf(flow));
  EXPECT_EQ(outerDestination(result), addressOf(maps.expectedReal(parsed(changed), flow)));
  EXPECT_NE(outerDestination(result), 0x0a010001u);
  EXPECT_EQ(eventDelta(before), only(LB_EV_FLOW_NEW));
  EXPECT_EQ(maps.flow(flow)->real, maps.expectedReal(parsed(changed), flow));
}

TEST_F(DataPlane, UdpVipIsBalancedAndGueRealsGetGue) {
  bool sawGue = false, sawIpip = false;
  for (uint16_t port = 5000; port < 5040; ++port) {
    Flow flow{0xc0a80002, port, DnsVip, 53, IPPROTO_UDP};
    Shape query;
    query.payload = quicShort(routableCid(1)); // ignored: not a QUIC VIP
    Bytes packet = packetOf(flow, query);
    uint32_t real = maps.expectedReal(config, flow);
    bool gue = maps.real(real).flags & LB_REAL_GUE;
    RunResult result = lb.run(packet);
    expectEncapsulated(result, packet, addressOf(real), gue);
    EXPECT_EQ(maps.flow(flow)->real, real);
    (gue ? sawGue : sawIpip) = true;
  }
  EXPECT_TRUE(sawGue && sawIpip);
}

class QuicPath : public DataPlane {
protected:
  Flow flow{0xc0a80003, 50000, QuicVip, 443, IPPROTO_UDP};

  // Runs a QUIC packet; returns the real it went to.
  uint32_t send(const Bytes &payload) {
    Shape shape;
    shape.payload = payload;
    Bytes packet = packetOf(flow, shape);
    RunResult result = lb.run(packet);
    expectEncapsulated(result, packet, outerDestination(result));
    return outerDestination(result);
  }

  // A real of the QUIC VIP other than the one the ring picks for `flow`.
  uint32_t otherReal() {
    uint32_t ring = maps.expectedReal(config, flow);
    for (uint32_t address : {0x0a030001u, 0x0a030002u})
      if (maps.realIndexOf(address) != ring)
        return maps.realIndexOf(address);
    return maps.realIndexOf(0x0a030003);
  }
};

TEST_F(QuicPath, ShortHeaderConnectionIdNamesTheReal) {
  uint32_t target = otherReal();
  auto before = maps.events();
  EXPECT_EQ(send(quicShort(routableCid(target))), addressOf(target));
  EXPECT_EQ(eventDelta(before), only(LB_EV_QUIC_CID));
  EXPECT_FALSE(maps.flow(flow)) << "connection-id routing keeps no flow state";
  // The client moved (new address and port): same connection id, same real.
  flow.saddr = 0xc0a800ff;
  flow.sport = 61000;
  EXPECT_EQ(send(quicShort(routableCid(target))), addressOf(target));
}

TEST_F(QuicPath, HandshakePacketsOfBothVersionsUseTheConnectionId) {
  uint32_t target = otherReal();
  EXPECT_EQ(send(quicLong(0x00000001, 2, routableCid(target))), addressOf(target));
  EXPECT_EQ(send(quicLong(0x6b3343cf, 3, routableCid(target))), addressOf(target));
}

TEST_F(QuicPath, ClientChosenOrForeignIdsTakeTheHashPath) {
  uint32_t target = otherReal();
  uint32_t ring = addressOf(maps.expectedReal(config, flow));
  std::vector<std::pair<const char *, Bytes>> cases = {
      {"v1 Initial (client-chosen id)", quicLong(0x00000001, 0, routableCid(target))},
      {"v1 0-RTT", quicLong(0x00000001, 1, routableCid(target))},
      {"v2 Initial (type 1 in v2)", quicLong(0x6b3343cf, 1, routableCid(target))},
      {"unknown version Handshake", quicLong(0x0a0a0a0a, 2, routableCid(target))},
      {"Handshake with a 1-byte id", quicLong(0x00000001, 2, {routableCid(target)[0]})},
      {"short header, untagged id", quicShort({0x81, 0x02, 0x03, 0x04})},
      {"short header, no fixed bit", Bytes{0x00, routableCid(target)[0], routableCid(target)[1]}},
      {"id naming an unconfigured real", quicShort(routableCid(LB_MAX_REALS - 1))},
      {"id naming real 0", quicShort(routableCid(0))},
      {"empty payload", Bytes{}},
      {"payload of 2 bytes", Bytes{0x40, routableCid(target)[0]}},
      {"long header cut in its version", Bytes{0xe0, 0x00, 0x00}},
  };
  for (const auto &[name, payload] : cases) {
    SCOPED_TRACE(name);
    maps.clearFlows();
    auto before = maps.events();
    EXPECT_EQ(send(payload), ring);
    std::vector<uint64_t> expected = only(LB_EV_QUIC_HASHED);
    expected[LB_EV_FLOW_NEW] = 1;
    EXPECT_EQ(eventDelta(before), expected);
    ASSERT_TRUE(maps.flow(flow)) << "the hash path remembers the flow";
  }
}

TEST_F(QuicPath, InitialThenShortHeaderStayOnTheInitialsReal) {
  // Servers hand out ids naming themselves: the Initial lands on the ring's
  // real, which then issues an id for itself.
  uint32_t ring = maps.expectedReal(config, flow);
  EXPECT_EQ(send(quicLong(0x00000001, 0, {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08})),
            addressOf(ring));
  EXPECT_EQ(send(quicShort(routableCid(ring))), addressOf(ring));
}

TEST_F(DataPlane, TrafficNotForAVipPassesUntouched) {
  std::vector<std::pair<const char *, Bytes>> cases = {
      {"other address", packetOf(Flow{0xc0a80001, 40000, 0x0a000063, 80, IPPROTO_TCP})},
      {"other port", packetOf(Flow{0xc0a80001, 40000, WebVip, 81, IPPROTO_TCP})},
      {"UDP to a TCP VIP", packetOf(Flow{0xc0a80001, 40000, WebVip, 80, IPPROTO_UDP})},
      {"ICMP to a VIP address", packetOf(Flow{0xc0a80001, 0, WebVip, 0, IPPROTO_ICMP})},
      {"IPv6", packet::PacketBuilder().ethernet(OurMac, ClientMac).ipv6().tcp(40000, 80).build()},
      {"VLAN-tagged VIP packet", packet::PacketBuilder()
                                     .ethernet(OurMac, ClientMac)
                                     .vlan(7)
                                     .ipv4({0xc0a80001, WebVip})
                                     .tcp(40000, 80)
                                     .build()},
      {"ARP",
       [] {
         Bytes arp = packet::PacketBuilder().ethernet(OurMac, ClientMac, ETH_P_ARP).build();
         arp.resize(42, 0);
         return arp;
       }()},
  };
  for (const auto &[name, packet] : cases) {
    SCOPED_TRACE(name);
    auto before = maps.events();
    expectPassedUntouched(packet);
    EXPECT_EQ(eventDelta(before), std::vector<uint64_t>(LB_EV_MAX, 0));
  }
  EXPECT_EQ(maps.flowCount(), 0u);
}

TEST_F(DataPlane, PerVipStatsCountPacketsAndBytes) {
  uint32_t web = maps.vip(WebVip, 80, IPPROTO_TCP)->index;
  uint32_t dns = maps.vip(DnsVip, 53, IPPROTO_UDP)->index;
  ASSERT_NE(web, dns);
  Bytes syn = packetOf(Flow{});
  Shape big;
  big.payload = Bytes(100, 7);
  Bytes query = packetOf(Flow{0xc0a80001, 40000, DnsVip, 53, IPPROTO_UDP}, big);
  for (int i = 0; i < 3; ++i)
    lb.run(syn);
  lb.run(query);
  lb.run(packetOf(Flow{0xc0a80001, 40000, 0x0a000063, 80, IPPROTO_TCP})); // no VIP
  lb_vip_counters webCounters = maps.vipCounters(web), dnsCounters = maps.vipCounters(dns);
  EXPECT_EQ(webCounters.packets, 3u);
  EXPECT_EQ(webCounters.bytes, 3 * syn.size());
  EXPECT_EQ(dnsCounters.packets, 1u);
  EXPECT_EQ(dnsCounters.bytes, query.size());

  auto status = readVipStatus(lb.pinDir());
  ASSERT_THAT_EXPECTED(status, llvm::Succeeded());
  ASSERT_EQ(status->size(), 4u);
  for (const VipStatus &vip : *status)
    if (vip.index == web) {
      EXPECT_EQ(vip.vip, "10.0.0.1:80/tcp");
      EXPECT_EQ(vip.packets, 3u);
    }
}

TEST_F(DataPlane, TruncatedAtEveryHeaderBoundaryIsDropped) {
  Shape quic;
  quic.payload = quicShort(routableCid(1));
  Shape options;
  options.optionWords = 2;
  for (const Bytes &whole : {packetOf(Flow{}), packetOf(Flow{}, options),
                             packetOf(Flow{0xc0a80003, 50000, QuicVip, 443, IPPROTO_UDP}, quic)}) {
    size_t ihl = (whole[14] & 0xf) * 4;
    size_t l4 = whole[14 + 9] == IPPROTO_TCP ? 20 : 8;
    // Every length that cuts the Ethernet, IP or L4 header, and the payload.
    for (size_t length = ETH_HLEN; length < whole.size(); ++length) {
      SCOPED_TRACE("cut at " + std::to_string(length) + " of " + std::to_string(whole.size()) +
                   " (headers end at " + std::to_string(14 + ihl + l4) + ")");
      Bytes cut(whole.begin(), whole.begin() + length);
      expectDropped(cut, LB_EV_MALFORMED);
      // The IP total length shortened to match: a datagram too short for
      // its own headers. (Header checksums are the real's to verify.)
      if (length >= 14 + 20 && length < 14 + ihl + l4) {
        Bytes shortened = cut;
        shortened[16] = (length - 14) >> 8;
        shortened[17] = (length - 14) & 0xff;
        expectDropped(shortened, LB_EV_MALFORMED);
      }
    }
  }
  EXPECT_EQ(maps.flowCount(), 0u);
}

TEST_F(DataPlane, BadIpHeaderFieldsAreDropped) {
  Bytes good = packetOf(Flow{});
  Bytes version6 = good;
  version6[14] = 0x65;
  expectDropped(version6, LB_EV_MALFORMED);
  Bytes ihl4 = good;
  ihl4[14] = 0x44;
  expectDropped(ihl4, LB_EV_MALFORMED);
  Bytes longer = good;
  longer[17] += 1; // total length beyond the frame
  expectDropped(longer, LB_EV_MALFORMED);
}

TEST_F(DataPlane, EthernetPaddingIsCarriedButNotCounted) {
  // A 54-byte SYN padded to the 60-byte minimum: the outer length follows
  // the IP header, the padding trails the tunnelled packet.
  Flow flow;
  Bytes syn = packetOf(flow);
  Bytes padded = syn;
  padded.resize(60, 0);
  RunResult result = lb.run(padded);
  ASSERT_EQ(result.verdict, uint32_t(XDP_TX));
  EXPECT_EQ(packet::read16(result.output, 16), syn.size() - 14 + IpipOverhead);
  EXPECT_EQ(Bytes(result.output.begin() + 34, result.output.end()),
            Bytes(padded.begin() + 14, padded.end()));
}

TEST_F(DataPlane, FragmentsArePassedToTheStack) {
  for (uint16_t fragment : {0x2000 /* MF, first */, 0x0004 /* last */, 0x2010 /* middle */}) {
    Shape shape;
    shape.fragment = fragment;
    Bytes packet = packetOf(Flow{}, shape);
    auto before = maps.events();
    expectPassedUntouched(packet);
    EXPECT_EQ(eventDelta(before), only(LB_EV_FRAGMENT));
  }
  EXPECT_EQ(maps.vipCounters(maps.vip(WebVip, 80, IPPROTO_TCP)->index).packets, 0u);
  // DF alone is no fragment: balanced, and DF is copied to the outer header.
  Shape df;
  df.fragment = 0x4000;
  Bytes packet = packetOf(Flow{}, df);
  RunResult result = lb.run(packet);
  expectEncapsulated(result, packet, addressOf(maps.expectedReal(config, Flow{})));
  EXPECT_EQ(result.output[14 + 6], 0x40);
}

TEST_F(DataPlane, IpOptionsTosAndTtlTravelInsideTheTunnel) {
  Flow flow;
  for (uint8_t words : {1, 10}) {
    Shape shape;
    shape.optionWords = words;
    shape.tos = 0xb8; // EF, copied to the outer header
    shape.ttl = 1;    // not routed here: forwarded with the inner TTL intact
    Bytes packet = packetOf(flow, shape);
    RunResult result = lb.run(packet);
    expectEncapsulated(result, packet, addressOf(maps.expectedReal(config, flow)));
  }
}

TEST_F(DataPlane, VipWithoutWeightedRealsDropsNewFlows) {
  expectDropped(packetOf(Flow{0xc0a80001, 40000, DarkVip, 80, IPPROTO_TCP}), LB_EV_NO_REAL);
  EXPECT_EQ(maps.vipCounters(maps.vip(DarkVip, 80, IPPROTO_TCP)->index).packets, 1u);
}

TEST_F(DataPlane, SourcePrefixTakesHostBitsFromTheClientAndTtlIsConfigured) {
  lb.load(replaced(baseConfig(), "source 10.255.0.1", "source 10.255.0.0/16\nttl 9"));
  Flow flow;
  flow.saddr = 0xc0a81234;
  Bytes syn = packetOf(flow);
  RunResult result = lb.run(syn);
  expectEncapsulated(result, syn, addressOf(maps.expectedReal(config, flow)), false, 0x0aff1234, 9);
}

} // namespace
} // namespace morpheus::nf::lb::testing
