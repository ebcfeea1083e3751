// nat's data plane on the real kernel: packet in -> verdict, output bytes,
// and what the packet did to the flow tables and counters.
#include "NatTesting.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <linux/in.h>
#include <llvm/Testing/Support/Error.h>

namespace morpheus::nf::nat::testing {
namespace {

using morpheus::hexDump;
using packet::internetChecksum;
using packet::ipv4ChecksumValid;
using packet::l4ChecksumValid;
using packet::read16;
using packet::read32;

std::vector<uint64_t> expectedStats(std::initializer_list<std::pair<nat_stat, uint64_t>> values) {
  std::vector<uint64_t> stats(NAT_STAT_MAX, 0);
  for (auto [index, value] : values)
    stats[index] = value;
  return stats;
}

void expectValidChecksums(const Bytes &bytes) {
  EXPECT_TRUE(ipv4ChecksumValid(bytes, IpOffset)) << hexDump(bytes);
  if (bytes.at(IpOffset + 9) == IPPROTO_ICMP) // no pseudo-header
    EXPECT_EQ(internetChecksum(&bytes[L4Offset], bytes.size() - L4Offset), 0) << hexDump(bytes);
  else
    EXPECT_TRUE(l4ChecksumValid(bytes, IpOffset)) << hexDump(bytes);
}

nat_binding binding(uint16_t externalPort) {
  nat_binding value = {};
  value.external_addr = htonl(External);
  value.external_port = htons(externalPort);
  return value;
}

nat_origin origin(const Frame &sent) {
  nat_origin value = {};
  value.inside_addr = htonl(sent.saddr);
  value.inside_port = htons(sent.sport);
  std::copy(sent.src.begin(), sent.src.end(), value.inside_mac);
  std::copy(sent.dst.begin(), sent.dst.end(), value.local_mac);
  return value;
}

uint8_t protocolOf(const Frame &frame) {
  return frame.l4 == L4::Tcp ? IPPROTO_TCP : frame.l4 == L4::Udp ? IPPROTO_UDP : IPPROTO_ICMP;
}

bool isEcho(const Frame &frame) { return frame.l4 == L4::EchoRequest; }

nat_flow_key forwardKey(const Frame &sent) {
  return flowKey(sent.saddr, sent.daddr, sent.sport, isEcho(sent) ? 0 : sent.dport,
                 protocolOf(sent));
}

nat_flow_key reverseKey(const Frame &sent, uint16_t externalPort) {
  return flowKey(External, sent.daddr, externalPort, isEcho(sent) ? 0 : sent.dport,
                 protocolOf(sent));
}

class DataPlane : public NatTest {
protected:
  void SetUp() override {
    NatTest::SetUp();
    if (!HasFatalFailure())
      configure(standardConfig());
  }

  // Sends `sent` from inside and expects exactly the translated frame out,
  // with `sent`'s flow in both tables.
  uint16_t expectTranslatedOut(const Frame &sent) {
    RunResult result = runOut(build(sent));
    EXPECT_EQ(result.verdict, XDP_REDIRECT);
    uint16_t port = read16(result.output, L4Offset + (isEcho(sent) ? 4 : 0));
    EXPECT_GE(port, PortMin);
    EXPECT_LE(port, PortMax);
    EXPECT_EQ(result.output, build(leaving(sent, port, Topology::outsideMac())))
        << hexDump(result.output);
    expectValidChecksums(result.output);
    expectFlow(sent, port);
    return port;
  }

  void expectFlow(const Frame &sent, uint16_t port) {
    bool forward = false, reverse = false;
    for (const auto &[key, value] : out())
      forward |= key == forwardKey(sent) && value == binding(port);
    for (const auto &[key, value] : in())
      reverse |= key == reverseKey(sent, port) && value == origin(sent);
    EXPECT_TRUE(forward) << "no nat_out entry for the flow";
    EXPECT_TRUE(reverse) << "no nat_in entry for the flow";
  }

