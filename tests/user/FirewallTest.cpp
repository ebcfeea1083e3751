// The user-space firewall (nf/firewall/user/firewall_user.c), with the real
// JIT: its bit-vector search, on the tables the firewall's control plane
// computes, answers as the rule list read rule by rule (firstMatch), and
// counts each packet on the rule that decided it; the version Morpheus
// specializes, with fast paths for the hot flows' prefixes, answers
// every packet as its generic twin with equal tables (the per-rule hit
// counters the handler writes included), and a rule changed between
// bursts is seen by the next burst.
#include "nf/firewall/UserRules.h"

#include "backend/user/EventLoop.h"
#include "backend/user/Handler.h"
#include "core/Pipeline.h"
#include "SubBatches.h"
#include "support/packet/Packet.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>

#include <netinet/in.h>

#include <random>
#include <set>

namespace morpheus::user {
namespace {

using nf::firewall::PortRange;
using nf::firewall::Rule;
using testing::expectPrefetchChangesNothing;
using testing::expectSubBatchesTreatPacketsAsWithout;

const std::string FirewallSource =
    std::string(MORPHEUS_SOURCE_DIR) + "/nf/firewall/user/firewall_user.c";

// Following the traffic, the prefix tables stay tables, so that their
// lookups are sampled and get fast paths: an inline limit below their few
// prefixes here (lpm-as-code declines them, and instrument-table-sites
// skips tables small enough to become code), lpm-as-array left out (a
// derived table is not sampled).
std::unique_ptr<Handler>
loadFirewall(bool followTraffic,
             HandlerOptions::Prefetch prefetch = HandlerOptions::Prefetch::OwnElseDerived) {
  HandlerOptions options;
  options.entry = "firewall";
  options.prefetch = prefetch;
  if (followTraffic) {
    options.inlineLimit = 2;
    options.tablePasses = core::tablePassesWithout({"lpm-as-array"});
    core::TrafficProfileOptions traffic;
    traffic.initialPeriod = 4;
    options.traffic = traffic;
  }
  auto handler = Handler::load(FirewallSource, options);
  if (!handler) {
    ADD_FAILURE() << toString(handler.takeError());
    return nullptr;
  }
  return std::move(*handler);
}

Rule rule(const char *src, uint8_t srcLength, const char *dst, uint8_t dstLength,
          std::optional<uint8_t> protocol, PortRange sport, PortRange dport, fw_action action) {
  Rule made;
  made.src = {packet::parseIpv4(src), srcLength};
  made.dst = {packet::parseIpv4(dst), dstLength};
  made.protocol = protocol;
  made.sport = sport;
  made.dport = dport;
  made.action = action;
  return made;
}

const PortRange Any{};

// Nested prefixes on both sides, port ranges, a port-less rule, a
// protocol-only rule; the default drops.
std::vector<Rule> rules() {
  return {
      rule("10.1.2.0", 24, "0.0.0.0", 0, std::nullopt, Any, Any, FW_DROP),
      rule("10.0.0.0", 8, "192.168.1.0", 24, IPPROTO_TCP, Any, {80, 80}, FW_ACCEPT),
      rule("10.1.0.0", 16, "0.0.0.0", 0, IPPROTO_UDP, Any, {53, 53}, FW_ACCEPT),
      rule("0.0.0.0", 0, "192.168.0.0", 16, IPPROTO_ICMP, Any, Any, FW_ACCEPT),
      rule("0.0.0.0", 0, "0.0.0.0", 0, std::nullopt, {1000, 1999}, Any, FW_ACCEPT),
      rule("10.0.0.0", 8, "192.168.0.0", 16, std::nullopt, Any, Any, FW_DROP),
      rule("172.16.0.0", 12, "0.0.0.0", 0, IPPROTO_TCP, Any, {1, 1023}, FW_ACCEPT),
  };
}

Bytes flow(uint32_t saddr, uint32_t daddr, uint8_t protocol, uint16_t sport, uint16_t dport,
           uint16_t fragment = 0) {
  packet::Ipv4Options ip;
  ip.saddr = saddr;
  ip.daddr = daddr;
  ip.fragment = fragment;
  packet::PacketBuilder builder;
  builder.ethernet(packet::parseMac("02:00:00:00:00:01"), packet::parseMac("02:00:00:00:00:02"))
      .ipv4(ip);
  if (protocol == IPPROTO_TCP)
    builder.tcp(sport, dport);
  else if (protocol == IPPROTO_UDP)
    builder.udp(sport, dport);
  else
    builder.icmpEcho(sport, dport);
  return builder.payload(18).build();
}

// Three hot flows (one per outcome: rule 1 accepts, rule 0 drops, rule 4
// accepts), cold flows drawn over the rules' prefixes and ports, and the
// packets classified without rules or without ports: a non-first
// fragment, ARP, a truncated one. Hot packets are `hot` of the sequence.
ReplayRing traffic(double hot, size_t packets, unsigned seed) {
  std::mt19937 random(seed);
  ReplayRing ring;
  ring.frames = {
      flow(0x0a050505, 0xc0a80107, IPPROTO_TCP, 40000, 80),
      flow(0x0a010203, 0xc0a80107, IPPROTO_TCP, 40000, 80),
      flow(0x08080808, 0x01020304, IPPROTO_UDP, 1500, 9999),
  };
  const uint32_t sources[] = {0x0a010203, 0x0a01ff01, 0x0a020304, 0xac100001, 0x08080808};
  const uint32_t destinations[] = {0xc0a80107, 0xc0a80207, 0x01020304};
  const uint8_t protocols[] = {IPPROTO_TCP, IPPROTO_UDP, IPPROTO_ICMP};
  const uint16_t ports[] = {53, 80, 443, 1000, 1999, 2000, 40000};
  for (int i = 0; i < 200; ++i)
    ring.frames.push_back(flow(sources[random() % 5], destinations[random() % 3],
                               protocols[random() % 3], ports[random() % 7], ports[random() % 7],
                               random() % 4 ? 0 : 0x20 * (random() % 2)));
  Bytes arp = ring.frames[0];
  arp[12] = 0x08, arp[13] = 0x06;
  ring.frames.push_back(arp);
  Bytes truncated = ring.frames[0];
  truncated.resize(20);
  ring.frames.push_back(truncated);
  for (size_t i = 0; i < packets; ++i)
    ring.sequence.push_back(std::uniform_real_distribution<double>(0, 1)(random) < hot
                                ? uint32_t(random() % 3)
                                : uint32_t(3 + random() % (ring.frames.size() - 3)));
  return ring;
}

// A firewall following the traffic and its generic twin, both loaded with
// rules(), the first specialized once (installed: the version that
// samples); a test failure leaves them null.
struct Twins {
  std::unique_ptr<Handler> firewall, generic;
};
Twins specializedTwins() {
  Twins twins{loadFirewall(true), loadFirewall(false)};
  if (!twins.firewall || !twins.generic)
    return {};
  for (Handler *handler : {twins.firewall.get(), twins.generic.get()})
    if (Error err = nf::firewall::loadUserRules(handler->tables(), rules(), FW_DROP)) {
      ADD_FAILURE() << toString(std::move(err));
      return {};
    }
  auto first = twins.firewall->specialize();
  if (!first || first->outcome != core::CycleOutcome::Installed) {
    ADD_FAILURE() << (first ? first->describe() : toString(first.takeError()));
    return {};
  }
  return twins;
}

void expectSame(Handler &specialized, Handler &generic, const ReplayRing &ring) {
  auto expected = EventLoop(generic.trampoline(), 32).collect(ring);
  auto actual = EventLoop(specialized.trampoline(), 32).collect(ring);
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i)
    ASSERT_EQ(actual[i], expected[i]) << "packet " << i;
  EXPECT_EQ(specialized.tables().dump(), generic.tables().dump());
}

TEST(UserFirewall, BitVectorSearchAnswersAsTheRulesReadInOrder) {
  auto firewall = loadFirewall(false);
  ASSERT_TRUE(firewall);
  ASSERT_THAT_ERROR(nf::firewall::loadUserRules(firewall->tables(), rules(), FW_DROP),
                    llvm::Succeeded());
  ReplayRing ring = traffic(0, 0, 1);
  for (uint32_t frame = 0; frame < ring.frames.size(); ++frame)
    ring.sequence.push_back(frame);
  auto results = EventLoop(firewall->trampoline(), 32).collect(ring);
  std::vector<uint64_t> hits(FW_HIT_SLOTS);
  std::set<size_t> matched;
  for (size_t i = 0; i < results.size(); ++i) {
    auto fields = nf::firewall::packetFields(ring.frames[i]);
    if (!fields) { // ARP passes, the truncated frame drops
      EXPECT_EQ(results[i].verdict, i + 2 == results.size() ? MU_PASS : MU_DROP) << "frame " << i;
      continue;
    }
    std::optional<size_t> rule = nf::firewall::firstMatch(rules(), *fields);
    bool accepted = rule && rules()[*rule].action == FW_ACCEPT;
    EXPECT_EQ(results[i].verdict, accepted ? MU_TX : MU_DROP) << "frame " << i;
    if (accepted) {
      EXPECT_EQ(results[i].port, 1u) << "frame " << i; // port 0's pair
    }
    ++hits[rule ? *rule : FW_DEFAULT_SLOT];
    if (rule)
      matched.insert(*rule);
  }
  EXPECT_EQ(matched.size(), rules().size()); // every rule decided some packet
  Table *counters = firewall->tables().find("rule_hits");
  for (uint32_t slot = 0; slot < FW_HIT_SLOTS; ++slot)
    ASSERT_EQ(*static_cast<const uint64_t *>(counters->lookup(&slot)), hits[slot])
        << "slot " << slot;
}

// The firewall declares no prefetch function: the one derived from its
// code asks for the source prefix's entry (the first lookup keyed by the
// packet), changes nothing by itself, and sub-batches with it treat
// packets and the hit counters as the loop without.
TEST(UserFirewall, ItsDerivedPrefetchStageTreatsPacketsAsWithout) {
  auto firewall = loadFirewall(false), plain = loadFirewall(false, HandlerOptions::Prefetch::None);
  ASSERT_TRUE(firewall && plain);
  const PrefetchStageOrigin &origin = firewall->prefetchOrigin();
  ASSERT_EQ(origin.kind, PrefetchStageOrigin::Kind::Derived) << describe(origin);
  EXPECT_THAT(origin.tables, ::testing::ElementsAre("src_prefixes"));
  for (Handler *handler : {firewall.get(), plain.get()})
    ASSERT_THAT_ERROR(nf::firewall::loadUserRules(handler->tables(), rules(), FW_DROP),
                      llvm::Succeeded());
  ReplayRing ring = traffic(0.3, 3000, 4);
  expectPrefetchChangesNothing(*firewall, ring);
  expectSubBatchesTreatPacketsAsWithout(*plain, *firewall, ring);
}

TEST(UserFirewall, SpecializedWithFastPathsAnswersAsTheGenericTwinAcrossARuleChange) {
  auto [firewall, generic] = specializedTwins();
  ASSERT_TRUE(firewall && generic);
  ReplayRing ring = traffic(0.9, 4000, 2);
  EventLoop(firewall->trampoline(), 32).run(ring, 1);
  EventLoop(generic->trampoline(), 32).run(ring, 1);
  auto second = firewall->specialize();
  ASSERT_THAT_EXPECTED(second, llvm::Succeeded());
  ASSERT_EQ(second->outcome, core::CycleOutcome::Installed);
  std::set<std::string> fastPaths;
  for (const core::SiteDecision &decision : second->log.decisions)
    if (decision.pass == "heavy-hitter-fast-path" && decision.applied)
      fastPaths.insert(decision.table);
  EXPECT_EQ(fastPaths, (std::set<std::string>{"dst_prefixes", "src_prefixes"}));

  // Hot and cold packets: the same verdicts, bytes and counters.
  expectSame(*firewall, *generic, traffic(0.5, 3000, 3));

  // The hot accepted flow's rule turned to DROP between bursts: the next
  // burst drops it, in both, before and after the next cycle.
  ReplayRing hot{{ring.frames[0]}, {0}, 0};
  for (Handler *handler : {firewall.get(), generic.get()})
    EXPECT_EQ(EventLoop(handler->trampoline(), 1).collect(hot)[0].verdict, MU_TX);
  std::vector<Rule> changed = rules();
  changed[1].action = FW_DROP;
  for (Handler *handler : {firewall.get(), generic.get()})
    ASSERT_THAT_ERROR(nf::firewall::loadUserRules(handler->tables(), changed, FW_DROP),
                      llvm::Succeeded());
  EXPECT_EQ(EventLoop(firewall->trampoline(), 1).collect(hot)[0].verdict, MU_DROP);
  EventLoop(generic->trampoline(), 1).collect(hot);
  expectSame(*firewall, *generic, traffic(0.5, 3000, 4));
  auto third = firewall->specialize();
  ASSERT_THAT_EXPECTED(third, llvm::Succeeded());
  EXPECT_EQ(third->outcome, core::CycleOutcome::Installed);
  expectSame(*firewall, *generic, traffic(0.9, 3000, 5));
  EXPECT_EQ(EventLoop(firewall->trampoline(), 1).collect(hot)[0].verdict, MU_DROP);
}

// The flow of the firewall's lookups (source prefix, destination prefix,
// protocol, ports: one tuple) is followed as the eBPF backend follows it,
// by the same cycle code: its hot tuples get a copy of the code after the
// flow with the tuple as constants (flow-fast-path), and the firewall
// answers as its generic twin, hot and cold packets alike.
TEST(UserFirewall, HotFlowsGetTheirOwnCopyOfTheClassifier) {
  auto [firewall, generic] = specializedTwins();
  ASSERT_TRUE(firewall && generic);
  ReplayRing ring = traffic(0.9, 4000, 2);
  EventLoop(firewall->trampoline(), 32).run(ring, 1, [&] { firewall->recordTraffic(); });
  EventLoop(generic->trampoline(), 32).run(ring, 1);
  auto second = firewall->specialize();
  ASSERT_THAT_EXPECTED(second, llvm::Succeeded());
  ASSERT_EQ(second->outcome, core::CycleOutcome::Installed) << second->describe();
  std::optional<unsigned> flowSite;
  for (const auto &[site, profiled] : second->log.profiled)
    if (profiled.flowSavingNs)
      flowSite = site;
  ASSERT_TRUE(flowSite) << "no version records a flow";
  ASSERT_TRUE(second->traffic.count(*flowSite));
  EXPECT_FALSE(second->traffic.at(*flowSite).hotKeys.empty())
      << second->traffic.at(*flowSite).why;
  bool copied = false;
  for (const core::SiteDecision &decision : second->log.decisions)
    copied |= decision.pass == "flow-fast-path" && decision.applied;
  EXPECT_TRUE(copied);
  expectSame(*firewall, *generic, traffic(0.5, 3000, 3));
}

} // namespace
} // namespace morpheus::user
