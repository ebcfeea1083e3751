// lb under Morpheus: loaded by the optimizer, configured through the
// control plane's own loader, specialized, and then the specialized program
// must behave exactly like the original on every packet of the semantic
// tests: verdict, output bytes, counters and the flow-table entry written,
// both for a flow's first packet and for a packet of a known flow.
#include "LbTestSupport.h"

#include "runtime/Optimizer.h"

#include <bpf/bpf.h>
#include <cstring>
#include <linux/if_ether.h>
#include <llvm/Testing/Support/Error.h>

namespace morpheus::nf::lb::testing {
namespace {

using morpheus::testing::runOnce;

std::vector<Bytes> semanticCorpus(const MapView &maps) {
  std::vector<Bytes> packets;
  auto add = [&](const Flow &flow, const Shape &shape = {}) {
    packets.push_back(packetOf(flow, shape));
  };
  for (uint16_t port = 1000; port < 1040; ++port) {
    Flow web;
    web.sport = port;
    add(web);
    Shape ack;
    ack.tcpFlags = 0x10;
    add(web, ack);
    add(Flow{0xc0a80002, port, DnsVip, 53, IPPROTO_UDP});
  }
  // QUIC: routable ids of each real, and every fallback.
  Flow quic{0xc0a80003, 50000, QuicVip, 443, IPPROTO_UDP};
  std::vector<Bytes> payloads = {quicShort({0x81, 0x02, 0x03}),
                                 Bytes{},
                                 Bytes{0x40, 0x41},
                                 quicShort(routableCid(LB_MAX_REALS - 1)),
                                 quicShort(routableCid(0)),
                                 Bytes{0xe0, 0, 0}};
  for (uint32_t address : {0x0a030001u, 0x0a030002u, 0x0a030003u, 0x0a010001u}) {
    Bytes cid = routableCid(maps.realIndexOf(address));
    payloads.push_back(quicShort(cid));
    for (uint8_t type = 0; type < 4; ++type) {
      payloads.push_back(quicLong(0x00000001, type, cid));
      payloads.push_back(quicLong(0x6b3343cf, type, cid));
    }
    payloads.push_back(quicLong(0x00000001, 2, {cid[0]}));
  }
  for (const Bytes &payload : payloads) {
    Shape shape;
    shape.payload = payload;
    add(quic, shape);
  }
  // Not for a VIP.
  add(Flow{0xc0a80001, 40000, 0x0a000063, 80, IPPROTO_TCP});
  add(Flow{0xc0a80001, 40000, WebVip, 81, IPPROTO_TCP});
  add(Flow{0xc0a80001, 40000, WebVip, 80, IPPROTO_UDP});
  add(Flow{0xc0a80001, 0, WebVip, 0, IPPROTO_ICMP});
  packets.push_back(packet::PacketBuilder().ethernet(OurMac, ClientMac).ipv6().tcp(1, 80).build());
  packets.push_back(packet::PacketBuilder()
                        .ethernet(OurMac, ClientMac)
                        .vlan(7)
                        .ipv4({0xc0a80001, WebVip})
                        .tcp(40000, 80)
                        .build());
  Bytes arp = packet::PacketBuilder().ethernet(OurMac, ClientMac, ETH_P_ARP).build();
  arp.resize(42, 0);
  packets.push_back(arp);
  add(Flow{0xc0a80001, 40000, DarkVip, 80, IPPROTO_TCP});
  // Odd IPv4.
  for (uint16_t fragment : {0x2000, 0x0004, 0x2010, 0x4000}) {
    Shape shape;
    shape.fragment = fragment;
    add(Flow{}, shape);
  }
  for (uint8_t words : {1, 10}) {
    Shape shape;
    shape.optionWords = words;
    shape.tos = 0xb8;
    shape.ttl = 1;
    add(Flow{}, shape);
  }
  Bytes good = packetOf(Flow{});
  for (uint8_t first : {0x65, 0x44}) {
    Bytes bad = good;
    bad[14] = first;
    packets.push_back(bad);
  }
  Bytes longer = good;
  longer[17] += 1;
  packets.push_back(longer);
  Bytes padded = good;
  padded.resize(60, 0);
  packets.push_back(padded);
  Shape quicShape;
  quicShape.payload = quicShort(routableCid(1));
  for (const Bytes &whole : {good, packetOf(quic, quicShape)})
    for (size_t length = ETH_HLEN; length < whole.size(); ++length)
      packets.emplace_back(whole.begin(), whole.begin() + length);
  return packets;
}

// Everything one run of one packet shows.
struct Observed {
  RunResult result;
  std::vector<uint64_t> events;
  std::vector<lb_vip_counters> vipCounters;
  std::map<Bytes, uint32_t> flowReals; // last-seen times differ by nature