  // Sends the remote's answer to `sent` (which left with `port`) and expects
  // exactly the frame delivered inside, with the tables untouched.
  void expectTranslatedIn(const Frame &sent, uint16_t port, void (*edit)(Bytes &) = nullptr) {
    auto outBefore = out();
    auto inBefore = in();
    Frame reply = answer(leaving(sent, port, Topology::outsideMac()), Topology::outsideMac());
    Bytes packet = build(reply), expected = build(delivered(reply, sent));
    if (edit) {
      edit(packet);
      edit(expected);
    }
    RunResult result = runIn(packet);
    EXPECT_EQ(result.verdict, XDP_REDIRECT);
    EXPECT_EQ(result.output, expected) << hexDump(result.output);
    expectValidChecksums(result.output);
    EXPECT_EQ(out(), outBefore);
    EXPECT_EQ(in(), inBefore);
  }

  void expectUntouched(const Case &c, uint32_t verdict) {
    SCOPED_TRACE(c.name);
    auto outBefore = out();
    auto inBefore = in();
    std::vector<uint64_t> before = counters();
    RunResult result = run(c.packet, c.ifindex);
    EXPECT_EQ(result.verdict, verdict);
    EXPECT_EQ(result.output, c.packet);
    EXPECT_EQ(out(), outBefore);
    EXPECT_EQ(in(), inBefore);
    std::vector<uint64_t> after = counters();
    for (uint32_t stat = 0; stat < NAT_STAT_MAX; ++stat)
      EXPECT_EQ(after[stat] - before[stat], stat == c.counter ? 1u : 0u) << "counter " << stat;
  }
};

TEST_F(DataPlane, TcpSynFromInsideCreatesBothEntriesAndLeavesTranslated) {
  Frame syn;
  RunResult result = runOut(build(syn));
  ASSERT_EQ(result.verdict, XDP_REDIRECT);

  auto forward = out();
  ASSERT_EQ(forward.size(), 1u);
  EXPECT_EQ(forward[0].first, flowKey(InsideHost, Remote, 40000, 80, IPPROTO_TCP));
  uint16_t port = ntohs(forward[0].second.external_port);
  EXPECT_EQ(forward[0].second, binding(port));
  EXPECT_GE(port, PortMin);
  EXPECT_LE(port, PortMax);
  auto reverse = in();
  ASSERT_EQ(reverse.size(), 1u);
  EXPECT_EQ(reverse[0].first, flowKey(External, Remote, port, 80, IPPROTO_TCP));
  EXPECT_EQ(reverse[0].second, origin(syn));

  EXPECT_EQ(result.output, build(leaving(syn, port, Topology::outsideMac())))
      << hexDump(result.output);
  EXPECT_TRUE(ipv4ChecksumValid(result.output, IpOffset));
  EXPECT_TRUE(l4ChecksumValid(result.output, IpOffset));
  EtherAddress outsideMac = Topology::outsideMac();
  EXPECT_EQ(Bytes(result.output.begin(), result.output.begin() + 6),
            Bytes(NextHopMac.begin(), NextHopMac.end()));
  EXPECT_EQ(Bytes(result.output.begin() + 6, result.output.begin() + 12),
            Bytes(outsideMac.begin(), outsideMac.end()));
  EXPECT_EQ(result.output[IpOffset + 8], 63); // TTL
  EXPECT_EQ(read32(result.output, IpOffset + 12), External);
  EXPECT_EQ(read32(result.output, IpOffset + 16), Remote);
  EXPECT_EQ(read16(result.output, L4Offset), port);
  EXPECT_EQ(read16(result.output, L4Offset + 2), 80);
  EXPECT_EQ(counters(), expectedStats({{NAT_STAT_OUTBOUND, 1}, {NAT_STAT_NEW_FLOW, 1}}));
}

TEST_F(DataPlane, ReplyFromOutsideIsTranslatedBackExactly) {
  Frame syn;
  uint16_t port = expectTranslatedOut(syn);
  expectTranslatedIn(syn, port);
  EXPECT_EQ(counters(), expectedStats({{NAT_STAT_OUTBOUND, 1},
                                       {NAT_STAT_NEW_FLOW, 1},
                                       {NAT_STAT_INBOUND, 1}}));
}

TEST_F(DataPlane, LaterPacketsOfAFlowReuseItsMapping) {
  Frame syn;
  uint16_t port = expectTranslatedOut(syn);
  auto outBefore = out();
  auto inBefore = in();
  Frame data = syn;
  data.tcpFlags = 0x18;
  data.payload = 300;
  EXPECT_EQ(expectTranslatedOut(data), port);
  EXPECT_EQ(expectTranslatedOut(data), port);
  EXPECT_EQ(out(), outBefore);
  EXPECT_EQ(in(), inBefore);
  EXPECT_EQ(counters(), expectedStats({{NAT_STAT_OUTBOUND, 3}, {NAT_STAT_NEW_FLOW, 1}}));
}

TEST_F(DataPlane, DifferentInsideFlowsToOneRemoteGetDifferentPorts) {
  Frame first, samePortOtherHost, otherPort;
  samePortOtherHost.saddr = OtherInsideHost;
  otherPort.sport = 40001;
  uint16_t a = expectTranslatedOut(first);
  uint16_t b = expectTranslatedOut(samePortOtherHost);
  uint16_t c = expectTranslatedOut(otherPort);
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(b, c);
  EXPECT_EQ(out().size(), 3u);
  EXPECT_EQ(in().size(), 3u);
  expectTranslatedIn(samePortOtherHost, b);
  expectTranslatedIn(otherPort, c);
}

TEST_F(DataPlane, UdpBothWays) {
  Frame query;
  query.l4 = L4::Udp;
  query.sport = 5353;
  query.dport = 53;
  uint16_t port = expectTranslatedOut(query);
  expectTranslatedIn(query, port);
  EXPECT_EQ(counters(), expectedStats({{NAT_STAT_OUTBOUND, 1},
                                       {NAT_STAT_NEW_FLOW, 1},
                                       {NAT_STAT_INBOUND, 1}}));
}

TEST_F(DataPlane, ZeroUdpChecksumStaysZeroBothWays) {
  Frame query;
  query.l4 = L4::Udp;
  Bytes packet = build(query);
  zeroUdpChecksum(packet);
  RunResult result = runOut(packet);
  ASSERT_EQ(result.verdict, XDP_REDIRECT);
  uint16_t port = read16(result.output, L4Offset);
  Bytes expected = build(leaving(query, port, Topology::outsideMac()));
  zeroUdpChecksum(expected);
  EXPECT_EQ(result.output, expected) << hexDump(result.output);
  EXPECT_TRUE(ipv4ChecksumValid(result.output, IpOffset));
  expectFlow(query, port);
  expectTranslatedIn(query, port, zeroUdpChecksum);
}

TEST_F(DataPlane, UdpChecksumThatComesOutZeroIsSentAsAllOnes) {
  Frame query;
  query.l4 = L4::Udp;
  query.payloadBytes = {0, 0};
  uint16_t port = expectTranslatedOut(query);
  // With C the checksum of the translated frame for a zero payload word,
  // the payload word C makes the translated frame sum to zero.
  Bytes translated = build(leaving(query, port, Topology::outsideMac()));
  uint16_t word = read16(translated, L4Offset + 6);
  query.payloadBytes = {uint8_t(word >> 8), uint8_t(word & 0xff)};
  Bytes expected = build(leaving(query, port, Topology::outsideMac()));
  ASSERT_EQ(read16(expected, L4Offset + 6), 0xffff);
  RunResult result = runOut(build(query));
  EXPECT_EQ(result.verdict, XDP_REDIRECT);
  EXPECT_EQ(result.output, expected) << hexDump(result.output);
  EXPECT_TRUE(l4ChecksumValid(result.output, IpOffset));
}

TEST_F(DataPlane, IcmpEchoRequestAndReply) {
  Frame ping;
  ping.l4 = L4::EchoRequest;
  ping.sport = 0x1234; // the identifier
  uint16_t id = expectTranslatedOut(ping);
  auto forward = out();
  ASSERT_EQ(forward.size(), 1u);
  EXPECT_EQ(forward[0].first, flowKey(InsideHost, Remote, 0x1234, 0, IPPROTO_ICMP));
  auto reverse = in();
  ASSERT_EQ(reverse.size(), 1u);
  EXPECT_EQ(reverse[0].first, flowKey(External, Remote, id, 0, IPPROTO_ICMP));
  expectTranslatedIn(ping, id);
  EXPECT_EQ(counters(), expectedStats({{NAT_STAT_OUTBOUND, 1},
                                       {NAT_STAT_NEW_FLOW, 1},
                                       {NAT_STAT_INBOUND, 1}}));
}

TEST_F(DataPlane, InboundWithoutMappingPassesAndChangesNothing) {
  Frame syn;
  uint16_t port = expectTranslatedOut(syn);
  // The mapping admits only the remote endpoint it was made for.
  Frame stranger = answer(leaving(syn, port, Topology::outsideMac()), Topology::outsideMac());
  stranger.sport = 8080;
  expectUntouched({"another remote port", Topology::outsideIfindex(), build(stranger),
                   NAT_STAT_NO_MAPPING},
                  XDP_PASS);
  stranger = answer(leaving(syn, port, Topology::outsideMac()), Topology::outsideMac());
  stranger.saddr = OtherRemote;
  expectUntouched({"another remote address", Topology::outsideIfindex(), build(stranger),
                   NAT_STAT_NO_MAPPING},
                  XDP_PASS);
  stranger = answer(leaving(syn, port, Topology::outsideMac()), Topology::outsideMac());
  stranger.l4 = L4::Udp;
  expectUntouched({"another protocol", Topology::outsideIfindex(), build(stranger),
                   NAT_STAT_NO_MAPPING},
                  XDP_PASS);
}

TEST_F(DataPlane, TrafficNotForTheNatPassesUntouched) {
  for (const Case &c : untouchedCases(Topology::outsideMac()))
    expectUntouched(c, XDP_PASS);
  EXPECT_TRUE(out().empty());
  EXPECT_TRUE(in().empty());
}

TEST_F(DataPlane, MalformedPacketsAreDroppedWithoutState) {
  std::vector<Case> cases = malformedCases();
  for (const Case &c : cases)
    expectUntouched(c, XDP_DROP);
  EXPECT_TRUE(out().empty());
  EXPECT_TRUE(in().empty());
  EXPECT_EQ(counters(), expectedStats({{NAT_STAT_MALFORMED, cases.size()}}));
}

TEST_F(DataPlane, TtlIsDecrementedAndExpiringRepliesGoToTheStack) {
  Frame last;
  last.ttl = 2;
  uint16_t port = expectTranslatedOut(last); // leaves with TTL 1
  Frame reply = answer(leaving(last, port, Topology::outsideMac()), Topology::outsideMac());
  reply.ttl = 1;
  expectUntouched({"ttl 1 in", Topology::outsideIfindex(), build(reply), NAT_STAT_TTL_EXPIRED},
                  XDP_PASS);
}

TEST_F(DataPlane, DontFragmentAloneIsNoFragment) {
  Frame query;
  query.l4 = L4::Udp;
  query.fragment = 0x4000;
  uint16_t port = expectTranslatedOut(query);
  expectTranslatedIn(query, port);
}

class Unconfigured : public DataPlane {
protected:
  void SetUp() override { NatTest::SetUp(); }
};

TEST_F(Unconfigured, NothingIsTranslated) {
  Frame syn;
  expectUntouched({"syn", InsideIfindex, build(syn), NAT_STAT_NOT_NAT}, XDP_PASS);
}

TEST_F(DataPlane, OneArmedNatSendsBackOutOfTheSamePort) {
  TempFile oneArmed("inside 192.168.0.0/16\nexternal 203.0.113.7\nports 20000-59999\n"
                    "inside-port " + Topology::outsideName() + "\noutside-port " +
                    Topology::outsideName() + " next-hop=02:00:00:00:0f:fe\n");
  Error err = loadConfig(oneArmed.path(), pins->path());
  ASSERT_THAT_ERROR(std::move(err), llvm::Succeeded());
  Frame syn;
  RunResult sent = run(build(syn), Topology::outsideIfindex());
  EXPECT_EQ(sent.verdict, XDP_TX);
  uint16_t port = read16(sent.output, L4Offset);
  EXPECT_EQ(sent.output, build(leaving(syn, port, Topology::outsideMac())));
  Frame reply = answer(leaving(syn, port, Topology::outsideMac()), Topology::outsideMac());
  RunResult back = run(build(reply), Topology::outsideIfindex());
  EXPECT_EQ(back.verdict, XDP_TX);
  EXPECT_EQ(back.output, build(delivered(reply, syn)));
}

// Port allocation races and LRU evictions, staged by writing the tables
// the way another CPU or the LRU would have left them.
class PortAllocation : public DataPlane {
protected:
  void claim(const nat_flow_key &key, const nat_origin &owner) {
    ASSERT_EQ(bpf_map_update_elem(fd("nat_in"), &key, &owner, BPF_NOEXIST), 0);
  }
};

TEST_F(PortAllocation, FlowsToOneRemoteExhaustASinglePortAndOthersStillShareIt) {
  configure(standardConfig("20000-20000"));
  Frame first;
  EXPECT_EQ(expectTranslatedOut(first), 20000);
  Frame second = first;
  second.sport = 40001;
  expectUntouched({"second flow, no port left", InsideIfindex, build(second),
                   NAT_STAT_PORTS_EXHAUSTED},
                  XDP_DROP);
  Frame elsewhere = second;
  elsewhere.daddr = OtherRemote;
  EXPECT_EQ(expectTranslatedOut(elsewhere), 20000);
}

TEST_F(PortAllocation, APortClaimedByARacingFlowIsNeverTakenOver) {
  configure(standardConfig("20000-20000"));
  Frame syn, winner = syn;
  winner.saddr = OtherInsideHost;
  winner.sport = 1234;
  claim(reverseKey(syn, 20000), origin(winner));
  expectUntouched({"lost the race", InsideIfindex, build(syn), NAT_STAT_PORTS_EXHAUSTED},
                  XDP_DROP);
  ASSERT_EQ(in().size(), 1u);
  EXPECT_EQ(in()[0].second, origin(winner));
}

TEST_F(PortAllocation, AFlowAdoptsThePortItAlreadyOwns) {
  // Another CPU's copy of the same SYN won the port, or nat_out lost the
  // entry to the LRU: the flow keeps its port.
  configure(standardConfig("20000-20000"));
  Frame syn;
  claim(reverseKey(syn, 20000), origin(syn));
  auto inBefore = in();
  EXPECT_EQ(expectTranslatedOut(syn), 20000);
  EXPECT_EQ(in(), inBefore);
  EXPECT_EQ(out().size(), 1u);
}

TEST_F(PortAllocation, AnEvictedReverseHalfIsRestoredWithTheSamePort) {
  Frame syn;
  uint16_t port = expectTranslatedOut(syn);
  auto inBefore = in();
  nat_flow_key reverse = reverseKey(syn, port);
  ASSERT_EQ(bpf_map_delete_elem(fd("nat_in"), &reverse), 0);
  EXPECT_EQ(expectTranslatedOut(syn), port);
  EXPECT_EQ(in(), inBefore);
  expectTranslatedIn(syn, port);
}

TEST_F(PortAllocation, AnEvictedForwardHalfIsRecoveredWithTheSamePort) {
  Frame syn;
  uint16_t port = expectTranslatedOut(syn);
  auto outBefore = out();
  nat_flow_key forward = forwardKey(syn);
  ASSERT_EQ(bpf_map_delete_elem(fd("nat_out"), &forward), 0);
  EXPECT_EQ(expectTranslatedOut(syn), port);
  EXPECT_EQ(out(), outBefore);
}

TEST_F(PortAllocation, AFlowWhosePortWasTakenOverMovesToAnother) {
  Frame syn, taker = syn;
  taker.saddr = OtherInsideHost;
  uint16_t port = expectTranslatedOut(syn);
  nat_flow_key reverse = reverseKey(syn, port);
  ASSERT_EQ(bpf_map_delete_elem(fd("nat_in"), &reverse), 0);
  claim(reverse, origin(taker));
  uint16_t moved = expectTranslatedOut(syn);
  EXPECT_NE(moved, port);
  EXPECT_EQ(out().size(), 1u);
  EXPECT_EQ(in().size(), 2u);
}

} // namespace
} // namespace morpheus::nf::nat::testing
