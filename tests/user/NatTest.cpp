// The user-space NAT (nf/nat/user/nat_user.c), with the real JIT, on the
// NAT's own configuration file: flows from inside translated out and their
// replies back, each binding's two halves in the tables, checksums valid,
// the odd cases passed or dropped as nf/nat/README.md says; then the
// version Morpheus specializes with fast paths over the binding tables the
// handler writes answers every packet as its generic twin, with equal
// tables, while new flows are bound beside the hot ones in the same burst
// (one a hot flow's neighbour, one whose key shares a hot flow's write
// counter) and across a configuration change.
#include "nf/nat/UserNat.h"

#include "backend/user/EventLoop.h"
#include "backend/user/Handler.h"
#include "SubBatches.h"
#include "core/WriteGuards.h"
#include "support/packet/Packet.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <set>

namespace morpheus::user {
namespace {

using namespace nf::nat;
using packet::parseIpv4;
using packet::read16;
using packet::read32;
using testing::expectPrefetchChangesNothing;
using testing::expectSubBatchesTreatPacketsAsWithout;

const std::string NatSource = std::string(MORPHEUS_SOURCE_DIR) + "/nf/nat/user/nat_user.c";
const std::string NatConf = std::string(MORPHEUS_SOURCE_DIR) + "/nf/nat/configs/nat.conf";

constexpr size_t Ip = 14, L4 = 34;
const packet::Mac Host = packet::parseMac("02:00:00:00:00:01");
const packet::Mac Gateway = packet::parseMac("02:00:00:00:00:02");

NatSettings settingsOf(const std::string &path) {
  auto settings = parseConfig(path, userPorts());
  if (!settings) {
    ADD_FAILURE() << toString(settings.takeError());
    return {};
  }
  return *settings;
}

std::unique_ptr<Handler>
loadNat(const NatSettings &settings, bool followTraffic, const std::vector<std::string> &cflags = {},
        HandlerOptions::Prefetch prefetch = HandlerOptions::Prefetch::OwnElseDerived) {
  HandlerOptions options;
  options.entry = "nat";
  options.cflags = cflags;
  options.prefetch = prefetch;
  if (followTraffic) {
    core::TrafficProfileOptions traffic;
    traffic.initialPeriod = 4;
    options.traffic = traffic;
  }
  auto handler = Handler::load(NatSource, options);
  if (!handler) {
    ADD_FAILURE() << toString(handler.takeError());
    return nullptr;
  }
  if (Error err = loadUserNat((*handler)->tables(), settings)) {
    ADD_FAILURE() << toString(std::move(err));
    return nullptr;
  }
  return std::move(*handler);
}

struct Flow {
  uint32_t saddr, daddr; // host order
  uint8_t protocol;
  uint16_t sport, dport; // ICMP: echo identifier, sequence
};

Bytes frame(const Flow &flow, packet::Ipv4Options ip = {}, bool reply = false,
            const packet::Mac &dst = Gateway) {
  ip.saddr = flow.saddr;
  ip.daddr = flow.daddr;
  packet::PacketBuilder builder;
  builder.ethernet(dst, Host).ipv4(ip);
  if (flow.protocol == IPPROTO_TCP)
    builder.tcp(flow.sport, flow.dport);
  else if (flow.protocol == IPPROTO_UDP)
    builder.udp(flow.sport, flow.dport);
  else if (flow.protocol == IPPROTO_ICMP)
    builder.icmpEcho(flow.sport, flow.dport, reply);
  return builder.payload(18).build();
}

// The reply to a translated frame: addresses and ports swapped (ICMP: the
// echo reply with the same identifier and sequence).
Bytes replyTo(const Bytes &translated) {
  uint8_t protocol = translated[Ip + 9];
  Flow back{read32(translated, Ip + 16), read32(translated, Ip + 12), protocol,
            read16(translated, L4 + (protocol == IPPROTO_ICMP ? 4 : 2)),
            read16(translated, L4 + (protocol == IPPROTO_ICMP ? 6 : 0))};
  return frame(back, {}, /*reply=*/true);
}

void expectValidChecksums(const Bytes &bytes) {
  EXPECT_TRUE(packet::ipv4ChecksumValid(bytes, Ip));
  if (bytes[Ip + 9] == IPPROTO_ICMP) // no pseudo-header
    EXPECT_EQ(packet::internetChecksum(&bytes[L4], bytes.size() - L4), 0);
  else
    EXPECT_TRUE(packet::l4ChecksumValid(bytes, Ip));
}

ReplayRing ringOf(const std::vector<Bytes> &frames, uint32_t port) {
  ReplayRing ring;
  ring.ingressPort = port;
  for (const Bytes &bytes : frames) {
    ring.sequence.push_back(uint32_t(ring.frames.size()));
    ring.frames.push_back(bytes);
  }
  return ring;
}

PacketResult handle(Handler &handler, const Bytes &bytes, uint32_t port) {
  return EventLoop(handler.trampoline(), 1).collect(ringOf({bytes}, port)).at(0);
}

template <typename T> Bytes bytesOf(const T &value) {
  Bytes bytes(sizeof value);
  std::memcpy(bytes.data(), &value, sizeof value);
  return bytes;
}

nat_flow_key outKey(const Flow &flow) {
  nat_flow_key key = {};
  key.addr = htonl(flow.saddr);
  key.remote_addr = htonl(flow.daddr);
  key.port = htons(flow.sport);
  key.remote_port = flow.protocol == IPPROTO_ICMP ? 0 : htons(flow.dport);
  key.proto = flow.protocol;
  return key;
}

uint64_t counter(Handler &handler, nat_stat stat) {
  uint32_t slot = stat;
  return *static_cast<const uint64_t *>(handler.tables().find("nat_stats")->lookup(&slot));
}

TEST(UserNat, TranslatesFlowsBothWaysAndKeepsBothHalvesOfEachBinding) {
  NatSettings settings = settingsOf(NatConf);
  // nat.conf's eth0 and eth1 are the user ports 0 and 1.
  ASSERT_EQ(settings.insideIfindex, 0u);
  ASSERT_EQ(settings.outsideIfindex, 1u);
  auto nat = loadNat(settings, false);
  ASSERT_TRUE(nat);
  const uint32_t pool[] = {parseIpv4("203.0.113.7"), parseIpv4("203.0.113.8")};
  const uint32_t remote = parseIpv4("198.51.100.9");
  std::vector<Flow> flows = {
      {parseIpv4("192.168.1.10"), remote, IPPROTO_TCP, 40000, 443},
      {parseIpv4("192.168.1.10"), remote, IPPROTO_UDP, 40000, 53},
      {parseIpv4("192.168.1.10"), remote, IPPROTO_ICMP, 77, 1},
      {parseIpv4("10.2.3.4"), remote, IPPROTO_TCP, 40000, 443},
      {parseIpv4("10.9.9.9"), parseIpv4("8.8.8.8"), IPPROTO_UDP, 5353, 53},
  };
  std::map<uint32_t, uint32_t> externalOf; // inside host -> external address
  for (const Flow &flow : flows) {
    Bytes sent = frame(flow);
    PacketResult out = handle(*nat, sent, 0);
    ASSERT_EQ(out.verdict, MU_TX);
    EXPECT_EQ(out.port, 1u);
    uint32_t external = read32(out.bytes, Ip + 12);
    uint16_t port = read16(out.bytes, L4 + (flow.protocol == IPPROTO_ICMP ? 4 : 0));
    EXPECT_TRUE(external == pool[0] || external == pool[1]);
    EXPECT_EQ(externalOf.emplace(flow.saddr, external).first->second, external)
        << "one external address per inside host";
    EXPECT_GE(port, 20000);
    EXPECT_LE(port, 59999);
    EXPECT_EQ(read32(out.bytes, Ip + 16), flow.daddr);
    EXPECT_EQ(out.bytes[Ip + 8], 63); // TTL
    EXPECT_EQ(Bytes(out.bytes.begin(), out.bytes.begin() + 6),
              Bytes(settings.nextHopMac.begin(), settings.nextHopMac.end()));
    nf::Mac own = userPortMac(1);
    EXPECT_EQ(Bytes(out.bytes.begin() + 6, out.bytes.begin() + 12), Bytes(own.begin(), own.end()));
    expectValidChecksums(out.bytes);

    // Both halves of the binding.
    nat_binding binding = {htonl(external), htons(port), 0};
    const void *stored = nat->tables().find("nat_out")->lookup(bytesOf(outKey(flow)).data());
    ASSERT_TRUE(stored);
    EXPECT_EQ(std::memcmp(stored, &binding, sizeof binding), 0);
    nat_flow_key reverse = outKey(flow);
    reverse.addr = htonl(external);
    reverse.port = htons(port);
    auto *origin =
        static_cast<const nat_origin *>(nat->tables().find("nat_in")->lookup(&reverse));
    ASSERT_TRUE(origin);
    EXPECT_EQ(origin->inside_addr, htonl(flow.saddr));
    EXPECT_EQ(origin->inside_port, htons(flow.sport));
    EXPECT_EQ(std::memcmp(origin->inside_mac, Host.data(), 6), 0);
    EXPECT_EQ(std::memcmp(origin->local_mac, Gateway.data(), 6), 0);

    // The flow's next packet keeps its binding; the reply goes back inside.
    EXPECT_EQ(handle(*nat, sent, 0).bytes, out.bytes);
    PacketResult back = handle(*nat, replyTo(out.bytes), 1);
    ASSERT_EQ(back.verdict, MU_TX);
    EXPECT_EQ(back.port, 0u);
    EXPECT_EQ(read32(back.bytes, Ip + 16), flow.saddr);
    EXPECT_EQ(read16(back.bytes, L4 + (flow.protocol == IPPROTO_ICMP ? 4 : 2)), flow.sport);
    EXPECT_EQ(std::memcmp(back.bytes.data(), Host.data(), 6), 0);
    EXPECT_EQ(std::memcmp(back.bytes.data() + 6, Gateway.data(), 6), 0);
    expectValidChecksums(back.bytes);
  }
  EXPECT_EQ(nat->tables().find("nat_out")->size(), flows.size());
  EXPECT_EQ(nat->tables().find("nat_in")->size(), flows.size());

  // A UDP checksum of 0 ("none") stays 0.
  Bytes noChecksum = frame({parseIpv4("192.168.7.7"), remote, IPPROTO_UDP, 1234, 53});
  noChecksum[L4 + 6] = noChecksum[L4 + 7] = 0;
  PacketResult unchecked = handle(*nat, noChecksum, 0);
  EXPECT_EQ(unchecked.verdict, MU_TX);
  EXPECT_EQ(read16(unchecked.bytes, L4 + 6), 0);

  // The odd cases: verdict and counter, nothing bound.
  const Flow plain{parseIpv4("192.168.1.20"), remote, IPPROTO_TCP, 1000, 80};
  packet::Ipv4Options fragment, options, expiring;
  fragment.fragment = 0x2000;
  options.optionWords = 1;
  expiring.ttl = 1;
  Bytes truncated = frame(plain);
  truncated.resize(30);
  Bytes arp = frame(plain);
  arp[12] = 0x08, arp[13] = 0x06;
  Bytes badChecksum = frame(plain);
  badChecksum[Ip + 10] ^= 0xff;
  struct Odd {
    const char *what;
    Bytes bytes;
    uint32_t port;
    int verdict;
    nat_stat stat;
  };
  std::vector<Odd> odd = {
      {"truncated", truncated, 0, MU_DROP, NAT_STAT_MALFORMED},
      {"bad IPv4 checksum", badChecksum, 0, MU_DROP, NAT_STAT_MALFORMED},
      {"ARP", arp, 0, MU_PASS, NAT_STAT_NOT_NAT},
      {"fragment", frame(plain, fragment), 0, MU_PASS, NAT_STAT_FRAGMENT},
      {"options", frame(plain, options), 0, MU_PASS, NAT_STAT_IP_OPTIONS},
      {"TTL 1", frame(plain, expiring), 0, MU_PASS, NAT_STAT_TTL_EXPIRED},
      {"inside to inside", frame({plain.saddr, parseIpv4("10.1.1.1"), IPPROTO_TCP, 1, 2}), 0,
       MU_PASS, NAT_STAT_NOT_NAT},
      {"to our external address",
       frame({plain.saddr, pool[1], IPPROTO_TCP, 1, 2}), 0, MU_PASS, NAT_STAT_NOT_NAT},
      {"group MAC", frame(plain, {}, false, packet::parseMac("01:00:5e:00:00:01")), 0, MU_PASS,
       NAT_STAT_NOT_NAT},
      {"echo reply from inside", frame({plain.saddr, remote, IPPROTO_ICMP, 5, 1}, {}, true), 0,
       MU_PASS, NAT_STAT_NOT_NAT},
      {"GRE", frame({plain.saddr, remote, 47, 0, 0}), 0, MU_PASS, NAT_STAT_NOT_NAT},
      {"from outside, no translation", frame({remote, pool[0], IPPROTO_TCP, 80, 30000}), 1,
       MU_PASS, NAT_STAT_NO_MAPPING},
      {"from outside, not to us", frame({remote, plain.saddr, IPPROTO_TCP, 80, 1000}), 1,
       MU_PASS, NAT_STAT_NOT_NAT},
      {"on neither port", frame(plain), 2, MU_PASS, NAT_STAT_NOT_NAT},
  };
  for (const Odd &c : odd) {
    uint64_t before = counter(*nat, c.stat);
    PacketResult result = handle(*nat, c.bytes, c.port);
    EXPECT_EQ(result.verdict, c.verdict) << c.what;
    EXPECT_EQ(counter(*nat, c.stat), before + 1) << c.what;
  }
  EXPECT_EQ(nat->tables().find("nat_out")->size(), flows.size() + 1);
  EXPECT_EQ(counter(*nat, NAT_STAT_NEW_FLOW), flows.size() + 1);
  EXPECT_EQ(counter(*nat, NAT_STAT_OUTBOUND), 2 * flows.size() + 1);
  EXPECT_EQ(counter(*nat, NAT_STAT_INBOUND), flows.size());
}

std::string writeConfig(const std::string &name, const std::string &text) {
  std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

// One external address and one port: flows to the same remote endpoint
// from two inside hosts cannot both have it; other remotes can share it.
TEST(UserNat, APortOwnedByAnotherFlowToTheSameRemoteIsExhausted) {
  std::string path = writeConfig("nat-one-port.conf", "inside 10.0.0.0/8\n"
                                                      "external 203.0.113.7\n"
                                                      "ports 20000-20000\n"
                                                      "inside-port 3\n"
                                                      "outside-port 5 next-hop=02:00:5e:00:53:01 "
                                                      "mac=02:00:00:00:00:aa\n");
  NatSettings settings = settingsOf(path);
  std::remove(path.c_str());
  EXPECT_EQ(settings.insideIfindex, 3u);
  EXPECT_EQ(settings.outsideIfindex, 5u);
  auto nat = loadNat(settings, false);
  ASSERT_TRUE(nat);
  const uint32_t remote = parseIpv4("198.51.100.9");
  PacketResult first = handle(*nat, frame({parseIpv4("10.0.0.1"), remote, IPPROTO_TCP, 1000, 80}), 3);
  ASSERT_EQ(first.verdict, MU_TX);
  EXPECT_EQ(first.port, 5u);
  EXPECT_EQ(read16(first.bytes, L4), 20000);
  EXPECT_EQ(first.bytes[6 + 5], 0xaa);
  EXPECT_EQ(handle(*nat, frame({parseIpv4("10.0.0.2"), remote, IPPROTO_TCP, 1000, 80}), 3).verdict,
            MU_DROP);
  EXPECT_EQ(counter(*nat, NAT_STAT_PORTS_EXHAUSTED), 1u);
  EXPECT_EQ(handle(*nat, frame({parseIpv4("10.0.0.2"), remote, IPPROTO_TCP, 1000, 81}), 3).verdict,
            MU_TX);
}

void expectSame(Handler &specialized, Handler &generic, const ReplayRing &ring) {
  auto expected = EventLoop(generic.trampoline(), 32).collect(ring);
  auto actual = EventLoop(specialized.trampoline(), 32).collect(ring);
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i)
    ASSERT_EQ(actual[i], expected[i]) << "packet " << i;
  EXPECT_TRUE(specialized.tables().dump() == generic.tables().dump()) << "the tables differ";
}

// Three hot flows and `cold` others from inside hosts; `hot` of the
// packets are the hot flows'.
std::vector<Flow> hotFlows() {
  return {{parseIpv4("192.168.1.10"), parseIpv4("198.51.100.9"), IPPROTO_TCP, 40000, 443},
          {parseIpv4("10.2.3.4"), parseIpv4("198.51.100.10"), IPPROTO_UDP, 5000, 53},
          {parseIpv4("192.168.5.5"), parseIpv4("93.184.216.34"), IPPROTO_TCP, 41000, 80}};
}

ReplayRing traffic(double hot, size_t packets, unsigned seed, uint32_t coldFlows = 200) {
  std::mt19937 random(seed);
  ReplayRing ring;
  for (const Flow &flow : hotFlows())
    ring.frames.push_back(frame(flow));
  for (uint32_t i = 0; i < coldFlows; ++i)
    ring.frames.push_back(frame({uint32_t(0x0a000000u | (random() & 0xffffff)),
                                 uint32_t(0x5d000000u | (random() & 0xffffff)),
                                 uint8_t(random() % 2 ? IPPROTO_TCP : IPPROTO_UDP),
                                 uint16_t(1024 + random() % 60000), uint16_t(1 + random() % 1024)}));
  for (size_t i = 0; i < packets; ++i)
    ring.sequence.push_back(std::uniform_real_distribution<double>(0, 1)(random) < hot
                                ? uint32_t(random() % 3)
                                : uint32_t(3 + random() % coldFlows));
  return ring;
}

// Outbound traffic (traffic()), from inside, with an ICMP echo and a
// truncated frame among it.
ReplayRing outboundTraffic() {
  ReplayRing ring = traffic(0.5, 2000, 6);
  ring.frames.push_back(frame({parseIpv4("192.168.1.1"), parseIpv4("198.51.100.1"), IPPROTO_ICMP,
                               9, 1}));
  Bytes truncated = ring.frames[0];
  truncated.resize(40);
  ring.frames.push_back(truncated);
  ring.sequence.insert(ring.sequence.begin() + 7, {uint32_t(ring.frames.size() - 2),
                                                   uint32_t(ring.frames.size() - 1)});
  return ring;
}

// Sub-batches with the next one's bindings prefetched, by nat_prefetch
// (the NAT's own, nat_out only) or by the stage derived from its code
// (both binding tables): on flows out from inside and on their replies
// from outside, every sub-batch size treats packets and tables as the loop
// without, and either function alone changes nothing.
TEST(UserNat, SubBatchesWithTheBindingsPrefetchedTreatPacketsAsWithout) {
  NatSettings settings = settingsOf(NatConf);
  for (auto prefetch : {HandlerOptions::Prefetch::OwnElseDerived, HandlerOptions::Prefetch::Derived}) {
    auto plain = loadNat(settings, false, {}, HandlerOptions::Prefetch::None);
    auto prefetched = loadNat(settings, false, {}, prefetch);
    ASSERT_TRUE(plain && prefetched);
    const PrefetchStageOrigin &origin = prefetched->prefetchOrigin();
    SCOPED_TRACE(describe(origin));
    if (prefetch == HandlerOptions::Prefetch::Derived) {
      ASSERT_EQ(origin.kind, PrefetchStageOrigin::Kind::Derived);
      // A binding each way, and the counter of a reason the parse returns.
      EXPECT_THAT(origin.tables,
                  ::testing::UnorderedElementsAre("nat_out", "nat_in", "nat_stats"));
    } else {
      EXPECT_EQ(origin.kind, PrefetchStageOrigin::Kind::Written);
    }
    // Out from inside (binding the flows in both NATs alike), then the
    // replies to what was translated, from outside.
    ReplayRing outbound = outboundTraffic();
    std::vector<Bytes> replies;
    for (const PacketResult &result : EventLoop(plain->trampoline(), 16).collect(outbound))
      if (result.verdict == MU_TX)
        replies.push_back(replyTo(result.bytes));
    EventLoop(prefetched->trampoline(), 16).run(outbound, 1);
    ASSERT_GT(replies.size(), 100u) << "premise: flows translated out";
    for (const ReplayRing &ring : {outbound, ringOf(replies, 1)}) {
      SCOPED_TRACE(ring.ingressPort ? "replies, from outside" : "from inside");
      expectPrefetchChangesNothing(*prefetched, ring);
      expectSubBatchesTreatPacketsAsWithout(*plain, *prefetched, ring);
    }
    uint32_t inbound = NAT_STAT_INBOUND;
    EXPECT_GT(*static_cast<const uint64_t *>(plain->tables().find("nat_stats")->lookup(&inbound)),
              0u)
        << "premise: replies translated back in";
  }
}

// The NAT built with `cflags` (its binding tables' kind).
void expectFastPathsOverTheBindingsAnswerAsTheGenericTwin(const std::vector<std::string> &cflags) {
  NatSettings settings = settingsOf(NatConf);
  auto nat = loadNat(settings, true, cflags), generic = loadNat(settings, false, cflags);
  ASSERT_TRUE(nat && generic);

  auto first = nat->specialize();
  ASSERT_THAT_EXPECTED(first, llvm::Succeeded());
  ASSERT_EQ(first->outcome, core::CycleOutcome::Installed);
  ReplayRing ring = traffic(0.9, 4000, 2);
  EventLoop(nat->trampoline(), 32).run(ring, 1);
  EventLoop(generic->trampoline(), 32).run(ring, 1);
  auto second = nat->specialize();
  ASSERT_THAT_EXPECTED(second, llvm::Succeeded());
  ASSERT_EQ(second->outcome, core::CycleOutcome::Installed);
  std::set<std::string> fastPaths, guarded;
  for (const core::SiteDecision &decision : second->log.decisions)
    if (decision.applied && decision.pass == "heavy-hitter-fast-path")
      fastPaths.insert(decision.table);
    else if (decision.applied && decision.pass == "guard-table-writes")
      guarded.insert(decision.table);
  EXPECT_TRUE(fastPaths.count("nat_out")) << "no fast path over the bindings";
  EXPECT_EQ(guarded, (std::set<std::string>{"nat_in", "nat_out"}));
  EXPECT_FALSE(second->writeCounts.empty());
  VersionHandle withFastPaths = nat->trampoline().installed();

  // Hot and cold packets, cold flows new to both.
  expectSame(*nat, *generic, traffic(0.5, 3000, 3, 400));

  // In one burst, between hot packets: a new flow beside hot flow 0 (its
  // next source port), and a new flow whose binding key falls in the
  // write counter of hot flow 1's: the handler writes both tables, the
  // fast path of flow 1 stops answering from its copy, and every packet
  // still comes out as the generic twin's.
  const std::vector<Flow> hot = hotFlows();
  Flow neighbour = hot[0];
  neighbour.sport += 1;
  auto bucketOf = [](const Flow &flow) {
    return core::writeBucket("nat_out", bytesOf(outKey(flow)), WriteCounters::BucketBits, true);
  };
  Flow sharing = hot[1];
  sharing.daddr += 1;
  while (bucketOf(sharing) != bucketOf(hot[1]))
    ++sharing.sport;
  std::vector<Bytes> burst;
  for (const Flow &flow : {hot[0], neighbour, hot[0], hot[1], sharing, hot[1], hot[2], neighbour,
                           sharing, hot[0], hot[1]})
    burst.push_back(frame(flow));
  size_t boundBefore = generic->tables().find("nat_out")->size();
  expectSame(*nat, *generic, ringOf(burst, 0));
  EXPECT_EQ(generic->tables().find("nat_out")->size(), boundBefore + 2);
  EXPECT_EQ(nat->trampoline().installed(), withFastPaths);
  // Their replies, from outside.
  std::vector<Bytes> replies;
  for (const PacketResult &result : EventLoop(generic->trampoline(), 32).collect(ringOf(burst, 0)))
    replies.push_back(replyTo(result.bytes));
  EventLoop(nat->trampoline(), 32).collect(ringOf(burst, 0));
  expectSame(*nat, *generic, ringOf(replies, 1));

  // The port range moved between bursts: every binding outside it is
  // removed (a guarded change), and the next cycle, built on what the
  // tables hold now, finds the hot flows unbound: their fast paths answer
  // "no binding" only until the handler binds them again (their write
  // counters move), or their second packets would be bound anew (and
  // counted as new flows twice).
  settings.portMin = 60000;
  settings.portMax = 60999;
  for (Handler *handler : {nat.get(), generic.get()})
    ASSERT_THAT_ERROR(loadUserNat(handler->tables(), settings), llvm::Succeeded());
  EXPECT_EQ(generic->tables().find("nat_out")->size(), 0u);
  auto third = nat->specialize();
  ASSERT_THAT_EXPECTED(third, llvm::Succeeded());
  EXPECT_EQ(third->outcome, core::CycleOutcome::Installed);
  bool unboundFastPath = false;
  for (const core::SiteDecision &decision : third->log.decisions)
    unboundFastPath |= decision.applied && decision.pass == "heavy-hitter-fast-path" &&
                       decision.table == "nat_out";
  EXPECT_TRUE(unboundFastPath);
  std::vector<Bytes> rebound;
  for (const Flow &flow : {hot[0], hot[0], hot[1], hot[0], hot[1], hot[2], hot[2]})
    rebound.push_back(frame(flow));
  expectSame(*nat, *generic, ringOf(rebound, 0));
  EXPECT_EQ(counter(*nat, NAT_STAT_NEW_FLOW), counter(*generic, NAT_STAT_NEW_FLOW));
  PacketResult moved = handle(*nat, frame(hot[0]), 0);
  EXPECT_GE(read16(moved.bytes, L4), 60000);
  handle(*generic, frame(hot[0]), 0);
  expectSame(*nat, *generic, traffic(0.9, 3000, 4));
  expectSame(*nat, *generic, ringOf(replies, 1)); // the old ports: no mapping now
}

TEST(UserNat, FastPathsOverTheBindingsAnswerAsTheGenericTwinWhileNeighboursAreBound) {
  expectFastPathsOverTheBindingsAnswerAsTheGenericTwin({});
}

#ifdef MORPHEUS_WITH_DPDK
// The same over DPDK's rte_hash: the core's fast paths and write guards
// over bindings the handler writes through mu_update into an rte_hash.
TEST(UserNat, FastPathsOverRteHashBindingsAnswerAsTheGenericTwinWhileNeighboursAreBound) {
  expectFastPathsOverTheBindingsAnswerAsTheGenericTwin({"-DNAT_HASH=MU_HASH_RTE"});
}
#endif

} // namespace
} // namespace morpheus::user