  bool operator==(const Observed &other) const {
    if (!(result == other.result && events == other.events && flowReals == other.flowReals))
      return false;
    for (size_t i = 0; i < vipCounters.size(); ++i)
      if (vipCounters[i].packets != other.vipCounters[i].packets ||
          vipCounters[i].bytes != other.vipCounters[i].bytes)
        return false;
    return true;
  }
};

Observed observe(const MapView &maps, int program, const Bytes &packet) {
  std::vector<uint64_t> events = maps.events();
  std::vector<lb_vip_counters> counters;
  for (uint32_t vip = 0; vip < 4; ++vip)
    counters.push_back(maps.vipCounters(vip));
  Observed seen;
  seen.result = runOnce(program, packet);
  seen.events = maps.events();
  for (size_t i = 0; i < events.size(); ++i)
    seen.events[i] -= events[i];
  for (uint32_t vip = 0; vip < 4; ++vip) {
    lb_vip_counters now = maps.vipCounters(vip);
    seen.vipCounters.push_back(
        {now.packets - counters[vip].packets, now.bytes - counters[vip].bytes});
  }
  for (const auto &[key, value] : maps.entries("flows")) {
    lb_flow flow;
    std::memcpy(&flow, value.data(), sizeof(flow));
    seen.flowReals[key] = flow.real;
  }
  return seen;
}

void expectSameBehaviour(const MapView &maps, int original, int specialized,
                         const std::vector<Bytes> &packets) {
  size_t index = 0;
  for (const Bytes &packet : packets) {
    SCOPED_TRACE("packet " + std::to_string(index++) + ": " + morpheus::hexDump(packet));
    // A flow's first packet, then a packet of the now known flow.
    maps.clearFlows();
    Observed originalFirst = observe(maps, original, packet);
    Observed originalKnown = observe(maps, original, packet);
    maps.clearFlows();
    Observed specializedFirst = observe(maps, specialized, packet);
    Observed specializedKnown = observe(maps, specialized, packet);
    ASSERT_TRUE(specializedFirst == originalFirst);
    ASSERT_TRUE(specializedKnown == originalKnown);
  }
  EXPECT_GT(packets.size(), 200u);
}

TEST(LbUnderMorpheus, SpecializedProgramBehavesLikeTheOriginal) {
  morpheus::testing::PinDir pins("lb-morpheus");
  runtime::OptimizerOptions options;
  options.pinDir = pins.path();
  auto created =
      runtime::Optimizer::create(morpheus::testing::sourcePath("nf/lb/lb.bpf.c"), options);
  ASSERT_THAT_EXPECTED(created, llvm::Succeeded());
  runtime::Optimizer &optimizer = **created;

  auto config = parsed(baseConfig());
  auto report = applyConfig(config, pins.path());
  ASSERT_THAT_EXPECTED(report, llvm::Succeeded());

  MapView maps([&](const std::string &name) { return optimizer.mapFd(name); });
  auto specializeAndCompare = [&](const char *stage) {
    SCOPED_TRACE(stage);
    core::CycleReport cycle = optimizer.runCycle();
    ASSERT_TRUE(cycle.installed()) << cycle.describe();
    std::printf("%s:\n", stage);
    for (const core::SiteDecision &decision : cycle.log.decisions)
      if (decision.applied)
        std::printf("  specialized %-10s site #%u by %s: %s\n", decision.table.c_str(),
                    decision.site, decision.pass.c_str(), decision.detail.c_str());
    int original = optimizer.originalFd();
    ASSERT_NE(original, optimizer.activeFd());
    expectSameBehaviour(maps, original, optimizer.activeFd(), semanticCorpus(maps));

    // A control-plane change trips the guard: until the next cycle, the
    // specialized program hands every packet to the original.
    auto reload = applyConfig(parsed(replaced(baseConfig(), "real 10.1.0.1\n", "real 10.1.0.9\n")),
                              pins.path());
    ASSERT_THAT_EXPECTED(reload, llvm::Succeeded());
    expectSameBehaviour(maps, original, optimizer.activeFd(), semanticCorpus(maps));
    reload = applyConfig(parsed(baseConfig()), pins.path());
    ASSERT_THAT_EXPECTED(reload, llvm::Succeeded());
  };
  specializeAndCompare("first cycle");
  specializeAndCompare("after a reload");
}

} // namespace
} // namespace morpheus::nf::lb::testing
