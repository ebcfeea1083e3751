// Analysis precise enough for real code: configuration beside a counter in
// one value or one map (per-CPU too), arrays that are small by content, and
// configuration behind a map of maps. Each test
// runs the corpus program (tests/programs/) under an Optimizer, checks the
// specialization's decision and compares the specialized program with the
// original on the packets that exercise it; the counters the data plane
// writes must still reach the live map.
#include "Corpus.h"
#include "runtime/Daemon.h"
#include "backend/bpf/BpfObject.h"
#include "backend/bpf/Frontend.h"
#include "backend/bpf/Guard.h"
#include "backend/bpf/MapIO.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>

#include <algorithm>
#include <set>
#include <fstream>
#include <atomic>
#include <thread>
#include <arpa/inet.h>
#include <unistd.h>
#include <cstring>
#include <sys/mman.h>

namespace morpheus::testing {
namespace {

struct Rule {
  uint32_t action;
  uint32_t port;
  uint64_t hits;
};

uint64_t hitsOf(CorpusProgram &program) {
  Rule rule{};
  uint32_t zero = 0;
  EXPECT_EQ(bpf_map_lookup_elem(program.opt().mapFd("rules"), &zero, &rule), 0);
  return rule.hits;
}

TEST(PreciseAnalysis, ConfigurationBesideACounterIsFoldedAndTheCounterStillCounts) {
  CorpusProgram program("field_counter.bpf.c");
  ASSERT_TRUE(program.ok());
  program.set("rules", uint32_t(0), Rule{XDP_DROP, 7, 0});
  program.set("stats", uint32_t(0), uint64_t(100)); // the ttl limit; key 1 counts
  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  const core::SiteDecision *folded = CorpusProgram::decision(report, "rules", true);
  ASSERT_NE(folded, nullptr) << report.log.toText();
  EXPECT_EQ(folded->pass, "fold-read-only-fields") << folded->detail;
  const core::SiteDecision *limit = CorpusProgram::decision(report, "stats", true);
  ASSERT_NE(limit, nullptr) << "key 0 is never written: " << report.log.toText();
  EXPECT_EQ(limit->pass, "constant-key-lookup");
  // What `run` tells the operator of each: written in part, the rest may be
  // specialized (so a bpftool write of the limit is polled, not live).
  unsigned partlyWritten = 0;
  for (const std::string &line :
       runtime::updateGuarantees(program.opt().spec(), std::chrono::seconds(1), false))
    if (line.starts_with("map 'rules'") || line.starts_with("map 'stats'")) {
      ++partlyWritten;
      EXPECT_NE(line.find("written by the program in part"), std::string::npos) << line;
      EXPECT_NE(line.find("may be specialized"), std::string::npos) << line;
    }
  EXPECT_EQ(partlyWritten, 2u);

  uint64_t before = hitsOf(program);
  for (PacketSpec spec : {PacketSpec{.ttl = 64, .tos = 7}, PacketSpec{.ttl = 64, .tos = 3},
                          PacketSpec{.ttl = 200, .tos = 3}}) {
    Bytes packet = buildPacket(spec);
    EXPECT_EQ(program.active(packet), program.original(packet)) << "tos " << int(spec.tos);
  }
  EXPECT_EQ(program.original(buildPacket({.ttl = 64, .tos = 3})).verdict, uint32_t(XDP_DROP));
  // Three packets through each version, and one more above: every one
  // counted in the live entry, by the specialized version too.
  EXPECT_EQ(hitsOf(program), before + 7);

  // A change through Morpheus is seen on the very next packet.
  program.set("rules", uint32_t(0), Rule{XDP_TX, 7, 0});
  Bytes packet = buildPacket({.ttl = 64, .tos = 3});
  EXPECT_EQ(program.active(packet).verdict, uint32_t(XDP_TX));
}

// A counter moving beside folded configuration changes the snapshot every
// period; only the bytes the data plane never writes can change the code,
// so the cycle stops before specializing. A configuration byte written
// behind Morpheus's back (not guarded) does rebuild.
TEST(PreciseAnalysis, CountersMovingBesideConfigurationDoNotRebuild) {
  CorpusProgram program("field_counter.bpf.c");
  ASSERT_TRUE(program.ok());
  program.set("rules", uint32_t(0), Rule{XDP_DROP, 7, 0});
  program.set("stats", uint32_t(0), uint64_t(100));
  ASSERT_TRUE(program.cycle().installed());
  uint64_t before = hitsOf(program);
  for (int i = 0; i < 10; ++i)
    program.active(buildPacket({.ttl = 64, .tos = 3}));
  ASSERT_EQ(hitsOf(program), before + 10); // the snapshot did change
  core::CycleReport report = program.cycle();
  EXPECT_EQ(report.outcome, core::CycleOutcome::Unchanged) << report.describe();
  EXPECT_TRUE(report.log.decisions.empty()) << "specialized again:\n" << report.log.toText();

  Rule changed{XDP_TX, 7, hitsOf(program)};
  uint32_t zero = 0;
  ASSERT_EQ(bpf_map_update_elem(program.opt().mapFd("rules"), &zero, &changed, BPF_ANY), 0);
  report = program.cycle();
  EXPECT_EQ(report.outcome, core::CycleOutcome::Installed) << report.describe();
  Bytes packet = buildPacket({.ttl = 64, .tos = 3});
  EXPECT_EQ(program.active(packet).verdict, uint32_t(XDP_TX));
}

struct Backend {
  uint32_t weight;
  uint32_t action;
};

TEST(PreciseAnalysis, SparseArrayIsASmallTableAndOtherSlotsHoldZero) {
  CorpusProgram program("sparse_array.bpf.c");
  ASSERT_TRUE(program.ok());
  program.set("backends", uint32_t(5), Backend{1, XDP_DROP});
  program.set("backends", uint32_t(900), Backend{2, XDP_TX});
  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  const core::SiteDecision *inlined = CorpusProgram::decision(report, "backends", true);
  ASSERT_NE(inlined, nullptr) << report.log.toText();
  EXPECT_EQ(inlined->pass, "inline-small-table");
  EXPECT_NE(inlined->detail.find("the listed slots of 1024; the others yield their common value"),
            std::string::npos)
      << inlined->detail;
  for (uint16_t id : {5, 900, 0, 7, 1023, 1024 + 5}) {
    Bytes packet = buildPacket({.id = id});
    EXPECT_EQ(program.active(packet), program.original(packet)) << "id " << id;
  }
  EXPECT_EQ(program.original(buildPacket({.id = 5})).verdict, uint32_t(XDP_DROP));
  EXPECT_EQ(program.original(buildPacket({.id = 7})).verdict, uint32_t(XDP_PASS));
}

TEST(PreciseAnalysis, SparseArrayWithTooManySlotsIsDeclinedWithItsReason) {
  runtime::OptimizerOptions options = CorpusProgram::noShadow();
  options.inlineLimit = 2;
  CorpusProgram program("sparse_array.bpf.c", options);
  ASSERT_TRUE(program.ok());
  for (uint32_t slot : {1u, 2u, 3u})
    program.set("backends", slot, Backend{1, XDP_DROP});
  core::CycleReport report = program.cycle();
  const core::SiteDecision *kept = CorpusProgram::decision(report, "backends", false);
  ASSERT_NE(kept, nullptr) << report.describe() << report.log.toText();
  EXPECT_NE(kept->detail.find("larger than the inline limit of 2"), std::string::npos)
      << kept->detail;
}

// The decision the last specialization took at `table` in `pass`, or nullptr.
const core::SiteDecision *decisionOf(const core::CycleReport &report, const std::string &table,
                                     const std::string &pass) {
  for (const core::SiteDecision &d : report.log.decisions)
    if (d.table == table && d.pass == pass && d.applied)
      return &d;
  return nullptr;
}

// More slots than region-as-table takes: read by content only while at
// most the inline limit of slots differ from the common value.
struct LargeSlot {
  uint32_t action;
  uint32_t mark;
};
constexpr uint32_t LargeSlots = 262144;

Bytes packetTo(uint32_t slot) { return buildPacket({.daddr = 0x0a000000 | slot}); }

TEST(PreciseAnalysis, LargeArrayWithFewSetSlotsIsInlinedAndEveryChangeIsSeen) {
  CorpusProgram program("large_array.bpf.c");
  ASSERT_TRUE(program.ok());
  program.set("slots", uint32_t(5), LargeSlot{XDP_DROP, 1});
  program.set("slots", uint32_t(200000), LargeSlot{XDP_TX, 2});
  program.set("slots", LargeSlots - 1, LargeSlot{XDP_DROP, 3}); // the default action
  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  const core::SiteDecision *inlined = nullptr;
  for (const core::SiteDecision &d : report.log.decisions)
    if (d.table == "slots" && d.applied && d.pass == "inline-small-table")
      inlined = &d;
  ASSERT_NE(inlined, nullptr) << report.log.toText();
  EXPECT_NE(inlined->detail.find("3 entries"), std::string::npos) << inlined->detail;
  std::vector<uint32_t> probes = {5, 200000, LargeSlots - 1, 0, 4, 6, 199999, 200001, 131072};
  for (uint32_t slot : probes)
    EXPECT_EQ(program.active(packetTo(slot)), program.original(packetTo(slot))) << slot;
  EXPECT_EQ(program.active(packetTo(7)).verdict, uint32_t(XDP_DROP)); // the default
  // A slot the version holds as the common value, changed through
  // Morpheus: the very next packet sees it, and the next cycle lists it.
  program.set("slots", uint32_t(7), LargeSlot{XDP_TX, 4});
  EXPECT_EQ(program.active(packetTo(7)).verdict, uint32_t(XDP_TX));
  report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  probes.push_back(7);
  for (uint32_t slot : probes)
    EXPECT_EQ(program.active(packetTo(slot)), program.original(packetTo(slot))) << slot;
  EXPECT_EQ(program.active(packetTo(7)).verdict, uint32_t(XDP_TX));
  // The default slot changed: every unlisted slot's answer moves with it.
  program.set("slots", LargeSlots - 1, LargeSlot{XDP_PASS, 5});
  EXPECT_EQ(program.active(packetTo(8)).verdict, uint32_t(XDP_PASS));
}

// Many slots set, each its own value: no pass could take the listing, so
// the read stops early (the site's reason names no entry count: nothing
// was listed) and the constant slot is still read and inlined. Validated
// before the install (shadow validation on).
TEST(PreciseAnalysis, LargeArrayWithManySetSlotsIsReadOnlyAtItsConstantSlot) {
  runtime::OptimizerOptions options;
  CorpusProgram program("large_array.bpf.c", options);
  ASSERT_TRUE(program.ok());
  for (uint32_t slot = 0; slot < 300; ++slot)
    program.set("slots", slot * 97, LargeSlot{slot % 2 ? XDP_TX : XDP_DROP, slot});
  program.set("slots", LargeSlots - 1, LargeSlot{XDP_TX, 1000});
  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  const core::SiteDecision *kept = CorpusProgram::decision(report, "slots", false);
  ASSERT_NE(kept, nullptr) << report.log.toText();
  EXPECT_NE(kept->detail.find("larger than the inline limit of 64"), std::string::npos)
      << kept->detail;
  EXPECT_EQ(kept->detail.find("entries)"), std::string::npos) << "read whole: " << kept->detail;
  const core::SiteDecision *constant = decisionOf(report, "slots", "constant-key-lookup");
  ASSERT_NE(constant, nullptr) << report.log.toText();
  for (uint32_t slot : {0u, 97u, 194u, 1u, 98u, 300u * 97, LargeSlots - 1, LargeSlots - 2})
    EXPECT_EQ(program.active(packetTo(slot)), program.original(packetTo(slot))) << slot;
  EXPECT_EQ(program.active(packetTo(1)).verdict, uint32_t(XDP_TX)); // the default
  // The constant slot changed through Morpheus: seen by the next packet.
  program.set("slots", LargeSlots - 1, LargeSlot{XDP_PASS, 1001});
  EXPECT_EQ(program.active(packetTo(1)).verdict, uint32_t(XDP_PASS));
  report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  for (uint32_t slot : {0u, 97u, 1u, LargeSlots - 1})
    EXPECT_EQ(program.active(packetTo(slot)), program.original(packetTo(slot))) << slot;
}

struct Config {
  uint32_t action;
  uint32_t port;
};

TEST(PreciseAnalysis, InnerConfigurationIsResolvedThroughTheOuterMapAndInlined) {
  CorpusProgram program("inner_config.bpf.c");
  ASSERT_TRUE(program.ok());
  program.set("primary", uint32_t(0), Config{XDP_DROP, 7});
  program.set("secondary", uint32_t(0), Config{XDP_TX, 7});
  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  const core::SiteDecision *resolved = decisionOf(report, "primary", "resolve-inner-table");
  ASSERT_NE(resolved, nullptr) << report.log.toText();
  EXPECT_EQ(resolved->detail, "configs[00 00 00 00] holds primary");
  EXPECT_NE(decisionOf(report, "primary", "constant-key-lookup"), nullptr) << report.log.toText();
  for (uint8_t tos : {7, 3}) {
    Bytes packet = buildPacket({.tos = tos});
    EXPECT_EQ(program.active(packet), program.original(packet)) << "tos " << int(tos);
  }
  EXPECT_EQ(program.active(buildPacket({.tos = 3})).verdict, uint32_t(XDP_DROP));

  // Swapping the configuration table is an update of the outer map through
  // Morpheus: the very next packet sees the new table.
  program.set("configs", uint32_t(0), int32_t(program.opt().mapFd("secondary")));
  EXPECT_EQ(program.active(buildPacket({.tos = 3})).verdict, uint32_t(XDP_TX));
  report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  resolved = decisionOf(report, "secondary", "resolve-inner-table");
  ASSERT_NE(resolved, nullptr) << report.log.toText();
  EXPECT_EQ(resolved->detail, "configs[00 00 00 00] holds secondary");
  Bytes packet = buildPacket({.tos = 3});
  EXPECT_EQ(program.active(packet), program.original(packet));
  EXPECT_EQ(program.active(packet).verdict, uint32_t(XDP_TX));
}

// A connection table kept as production load balancers keep it (Katran's
// per-CPU LRU tables behind an array of maps, a global LRU table when the
// CPU's slot is empty): the flow lookup's and insert's table operand
// merges an inner map with a global map. Only the maps it can be are
// written; the VIP table and the backend array stay read-only and are
// specialized, and every packet answers as the original.
TEST(PreciseAnalysis, AConnectionTableMergedWithItsFallbackLeavesTheConfigurationReadOnly) {
  CorpusProgram program("conn_fallback.bpf.c");
  ASSERT_TRUE(program.ok());
  const core::TableAccessInfo &analysis = program.opt().spec().analysis();
  for (const char *config : {"vips", "backends", "conn_per_cpu"})
    EXPECT_TRUE(analysis.isReadOnly(config)) << config;
  for (const char *connections : {"conn_cpu0", "conn_fallback"})
    EXPECT_FALSE(analysis.isReadOnly(connections)) << connections;

  struct VipKey {
    uint32_t daddr;
    uint16_t dport;
    uint8_t proto, pad;
  };
  struct Vip {
    uint32_t firstBackend, backends;
  };
  struct Backend {
    uint8_t mac[6];
    uint16_t pad;
  };
  program.set("vips", VipKey{htonl(0x0a000001), htons(80), IPPROTO_UDP, 0}, Vip{2, 2});
  program.set("vips", VipKey{htonl(0x0a000002), htons(53), IPPROTO_UDP, 0}, Vip{0, 0});
  for (uint32_t slot : {2u, 3u})
    program.set("backends", slot, Backend{{2, 0, 0, 0, 0, uint8_t(slot)}, 0});
  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  EXPECT_NE(CorpusProgram::decision(report, "vips", true), nullptr) << report.log.toText();

  // Original then specialized on each packet: both see the connections the
  // other inserted (the same maps), and pick the same backend.
  std::vector<PacketSpec> specs;
  for (uint16_t sport : {1000, 1001, 1002, 1003})
    specs.push_back({.daddr = 0x0a000001, .sport = sport, .dport = 80});
  specs.push_back({.daddr = 0x0a000002, .dport = 53});
  specs.push_back({.daddr = 0x0a000001, .dport = 81});
  specs.push_back({.protocol = IPPROTO_TCP, .daddr = 0x0a000001, .dport = 80});
  for (const PacketSpec &spec : specs)
    for (int round = 0; round < 2; ++round) {
      Bytes packet = buildPacket(spec);
      EXPECT_EQ(program.active(packet), program.original(packet))
          << "sport " << spec.sport << " dport " << spec.dport << " round " << round;
    }
  EXPECT_EQ(program.active(buildPacket(specs[0])).verdict, uint32_t(XDP_TX));
  EXPECT_EQ(program.active(buildPacket(specs[4])).verdict, uint32_t(XDP_DROP));
}

// Lookups handed back through a pointer out-parameter of functions clang
// does not inline, as the kernel selftests' test_xdp_noinline picks its
// real (tests/programs/out_param.bpf.c): the analysis follows the pointer
// into the caller's stack slot and back, so the backend array read through
// it stays read-only and is specialized, while the counter the caller
// increments through it is written and still counts in the live map.
TEST(PreciseAnalysis, ALookupHandedBackThroughAnOutParameterLeavesItsMapReadOnly) {
  CorpusProgram program("out_param.bpf.c");
  ASSERT_TRUE(program.ok());
  const core::TableAccessInfo &analysis = program.opt().spec().analysis();
  EXPECT_TRUE(analysis.isReadOnly("backends")) << "read through the out-parameter";
  EXPECT_TRUE(analysis.isReadOnly("verdicts")) << "returned by a static function";
  EXPECT_FALSE(analysis.isReadOnly("forwarded")) << "incremented through the out-parameter";

  struct Backend {
    uint8_t mac[6];
    uint16_t weight;
  };
  for (uint32_t slot = 0; slot < 8; ++slot)
    program.set("backends", slot, Backend{{2, 0, 0, 0, 0, uint8_t(slot)}, uint16_t(slot % 3)});
  program.set("verdicts", uint32_t(1), uint32_t(1));
  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  EXPECT_NE(CorpusProgram::decision(report, "backends", true), nullptr) << report.log.toText();
  EXPECT_NE(CorpusProgram::decision(report, "verdicts", true), nullptr) << report.log.toText();

  // The IP id picks the slot, the TOS the verdict (slot 1 of verdicts drops).
  EXPECT_EQ(program.original(buildPacket({.tos = 1, .id = 1})).verdict, uint32_t(XDP_DROP));
  EXPECT_EQ(program.original(buildPacket({.id = 1})).verdict, uint32_t(XDP_TX));
  EXPECT_EQ(program.original(buildPacket({.id = 3})).verdict, uint32_t(XDP_PASS)) << "weight 0";
  uint64_t before = 0, after = 0;
  uint32_t zero = 0;
  ASSERT_EQ(bpf_map_lookup_elem(program.opt().mapFd("forwarded"), &zero, &before), 0);
  unsigned forwarded = 0;
  for (uint16_t id = 0; id < 8; ++id)
    for (uint8_t tos : {0, 1, 2}) {
      Bytes packet = buildPacket({.tos = tos, .id = id});
      RunResult original = program.original(packet);
      EXPECT_EQ(program.active(packet), original) << "slot " << id << " tos " << int(tos);
      forwarded += 2 * (original.verdict == XDP_TX);
    }
  ASSERT_EQ(bpf_map_lookup_elem(program.opt().mapFd("forwarded"), &zero, &after), 0);
  EXPECT_EQ(after - before, forwarded) << "every forwarded packet counted, by both versions";
}

// Session tables swept by one bpf_for_each_map_elem callback that deletes
// through the map it is handed (tests/programs/for_each_sweep.bpf.c): that
// map is the map of the call, so the sweep writes the session tables alone
// and the LPM allow-list beside them stays read-only and specialized. The
// sweep still deletes in the live tables.
TEST(PreciseAnalysis, AMapWalkedByForEachLeavesTheProgramsOtherMapsReadOnly) {
  CorpusProgram program("for_each_sweep.bpf.c");
  ASSERT_TRUE(program.ok());
  const core::TableAccessInfo &analysis = program.opt().spec().analysis();
  EXPECT_TRUE(analysis.isReadOnly("allowed"));
  for (const char *sessions : {"sessions_tcp", "sessions_udp"})
    EXPECT_FALSE(analysis.isReadOnly(sessions)) << sessions;

  struct Prefix {
    uint32_t length;
    uint32_t addr;
  };
  program.set("allowed", Prefix{24, htonl(0x0a000000)}, uint32_t(1));
  program.set("allowed", Prefix{32, htonl(0x0a000063)}, uint32_t(2));
  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  EXPECT_NE(CorpusProgram::decision(report, "allowed", true), nullptr) << report.log.toText();

  // Sources 10.0.0.1..6 at clock 1, then one packet at clock 20: the sweep
  // it runs removes every session older than 8.
  for (uint32_t source = 1; source <= 6; ++source)
    for (uint8_t protocol : {IPPROTO_UDP, IPPROTO_TCP}) {
      Bytes packet = buildPacket({.protocol = protocol, .saddr = 0x0a000000 + source, .id = 1});
      EXPECT_EQ(program.active(packet), program.original(packet)) << "source " << source;
    }
  for (uint32_t source : {0x0a000063u, 0x0b000001u}) {
    Bytes packet = buildPacket({.saddr = source, .id = 1});
    EXPECT_EQ(program.active(packet), program.original(packet)) << std::hex << source;
  }
  EXPECT_EQ(program.original(buildPacket({.saddr = 0x0b000001, .id = 1})).verdict,
            uint32_t(XDP_DROP));
  Bytes late = buildPacket({.saddr = 0x0a000001, .id = 20});
  EXPECT_EQ(program.active(late).verdict, uint32_t(XDP_ABORTED)) << "the sweep removed > 4";
  unsigned held = 0;
  for (const char *sessions : {"sessions_tcp", "sessions_udp"}) {
    int fd = program.opt().mapFd(sessions);
    uint32_t key = 0, next = 0, *previous = nullptr;
    for (; bpf_map_get_next_key(fd, previous, &next) == 0; previous = &key, key = next)
      ++held;
  }
  EXPECT_EQ(held, 1u) << "only the late packet's own session is left";
}

// Keys built as Katran builds them (tests/programs/copied_key.bpf.c): the
// VIP key copied from the packet description on the stack, whose copy the
// key walk follows into that slot, and the control array's position, a
// constant set at the top of the path. Before, the copy made every VIP key
// byte "possibly unwritten", which kept the whole packet path as the
// original's; now both are specialized, in each inlined copy of the path.
TEST(PreciseAnalysis, KeysCopiedFromAnotherLocalAreProvenAndTheirRootSpecialized) {
  CorpusProgram program("copied_key.bpf.c");
  ASSERT_TRUE(program.ok());
  const core::TableAccessInfo &analysis = program.opt().spec().analysis();
  EXPECT_TRUE(analysis.framesKept.empty()) << analysis.framesKept.begin()->second;
  unsigned constantControlKeys = 0;
  for (const core::AccessSite &site : analysis.sites) {
    EXPECT_FALSE(site.key.unwritten) << "site #" << site.id << ": "
                                     << site.key.unwritten->describe();
    constantControlKeys += site.table == "ctl_array" && site.key.constantKey == Bytes(4, 0);
  }
  EXPECT_EQ(constantControlKeys, 2u) << "the IPv4 and the IPv6 copy";

  struct Vip {
    uint32_t addr[4];
    uint16_t port;
    uint8_t proto, pad;
  };
  struct Meta {
    uint32_t flags, number;
  };
  struct Control {
    uint8_t mac[6];
    uint16_t pad;
  };
  const uint32_t v6[4] = {htonl(0x20010db8), 0, 0, htonl(1)};
  program.set("vips", Vip{{htonl(0x0a000001)}, htons(80), IPPROTO_UDP, 0}, Meta{1, 1});
  program.set("vips", Vip{{v6[0], v6[1], v6[2], v6[3]}, htons(53), IPPROTO_UDP, 0}, Meta{0, 2});
  program.set("ctl_array", uint32_t(0), Control{{2, 0, 0, 0, 0, 7}, 0});
  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  EXPECT_NE(decisionOf(report, "ctl_array", "constant-key-lookup"), nullptr)
      << report.log.toText();
  EXPECT_NE(CorpusProgram::decision(report, "vips", true), nullptr) << report.log.toText();

  // Ethernet, IPv6 (next header `next`) from `source` to `destination`,
  // UDP to `port`, 8 bytes of payload.
  auto ipv6 = [](uint8_t next, const uint32_t *source, const uint32_t *destination,
                 uint16_t port) {
    Bytes packet(14 + 40 + 8 + 8, 0);
    packet[12] = 0x86, packet[13] = 0xdd;
    packet[14] = 0x60;
    packet[14 + 5] = 16; // payload length
    packet[14 + 6] = next;
    packet[14 + 7] = 64;
    std::memcpy(&packet[14 + 8], source, 16);
    std::memcpy(&packet[14 + 24], destination, 16);
    uint16_t sport = htons(1234), dport = htons(port), length = htons(16);
    std::memcpy(&packet[54], &sport, 2);
    std::memcpy(&packet[56], &dport, 2);
    std::memcpy(&packet[58], &length, 2);
    return packet;
  };
  const uint32_t other[4] = {htonl(0x20010db8), 0, 0, htonl(9)};
  std::vector<std::pair<std::string, Bytes>> packets = {
      {"IPv4 VIP", buildPacket({.daddr = 0x0a000001, .dport = 80})},
      {"IPv4 other port", buildPacket({.daddr = 0x0a000001, .dport = 81})},
      {"IPv4 other address", buildPacket({.daddr = 0x0a000002, .dport = 80})},
      {"IPv6 VIP", ipv6(IPPROTO_UDP, other, v6, 53)},
      {"IPv6 other", ipv6(IPPROTO_UDP, v6, other, 53)},
      {"ICMPv6 about the VIP", ipv6(IPPROTO_ICMPV6, v6, other, 53)},
  };
  for (const auto &[what, packet] : packets)
    EXPECT_EQ(program.active(packet), program.original(packet)) << what;
  RunResult forwarded = program.active(packets[0].second);
  EXPECT_EQ(forwarded.verdict, uint32_t(XDP_TX));
  ASSERT_GE(forwarded.output.size(), 6u);
  EXPECT_EQ(forwarded.output[5], 7) << "the router MAC from ctl_array";
}

// Redirect maps (tests/programs/devmap_ports.bpf.c): lookups in a devmap
// and a devmap_hash return read-only values, but the kernel removes an
// entry when its device goes, which no guard sees. So the specialized
// version answers only the keys a map does not hold without the lookup
// (key-set-filter) and folds the value a constant key finds
// (fold-read-only-fields), keeping the lookups: an entry removed behind
// the guard is seen by the very next packet.
TEST(PreciseAnalysis, DeviceMapsAnswerOnlyMissesAndFollowAnEntryTheKernelRemoves) {
  CorpusProgram program("devmap_ports.bpf.c");
  ASSERT_TRUE(program.ok());
  bpf_devmap_val loopback = {};
  loopback.ifindex = 1;
  program.set("neighbours", uint32_t(5), loopback);
  program.set("neighbours", uint32_t(9), loopback);
  program.set("uplinks", uint32_t(0), loopback);
  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  EXPECT_NE(decisionOf(report, "neighbours", "key-set-filter"), nullptr) << report.log.toText();
  EXPECT_NE(decisionOf(report, "uplinks", "fold-read-only-fields"), nullptr)
      << report.log.toText();
  for (const core::SiteDecision &d : report.log.decisions)
    EXPECT_TRUE(d.pass != "constant-key-lookup" && d.pass != "inline-small-table" || !d.applied)
        << "a devmap lookup answered as a hit: " << d.detail;

  auto compare = [&](const char *when) {
    for (uint32_t host : {5u, 9u, 7u, 200u}) {
      Bytes packet = buildPacket({.daddr = 0x0a000000 + host});
      EXPECT_EQ(program.active(packet), program.original(packet)) << when << ", host " << host;
    }
  };
  compare("as configured");
  EXPECT_EQ(program.active(buildPacket({.daddr = 0x0a000007})).verdict, uint32_t(XDP_TX));
  // What the kernel does when a device is unregistered: the entries go,
  // with no guard bump.
  uint32_t uplink = 0, neighbour = 5;
  ASSERT_EQ(bpf_map_delete_elem(program.opt().mapFd("uplinks"), &uplink), 0);
  ASSERT_EQ(bpf_map_delete_elem(program.opt().mapFd("neighbours"), &neighbour), 0);
  compare("after the kernel removed entries");
  EXPECT_EQ(program.active(buildPacket({.daddr = 0x0a000007})).verdict, uint32_t(XDP_PASS));
  EXPECT_EQ(program.active(buildPacket({.daddr = 0x0a000005})).verdict, uint32_t(XDP_PASS));
}

// A filter in the style of xdp-filter (tests/programs/rule_hits.bpf.c):
// rules in hash tables the program counts in but never inserts into or
// deletes from. A key no rule names misses without the lookup; a rule's key
// goes on to the real lookup, so its counter still counts in the live
// entry. A rule added through Morpheus is seen by the next packet; one
// added behind its back (bpftool) makes the next cycle rebuild.
TEST(PreciseAnalysis, RulesTheDataPlaneOnlyCountsInMissWithoutALookup) {
  CorpusProgram program("rule_hits.bpf.c");
  ASSERT_TRUE(program.ok());
  program.set("blocked_sources", htonl(0x0a000064), Rule{XDP_DROP, 0, 0});
  program.set("denied_ports", htons(22), Rule{XDP_TX, 0, 0});
  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  for (const char *table : {"blocked_sources", "denied_ports"})
    EXPECT_NE(decisionOf(report, table, "key-set-filter"), nullptr)
        << table << "\n" << report.log.toText();

  std::vector<PacketSpec> specs = {{.saddr = 0x0a000064},
                                   {.saddr = 0x0a000065, .dport = 22},
                                   {.saddr = 0x0a000065, .dport = 80},
                                   {.protocol = IPPROTO_TCP, .saddr = 0x0a000065, .dport = 22},
                                   {.protocol = IPPROTO_ICMP, .saddr = 0x0a000065}};
  for (const PacketSpec &spec : specs) {
    Bytes packet = buildPacket(spec);
    EXPECT_EQ(program.active(packet), program.original(packet))
        << "saddr " << spec.saddr << " dport " << spec.dport;
  }
  auto portHits = [&](uint16_t port) {
    Rule rule{};
    uint16_t key = htons(port);
    EXPECT_EQ(bpf_map_lookup_elem(program.opt().mapFd("denied_ports"), &key, &rule), 0);
    return rule.hits;
  };
  uint64_t before = portHits(22);
  EXPECT_EQ(program.active(buildPacket(specs[1])).verdict, uint32_t(XDP_TX));
  EXPECT_EQ(portHits(22), before + 1) << "the rule's counter counts in the live entry";
  EXPECT_EQ(program.active(buildPacket(specs[2])).verdict, uint32_t(XDP_PASS));

  program.set("denied_ports", htons(80), Rule{XDP_DROP, 0, 0});
  EXPECT_EQ(program.active(buildPacket(specs[2])).verdict, uint32_t(XDP_DROP))
      << "a rule added through Morpheus, the next packet";
  ASSERT_TRUE(program.cycle().installed());

  // Behind Morpheus's back: no guard bump; the next cycle sees the key set
  // changed although no byte the data plane leaves alone did.
  uint16_t dns = htons(53);
  Rule drop{XDP_DROP, 0, 0};
  ASSERT_EQ(bpf_map_update_elem(program.opt().mapFd("denied_ports"), &dns, &drop, BPF_ANY), 0);
  report = program.cycle();
  EXPECT_TRUE(report.installed()) << report.describe();
  Bytes toDns = buildPacket({.saddr = 0x0a000065, .dport = 53});
  EXPECT_EQ(program.active(toDns).verdict, uint32_t(XDP_DROP));
  EXPECT_EQ(program.active(toDns), program.original(toDns));
}

// What `run` tells the operator of a hash table whose values the program
// writes whole (a counter per key) but whose keys only the control plane
// adds: the values are live, which keys it holds may be specialized
// (key-set-filter) and a bpftool insert is polled, not live at once.
TEST(PreciseAnalysis, ATableWrittenOnlyInItsValuesIsSaidToHaveItsKeysSpecialized) {
  std::string source = "/tmp/morpheus-counted-" + std::to_string(getpid()) + ".bpf.c";
  std::ofstream(source) << "#include \"" << corpusPath("common.h") << "\"\n"
                        << "struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 64);\n"
                           "  __type(key, __u32); __type(value, __u64); } counted SEC(\".maps\");\n"
                           "SEC(\"xdp\") int count(struct xdp_md *ctx) {\n"
                           "  struct iphdr *ip = ipv4_header(ctx); __u32 saddr; __u64 *n;\n"
                           "  if (!ip) return XDP_PASS;\n"
                           "  saddr = ip->saddr; n = bpf_map_lookup_elem(&counted, &saddr);\n"
                           "  if (n) { *n += 1; return XDP_DROP; }\n"
                           "  return XDP_PASS; }\n"
                           "char LICENSE[] SEC(\"license\") = \"GPL\";\n";
  auto spec = bpf::ProgramSpec::load(source, {});
  unlink(source.c_str());
  ASSERT_TRUE(bool(spec)) << llvm::toString(spec.takeError());
  std::vector<std::string> lines =
      runtime::updateGuarantees(**spec, std::chrono::seconds(1), false);
  auto counted = llvm::find_if(
      lines, [](const std::string &line) { return line.starts_with("map 'counted'"); });
  ASSERT_NE(counted, lines.end());
  EXPECT_NE(counted->find("its values written by the program, never specialized"),
            std::string::npos)
      << *counted;
  EXPECT_NE(counted->find("which keys it holds: may be specialized"), std::string::npos)
      << *counted;
}

TEST(PreciseAnalysis, InnerMapOfTheLoaderIsDeclinedWithItsReason) {
  CorpusProgram program("inner_config.bpf.c");
  ASSERT_TRUE(program.ok());
  // A tenant table the loader created (not declared by the program): the
  // loader updates it through its own fd, never through Morpheus.
  int tenant = bpf_map_create(BPF_MAP_TYPE_ARRAY, "tenant1", sizeof(uint32_t), sizeof(Config), 1,
                              nullptr);
  ASSERT_GE(tenant, 0);
  uint32_t zero = 0;
  Config override{XDP_DROP, 64};
  ASSERT_EQ(bpf_map_update_elem(tenant, &zero, &override, BPF_ANY), 0);
  program.set("tenants", uint32_t(1), int32_t(tenant));
  program.set("primary", uint32_t(0), Config{XDP_TX, 7});
  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  const core::SiteDecision *declined = nullptr;
  for (const core::SiteDecision &d : report.log.decisions)
    if (!d.applied && d.detail.find("tenants[01 00 00 00] holds a map the program does not declare") !=
                          std::string::npos)
      declined = &d;
  EXPECT_NE(declined, nullptr) << report.log.toText();
  // The loader's change, behind Morpheus's back, still reaches the data
  // plane at once: that lookup was left alone.
  override.action = XDP_PASS;
  ASSERT_EQ(bpf_map_update_elem(tenant, &zero, &override, BPF_ANY), 0);
  for (uint8_t ttl : {64, 63}) {
    Bytes packet = buildPacket({.ttl = ttl, .tos = 3});
    EXPECT_EQ(program.active(packet), program.original(packet)) << "ttl " << int(ttl);
  }
  EXPECT_EQ(program.active(buildPacket({.ttl = 64, .tos = 3})).verdict, uint32_t(XDP_PASS));
  close(tenant);
}

// The outer map swapped back and forth while packets run through the
// version specialized for `primary`: every packet that starts after an
// update has returned sees that update's table (the guard sends it to the
// original), never the inlined one.
TEST(PreciseAnalysis, OuterUpdatesRacingTrafficAreSeenByTheNextPacket) {
  CorpusProgram program("inner_config.bpf.c");
  ASSERT_TRUE(program.ok());
  program.set("primary", uint32_t(0), Config{XDP_DROP, 7});
  program.set("secondary", uint32_t(0), Config{XDP_TX, 7});
  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  ASSERT_NE(decisionOf(report, "primary", "constant-key-lookup"), nullptr) << report.log.toText();
  int specialized = dup(program.opt().activeFd());
  ASSERT_GE(specialized, 0);
  int tables[2] = {program.opt().mapFd("primary"), program.opt().mapFd("secondary")};
  uint32_t actions[2] = {XDP_DROP, XDP_TX};

  // generation g: slot 0 holds tables[g % 2]; begun/done bracket each update.
  std::atomic<unsigned> begun{0}, done{0};
  std::atomic<bool> stop{false};
  std::atomic<unsigned> packets{0}, stale{0};
  std::thread traffic([&] {
    Bytes packet = buildPacket({.tos = 3});
    while (!stop) {
      unsigned settled = done.load();
      RunResult result = runOnce(specialized, packet);
      unsigned latest = begun.load();
      bool seen = false;
      for (unsigned g = settled; g <= latest; ++g)
        seen |= result.verdict == actions[g % 2];
      stale += !seen;
      ++packets;
    }
  });
  auto updater = bpf::MapUpdater::forMap(program.opt().mapFd("configs"), "configs",
                                         &program.opt().guard());
  EXPECT_THAT_EXPECTED(updater, llvm::Succeeded());
  for (unsigned g = 1; updater && g <= 200; ++g) {
    begun = g;
    int32_t fd = tables[g % 2];
    llvm::Error err = updater->update(bytesOf(uint32_t(0)), bytesOf(fd));
    if (err) {
      ADD_FAILURE() << llvm::toString(std::move(err));
      break;
    }
    done = g;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  stop = true;
  traffic.join();
  close(specialized);
  EXPECT_GT(packets.load(), 200u);
  EXPECT_EQ(stale.load(), 0u) << "of " << packets.load() << " packets";
}

struct Setting {
  uint32_t action;
  uint32_t port;
  uint64_t packets;
};

// The packets each CPU counted in `settings`.
std::vector<uint64_t> countsPerCpu(CorpusProgram &program) {
  int cpus = libbpf_num_possible_cpus();
  std::vector<Setting> values(cpus);
  uint32_t zero = 0;
  EXPECT_EQ(bpf_map_lookup_elem(program.opt().mapFd("settings"), &zero, values.data()), 0);
  std::vector<uint64_t> counts;
  for (const Setting &value : values)
    counts.push_back(value.packets);
  return counts;
}

TEST(PreciseAnalysis, PerCpuConfigurationBesideAPerCpuCounterIsFolded) {
  if (libbpf_num_possible_cpus() < 2)
    GTEST_SKIP() << "one possible CPU: per-CPU values cannot differ";
  CorpusProgram program("percpu_config.bpf.c");
  ASSERT_TRUE(program.ok());
  program.set("settings", uint32_t(0), Setting{XDP_DROP, 7, 0});
  // Traffic on one CPU: the values of the CPUs now differ, in the counter.
  program.original(buildPacket({.tos = 3}));
  std::vector<uint64_t> before = countsPerCpu(program);
  ASSERT_EQ(std::count(before.begin(), before.end(), 0u), long(before.size() - 1));
  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  const core::SiteDecision *folded = decisionOf(report, "settings", "fold-read-only-fields");
  ASSERT_NE(folded, nullptr) << report.log.toText();
  EXPECT_EQ(folded->detail, "2 loads of read-only bytes folded; the lookup stays for the writes "
                            "(1 load of written bytes kept)");
  for (uint8_t tos : {7, 3}) {
    Bytes packet = buildPacket({.tos = tos});
    EXPECT_EQ(program.active(packet), program.original(packet)) << "tos " << int(tos);
  }
  // Five packets, each counted on the CPU that ran it, by both versions.
  std::vector<uint64_t> after = countsPerCpu(program);
  uint64_t total = 0;
  for (size_t cpu = 0; cpu < after.size(); ++cpu)
    total += after[cpu] - before[cpu];
  EXPECT_EQ(total, 4u);
  // A change through Morpheus (to every CPU) is seen on the next packet.
  program.set("settings", uint32_t(0), Setting{XDP_TX, 7, 0});
  EXPECT_EQ(program.active(buildPacket({.tos = 3})).verdict, uint32_t(XDP_TX));
}

// A writable global's section map mmapped, as a skeleton-based loader
// writes its configuration: Morpheus sees none of these writes.
class MmappedSection {
public:
  MmappedSection(CorpusProgram &program, const std::string &global) {
    for (const core::GlobalSlice &slice : program.opt().spec().globals())
      if (slice.global == global) {
        offset = slice.offset;
        int fd = program.opt().mapFd(slice.sectionTable);
        EXPECT_GE(fd, 0) << slice.sectionTable;
        size = size_t(sysconf(_SC_PAGESIZE));
        void *mapped = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        EXPECT_NE(mapped, MAP_FAILED) << slice.sectionTable << ": " << std::strerror(errno);
        if (mapped != MAP_FAILED)
          memory = static_cast<uint8_t *>(mapped);
      }
    EXPECT_NE(memory, nullptr) << "global " << global << " not laid out";
  }
  ~MmappedSection() {
    if (memory)
      munmap(memory, size);
  }
  bool ok() const { return memory != nullptr; }
  template <typename T> void write(const T &value, size_t at = 0) {
    std::memcpy(memory + offset + at, &value, sizeof(value));
  }

private:
  uint8_t *memory = nullptr;
  size_t size = 0;
  uint64_t offset = 0;
};

const core::GlobalDecision *globalDecision(const core::CycleReport &report,
                                           const std::string &global) {
  for (const core::GlobalDecision &d : report.log.globals)
    if (d.global == global)
      return &d;
  return nullptr;
}

// .data/.bss as one-slot tables: the bytes the program never writes are
// folded, the counters beside them are not, and a write through mmap (no
// guard bump) is followed by the very next packet through the check at the
// entry, then compiled in by the next cycle.
TEST(PreciseAnalysis, GlobalsWrittenThroughMmapAreFollowedByTheNextPacket) {
  CorpusProgram program("globals_config.bpf.c");
  ASSERT_TRUE(program.ok());
  MmappedSection blocked(program, "blocked_ttl"), settings(program, "settings");
  ASSERT_TRUE(blocked.ok() && settings.ok());
  blocked.write(uint32_t(9));
  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  for (const char *folded : {"blocked_ttl", "settings", "feature"}) {
    const core::GlobalDecision *decision = globalDecision(report, folded);
    ASSERT_NE(decision, nullptr) << folded << "\n" << report.log.toText();
    EXPECT_TRUE(decision->applied) << folded << ": " << decision->detail;
  }
  const core::GlobalDecision *packets = globalDecision(report, "packets");
  ASSERT_NE(packets, nullptr);
  EXPECT_FALSE(packets->applied);
  ASSERT_FALSE(report.log.globalChecks.empty());

  auto same = [&](PacketSpec spec, uint32_t expected) {
    Bytes packet = buildPacket(spec);
    RunResult active = program.active(packet);
    EXPECT_EQ(active, program.original(packet)) << "ttl " << int(spec.ttl);
    EXPECT_EQ(active.verdict, expected) << "ttl " << int(spec.ttl) << " tos " << int(spec.tos);
  };
  same({.ttl = 9}, XDP_DROP);
  same({.ttl = 64}, XDP_PASS);
  same({.ttl = 64, .tos = 5}, XDP_TX);

  // Behind Morpheus's back: the next packet already sees each write.
  blocked.write(uint32_t(64));
  same({.ttl = 64}, XDP_DROP);
  same({.ttl = 9}, XDP_PASS);
  settings.write(uint32_t(2)); // mode
  same({.ttl = 10}, XDP_DROP);
  report = program.cycle();
  EXPECT_EQ(report.outcome, core::CycleOutcome::Installed) << report.describe();
  same({.ttl = 64}, XDP_DROP);
  same({.ttl = 10}, XDP_DROP);
  same({.ttl = 10, .tos = 5}, XDP_TX);

  // Counters moving (packets, feature.hits) are not what was folded: no
  // new version.
  for (int i = 0; i < 20; ++i)
    same({.ttl = 10, .tos = 5}, XDP_TX);
  report = program.cycle();
  EXPECT_EQ(report.outcome, core::CycleOutcome::Unchanged) << report.describe();
}

// A configuration global copied whole into a local (`struct policy p =
// policy;`, a memcpy clang keeps because an index into `p` varies): the
// copied bytes are folded and checked as loads of them are, the copy of a
// global the program counts in is kept, and a write through mmap is
// followed by the very next packet, then compiled in by the next cycle.
TEST(PreciseAnalysis, GlobalsCopiedWholeAreFoldedAndFollowTheNextPacket) {
  CorpusProgram program("globals_copy.bpf.c");
  ASSERT_TRUE(program.ok());
  MmappedSection policy(program, "policy");
  ASSERT_TRUE(policy.ok());
  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  const core::GlobalDecision *folded = globalDecision(report, "policy");
  ASSERT_NE(folded, nullptr) << report.log.toText();
  EXPECT_TRUE(folded->applied) << folded->detail;
  EXPECT_NE(folded->detail.find("1 copy folded"), std::string::npos) << folded->detail;
  const core::GlobalDecision *stats = globalDecision(report, "stats");
  ASSERT_NE(stats, nullptr) << report.log.toText();
  EXPECT_FALSE(stats->applied);
  EXPECT_NE(stats->detail.find("written by the program"), std::string::npos) << stats->detail;
  uint64_t checkedBytes = 0;
  for (const core::GlobalCheck &check : report.log.globalChecks)
    if (check.global == "policy")
      checkedBytes += check.bytes.size();
  EXPECT_EQ(checkedBytes, 24u); // the whole copy

  auto same = [&](PacketSpec spec, uint32_t expected) {
    Bytes packet = buildPacket(spec);
    RunResult active = program.active(packet);
    EXPECT_EQ(active, program.original(packet)) << "ttl " << int(spec.ttl);
    EXPECT_EQ(active.verdict, expected) << "ttl " << int(spec.ttl) << " tos " << int(spec.tos);
  };
  same({.ttl = 9}, XDP_DROP);
  same({.ttl = 64, .tos = 0}, XDP_PASS);
  same({.ttl = 64, .tos = 1}, XDP_DROP);
  same({.ttl = 64, .tos = 2}, XDP_TX);

  // Behind Morpheus's back, each field the copy spans: the next packet
  // already sees each write.
  policy.write(uint8_t(64), 4); // blocked_ttl
  same({.ttl = 64}, XDP_DROP);
  same({.ttl = 9}, XDP_PASS);
  policy.write(uint8_t(XDP_TX), 8); // verdict_by_tos[0]
  same({.ttl = 10, .tos = 0}, XDP_TX);
  report = program.cycle();
  EXPECT_EQ(report.outcome, core::CycleOutcome::Installed) << report.describe();
  same({.ttl = 64}, XDP_DROP);
  same({.ttl = 10, .tos = 0}, XDP_TX);
  policy.write(uint32_t(0)); // enforce
  same({.ttl = 64}, XDP_PASS);
  same({.ttl = 10, .tos = 2}, XDP_PASS);
  report = program.cycle();
  EXPECT_EQ(report.outcome, core::CycleOutcome::Installed) << report.describe();
  same({.ttl = 64, .tos = 1}, XDP_PASS);
  same({.ttl = 10, .tos = 2}, XDP_PASS);
}

// The decision of `pass` at sites of `table`, applied or not, or nullptr.
const core::SiteDecision *passDecision(const core::CycleReport &report,
                                       const std::string &table, const std::string &pass) {
  for (const core::SiteDecision &d : report.log.decisions)
    if (d.table == table && d.pass == pass)
      return &d;
  return nullptr;
}

struct VipKey {
  uint32_t daddr;
  uint16_t dport;
  uint8_t proto, pad;
};
struct VipMeta {
  uint32_t flags, vipNum;
  uint64_t packets;
};
struct LbBackend {
  uint32_t daddr, weight;
};

// The composite L4 load balancer (tests/programs/composite_l4lb.bpf.c):
// which specializations apply, which are declined and why, and the
// specialized version forwarding every kind of packet as the original does.
TEST(CompositePrograms, LoadBalancerSpecializesItsConfigurationAndForwardsAsTheOriginal) {
  CorpusProgram program("composite_l4lb.bpf.c");
  ASSERT_TRUE(program.ok());
  const uint32_t vip = htonl(0x0a000001);
  program.set("vips", VipKey{vip, htons(80), 17, 0}, VipMeta{0, 1, 0});
  program.set("vips", VipKey{vip, htons(443), 17, 0}, VipMeta{2 /* VIP_QUIC */, 1, 0});
  for (uint32_t position = 16; position < 32; ++position)
    program.set("rings", position, uint32_t(position % 2 ? 5 : 6));
  program.set("backends", uint32_t(5), LbBackend{htonl(0x0a010005), 1});
  program.set("backends", uint32_t(6), LbBackend{htonl(0x0a010006), 1});
  program.set("server_ids", uint32_t(0), uint32_t(6));
  MmappedSection quic(program, "quic_enabled");
  ASSERT_TRUE(quic.ok());
  quic.write(uint32_t(1));

  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  // The 1,024-slot backend array holding 2 backends, the ring and the QUIC
  // server ids are small tables by content. The ring's 16 slots, over the
  // verifier budget, would be a chain yielding an index, which folds nothing
  // and costs more than the array lookup the verifier inlines: declined.
  for (const char *table : {"backends", "server_ids"}) {
    const core::SiteDecision *inlined = CorpusProgram::decision(report, table, true);
    ASSERT_NE(inlined, nullptr) << table << "\n" << report.log.toText();
    EXPECT_EQ(inlined->pass, "inline-small-table") << table;
  }
  const core::SiteDecision *rings = CorpusProgram::decision(report, "rings", false);
  ASSERT_NE(rings, nullptr) << report.log.toText();
  EXPECT_EQ(rings->pass, "inline-small-table");
  EXPECT_NE(rings->detail.find("folds no value and is not faster than the lookup"),
            std::string::npos)
      << rings->detail;
  // The VIP table holds configuration beside a counter, looked up by the
  // packet's address: the lookup stays (the counter counts in the live
  // entry), and an address no VIP has misses without it.
  const core::SiteDecision *vips = CorpusProgram::decision(report, "vips", true);
  ASSERT_NE(vips, nullptr) << report.log.toText();
  EXPECT_EQ(vips->pass, "key-set-filter") << vips->detail;
  const core::SiteDecision *stats = CorpusProgram::decision(report, "lb_stats", false);
  ASSERT_NE(stats, nullptr);
  EXPECT_NE(stats->detail.find("table is written by the data plane"), std::string::npos)
      << stats->detail;
  EXPECT_EQ(CorpusProgram::decision(report, "lb_stats", true), nullptr);
  // The loader's globals: the switches fold, the counter does not.
  for (const char *folded : {"quic_enabled", "conn_table_slot"}) {
    const core::GlobalDecision *decision = globalDecision(report, folded);
    ASSERT_NE(decision, nullptr) << folded;
    EXPECT_TRUE(decision->applied) << folded << ": " << decision->detail;
  }
  ASSERT_NE(globalDecision(report, "lb_packets"), nullptr);
  EXPECT_FALSE(globalDecision(report, "lb_packets")->applied);

  struct Case {
    PacketSpec spec;
    uint32_t verdict;
  };
  for (const Case &c : {Case{{.dport = 80}, XDP_TX}, Case{{.sport = 999, .dport = 80}, XDP_TX},
                        Case{{.dport = 81}, XDP_PASS}, Case{{.dport = 443}, XDP_TX},
                        Case{{.protocol = 6, .dport = 80}, XDP_PASS},
                        Case{{.daddr = 0x0a000002, .dport = 80}, XDP_PASS}}) {
    Bytes packet = buildPacket(c.spec);
    RunResult active = program.active(packet);
    EXPECT_EQ(active, program.original(packet)) << "dport " << c.spec.dport;
    EXPECT_EQ(active.verdict, c.verdict) << "dport " << c.spec.dport;
  }
  // QUIC routing switched off through mmap: the next packet follows.
  quic.write(uint32_t(0));
  Bytes packet = buildPacket({.sport = 4000, .dport = 443});
  EXPECT_EQ(program.active(packet), program.original(packet));
}

struct AclRule {
  uint8_t proto, action;
  uint16_t portLo, portHi, pad;
  uint64_t hits;
};
struct LpmV4 {
  uint32_t prefixlen, addr;
};

// The multi-stage filter (tests/programs/composite_filter.bpf.c): every
// ACL rule's configuration folds beside its counter (written through a phi
// of the unrolled lookups), the blocklist becomes code, the rate limit's
// global folds; the program run (the object's first, filter_acl, which
// tail-calls the original's later stages) answers as the original.
TEST(CompositePrograms, MultiStageFilterFoldsEveryStageAndAnswersAsTheOriginal) {
  CorpusProgram program("composite_filter.bpf.c");
  ASSERT_TRUE(program.ok());
  program.set("acl", uint32_t(0), AclRule{17, XDP_DROP + 1, 53, 53, 0, 0});
  program.set("acl", uint32_t(1), AclRule{6, XDP_PASS + 1, 22, 22, 0, 0});
  program.set("blocklist", LpmV4{16, htonl(0x0a090000)}, uint32_t(1));
  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  unsigned folded = 0;
  for (const core::SiteDecision &d : report.log.decisions)
    folded += d.table == "acl" && d.applied && d.pass == "fold-read-only-fields";
  EXPECT_EQ(folded, 64u) << report.log.toText(); // one constant-key site per rule
  const core::SiteDecision *blocklist = passDecision(report, "blocklist", "lpm-as-code");
  ASSERT_NE(blocklist, nullptr) << report.log.toText();
  EXPECT_TRUE(blocklist->applied) << blocklist->detail;
  EXPECT_EQ(CorpusProgram::decision(report, "rate_window", true), nullptr);
  for (const char *global : {"rate_limit", "blocklist_enabled"}) {
    const core::GlobalDecision *decision = globalDecision(report, global);
    ASSERT_NE(decision, nullptr) << global;
    EXPECT_TRUE(decision->applied) << global << ": " << decision->detail;
  }
  for (PacketSpec spec : {PacketSpec{.dport = 53}, PacketSpec{.protocol = 6, .dport = 22},
                          PacketSpec{.dport = 54}, PacketSpec{.saddr = 0x0a090101, .dport = 54},
                          PacketSpec{.etherType = 0x86dd}}) {
    Bytes packet = buildPacket(spec);
    EXPECT_EQ(program.active(packet), program.original(packet)) << "dport " << spec.dport;
  }

  // The specialized entry tail-calls through a stage array of its own that
  // holds the specialized stages (never through the live `stages`, which
  // keeps the original's): the packets above ran them. Tail-called programs
  // have no run counts of their own, so they are told apart by id and by
  // the guard they check (the original's stages know no guard).
  uint32_t guard = mapIdOf(program.opt().mapFd(bpf::GuardMapName));
  int liveStages = program.opt().mapFd("stages");
  std::map<std::string, HeldProgram> live = programsHeld(liveStages, guard), used;
  uint32_t ownStages = mapIdByName(program.opt().activeFd(), "stages");
  ASSERT_NE(ownStages, 0u);
  EXPECT_NE(ownStages, mapIdOf(liveStages)) << "the version has a stage array of its own";
  used = programsHeld(Fd(bpf_map_get_fd_by_id(ownStages)).fd, guard);
  ASSERT_EQ(live.size(), 3u);
  ASSERT_EQ(used.size(), live.size()) << "every stage the original's array holds";
  for (const auto &[name, stage] : used) {
    ASSERT_TRUE(live.count(name)) << name;
    EXPECT_NE(stage.id, live[name].id) << name << ": the specialized stage, not the original";
    EXPECT_TRUE(stage.checksTheGuard) << name;
    EXPECT_FALSE(live[name].checksTheGuard) << name;
  }
}

// The zone firewall (tests/programs/composite_zones.bpf.c), the corpus's
// 100K-instruction program: 12 tail-called chains of 512 unrolled rule
// slots. It loads under Morpheus, every chain's rule configuration folds
// beside its hit counter, and the specialized entry (with its own chain
// array of specialized chains) answers as the original for each packet
// kind in configured and unconfigured zones. Slow by nature (about a
// minute of compiling and verifying on an idle machine): one cycle only.
TEST(CompositePrograms, HundredThousandInstructionFirewallSpecializesAndAnswersAsTheOriginal) {
  runtime::OptimizerOptions options = CorpusProgram::noShadow();
  options.program = "zones_entry"; // clang emits the chains first
  CorpusProgram program("composite_zones.bpf.c", options);
  ASSERT_TRUE(program.ok());

  // The kernel's own count: the entry and every chain the live array holds.
  auto xlated = [](int fd) {
    bpf_prog_info info = {};
    uint32_t length = sizeof(info);
    EXPECT_EQ(bpf_obj_get_info_by_fd(fd, &info, &length), 0);
    return uint64_t(info.xlated_prog_len / 8);
  };
  uint64_t instructions = xlated(program.opt().originalFd());
  int liveChains = program.opt().mapFd("chains");
  for (uint32_t slot = 0; slot < 12; ++slot) {
    uint32_t id = 0;
    ASSERT_EQ(bpf_map_lookup_elem(liveChains, &slot, &id), 0) << "chain " << slot;
    Fd chain(bpf_prog_get_fd_by_id(id));
    instructions += xlated(chain.fd);
  }
  EXPECT_GE(instructions, 100000u);

  const uint32_t zones[] = {0, 5, 11};
  for (uint32_t zone : zones) {
    program.set("zone_of", LpmV4{24, htonl(0x0a010000 | zone << 8)}, zone);
    std::string acl = "acl_" + std::to_string(zone);
    program.set(acl, uint32_t(0), AclRule{17, XDP_DROP + 1, 53, 53, 0, 0});
    program.set(acl, uint32_t(1), AclRule{6, XDP_PASS + 1, 22, 22, 0, 0});
    program.set(acl, uint32_t(7), AclRule{6, XDP_TX + 1, 8000, 8999, 0, 0});
  }
  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  std::map<std::string, unsigned> folded;
  for (const core::SiteDecision &d : report.log.decisions)
    folded[d.table] += d.applied && d.pass == "fold-read-only-fields";
  for (unsigned zone = 0; zone < 12; ++zone)
    EXPECT_EQ(folded["acl_" + std::to_string(zone)], 512u) << "zone " << zone;

  struct Case {
    PacketSpec spec;
    uint32_t verdict;
  };
  for (uint32_t zone : zones)
    for (const Case &c :
         {Case{{.daddr = 0x0a010009 | zone << 8, .dport = 53}, XDP_DROP},
          Case{{.protocol = 6, .daddr = 0x0a010009 | zone << 8, .dport = 22}, XDP_PASS},
          Case{{.protocol = 6, .daddr = 0x0a010009 | zone << 8, .dport = 8080}, XDP_TX},
          Case{{.daddr = 0x0a010009 | zone << 8, .dport = 9999}, XDP_PASS}}) {
      Bytes packet = buildPacket(c.spec);
      RunResult active = program.active(packet);
      EXPECT_EQ(active, program.original(packet)) << "zone " << zone << " dport " << c.spec.dport;
      EXPECT_EQ(active.verdict, c.verdict) << "zone " << zone << " dport " << c.spec.dport;
    }
  // A zone without rules and an address in no zone.
  program.set("zone_of", LpmV4{24, htonl(0x0a010300)}, uint32_t(3));
  for (uint32_t daddr : {0x0a010309u, 0x0a020009u}) {
    Bytes packet = buildPacket({.daddr = daddr, .dport = 53});
    RunResult active = program.active(packet);
    EXPECT_EQ(active, program.original(packet)) << std::hex << daddr;
    EXPECT_EQ(active.verdict, uint32_t(XDP_PASS)) << std::hex << daddr;
  }
}


// many_programs.bpf.c's rule: struct rule, 8 bytes.
struct StageRule {
  uint8_t proto, action;
  uint16_t portLo, portHi, pad;
};
static_assert(sizeof(StageRule) == 8);

// Packets many_programs.bpf.c sends to its program `program`: the
// destination address's last byte modulo the object's program count.
struct StageCase {
  PacketSpec spec;
  uint32_t verdict;
};
std::vector<StageCase> stageCases(uint32_t program) {
  uint32_t daddr = 0x0a000000 | program;
  return {{{.daddr = daddr, .dport = 53}, XDP_DROP},
          {{.protocol = 6, .daddr = daddr, .dport = 22}, XDP_PASS},
          {{.protocol = 6, .daddr = daddr, .dport = 8080}, XDP_TX},
          {{.daddr = daddr, .dport = 9999}, XDP_PASS}};
}
const StageRule DropDns{17, XDP_DROP + 1, 53, 53, 0}, PassSsh{6, XDP_PASS + 1, 22, 22, 0},
    SendBackWeb{6, XDP_TX + 1, 8000, 8999, 0}, DropWeb{6, XDP_DROP + 1, 8000, 8999, 0};

// An object of 100 programs (tests/programs/many_programs.bpf.c: an entry
// tail-calling 99 stages, each scanning its own ACL), more than 64: it
// loads under Morpheus, every program joins the fallback array (a stage at
// a slot past 64 too), every program's ACL is specialized, and the version
// answers as the original on packets reaching that stage; after a guarded
// change of its ACL the version falls back (the entry, which makes tail
// calls, inside the program; a stage, which makes none, by a tail call to
// its original after the entry's) and answers with the new rule.
TEST(CompositePrograms, AHundredProgramsLoadSpecializeAndFallBackPastSlot64) {
  runtime::OptimizerOptions options = CorpusProgram::noShadow();
  options.program = "many_entry"; // clang emits the stages first
  options.frontend.cflags = {"-DPROGRAMS=100"};
  CorpusProgram program("many_programs.bpf.c", options);
  ASSERT_TRUE(program.ok());
  const std::vector<std::string> &programs = program.opt().spec().programs();
  ASSERT_EQ(programs.size(), 100u);
  auto at = std::find(programs.begin(), programs.end(), "stage_99");
  ASSERT_NE(at, programs.end());
  uint32_t slot = uint32_t(at - programs.begin());
  ASSERT_GE(slot, 64u) << "the stage under test sits past the old limit";

  // The live fallback array holds the original stage at its slot (the
  // live `stages` array holds it too).
  uint32_t fallbackId = 0, liveId = 0, liveSlot = 99;
  ASSERT_EQ(bpf_map_lookup_elem(program.opt().mapFd(bpf::FallbackMapName), &slot, &fallbackId), 0);
  ASSERT_EQ(bpf_map_lookup_elem(program.opt().mapFd("stages"), &liveSlot, &liveId), 0);
  EXPECT_EQ(fallbackId, liveId);

  for (uint32_t stage : {0u, 7u, 99u}) {
    std::string rules = "rules_" + std::to_string(stage);
    program.set(rules, uint32_t(0), DropDns);
    program.set(rules, uint32_t(1), PassSsh);
    program.set(rules, uint32_t(2), SendBackWeb);
  }
  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  std::set<std::string> specialized;
  for (const core::SiteDecision &d : report.log.decisions)
    if (d.applied && d.table.starts_with("rules_"))
      specialized.insert(d.table);
  EXPECT_EQ(specialized.size(), 100u) << "every program's ACL";
  // The entry tail-calls, so it keeps its generic copy; a stage makes no
  // tail call and is reached by the entry's one: it falls back by a second.
  std::map<std::string, core::GuardDecision> guards;
  for (const core::GuardDecision &guard : report.log.guards)
    guards[guard.function] = guard;
  ASSERT_TRUE(guards.count("many_entry") && guards.count("stage_99"));
  EXPECT_EQ(guards["many_entry"].fallback, core::Fallback::InProgram)
      << guards["many_entry"].detail;
  EXPECT_EQ(guards["stage_99"].fallback, core::Fallback::TailCall) << guards["stage_99"].detail;

  // The counter the stage writes still counts: per program and verdict.
  int counts = program.opt().mapFd("counts");
  auto counted = [&](uint32_t key) {
    std::vector<uint64_t> perCpu(libbpf_num_possible_cpus());
    EXPECT_EQ(bpf_map_lookup_elem(counts, &key, perCpu.data()), 0);
    uint64_t sum = 0;
    for (uint64_t value : perCpu)
      sum += value;
    return sum;
  };
  for (uint32_t stage : {0u, 7u, 99u})
    for (const StageCase &c : stageCases(stage)) {
      Bytes packet = buildPacket(c.spec);
      uint32_t key = stage * 8 + c.verdict;
      uint64_t before = counted(key);
      RunResult active = program.active(packet);
      EXPECT_EQ(counted(key), before + 1) << "stage " << stage << " dport " << c.spec.dport;
      EXPECT_EQ(active, program.original(packet)) << "stage " << stage << " dport " << c.spec.dport;
      EXPECT_EQ(active.verdict, c.verdict) << "stage " << stage << " dport " << c.spec.dport;
    }

  // A change of stage 99's ACL behind the guard, no cycle since: the stale
  // version falls back (stage 99 by a tail call to its original, the
  // entry's being the first) and the packet gets the new rule (the old code
  // would send it back).
  program.set("rules_99", uint32_t(2), DropWeb);
  for (uint32_t daddr : {0x0a000063u, 0x0a0000c7u}) { // .99 and .199 reach stage 99
    Bytes packet = buildPacket({.protocol = 6, .daddr = daddr, .dport = 8080});
    RunResult active = program.active(packet);
    EXPECT_EQ(active, program.original(packet)) << std::hex << daddr;
    EXPECT_EQ(active.verdict, uint32_t(XDP_DROP)) << std::hex << daddr;
  }
}

// Reused programs: after a guarded change of one stage's ACL, the next
// version builds the entry (it tail-calls) and that stage only, and takes
// the other stages from the running version as loaded, stamped for the new
// guard version. Shadow validation is on: it validates what was built.
// That a reused stage runs its specialized code (not its fallback) shows
// in a write behind Morpheus's back, which specialized code does not see;
// that it is still guarded shows in a guarded change of its ACL, after
// which it answers with the new rule before any cycle.
TEST(CompositePrograms, AVersionReusesTheStagesWhoseTablesDidNotChange) {
  runtime::OptimizerOptions options = CorpusProgram::noShadow();
  options.shadowPackets = 64;
  options.program = "many_entry";
  options.frontend.cflags = {"-DPROGRAMS=10"};
  CorpusProgram program("many_programs.bpf.c", options);
  ASSERT_TRUE(program.ok());
  // Every stage but `changed` (stage_1 to stage_9; the entry handles 0).
  auto stagesBut = [](uint32_t changed) {
    std::vector<std::string> stages;
    for (uint32_t stage = 1; stage < 10; ++stage)
      if (stage != changed)
        stages.push_back("stage_" + std::to_string(stage));
    return stages;
  };
  for (uint32_t stage : {0u, 1u, 2u, 3u}) {
    std::string rules = "rules_" + std::to_string(stage);
    program.set(rules, uint32_t(0), DropDns);
    program.set(rules, uint32_t(1), PassSsh);
    program.set(rules, uint32_t(2), SendBackWeb);
  }
  auto answersAsTheOriginal = [&](const std::string &when) {
    for (uint32_t stage : {0u, 1u, 2u, 3u})
      for (const StageCase &c : stageCases(stage)) {
        Bytes packet = buildPacket(c.spec);
        EXPECT_EQ(program.active(packet), program.original(packet))
            << when << ": stage " << stage << " dport " << c.spec.dport;
      }
  };
  core::CycleReport first = program.cycle();
  ASSERT_TRUE(first.installed()) << first.describe();
  EXPECT_TRUE(first.reused.empty()) << "nothing to reuse before the first install";
  answersAsTheOriginal("first version");

  // Stage 1's ACL changes through Morpheus: the other stages are reused.
  program.set("rules_1", uint32_t(2), DropWeb);
  core::CycleReport second = program.cycle();
  ASSERT_TRUE(second.installed()) << second.describe();
  EXPECT_EQ(second.reused, stagesBut(1));
  EXPECT_EQ(second.validation.skipped, stagesBut(1));
  answersAsTheOriginal("stage 1 changed");

  // A write behind Morpheus's back (no bump) to stage 2's ACL: the reused
  // stage answers from the rules it was specialized on, so it runs its
  // specialized code, stamped valid for this guard version.
  Bytes web2 = buildPacket({.protocol = 6, .daddr = 0x0a000002, .dport = 8080});
  int rules2 = program.opt().mapFd("rules_2");
  uint32_t webRule = 2;
  ASSERT_EQ(bpf_map_update_elem(rules2, &webRule, &DropWeb, BPF_ANY), 0);
  EXPECT_EQ(program.active(web2).verdict, uint32_t(XDP_TX)) << "specialized: the old rule";
  EXPECT_EQ(program.original(web2).verdict, uint32_t(XDP_DROP));
  ASSERT_EQ(bpf_map_update_elem(rules2, &webRule, &SendBackWeb, BPF_ANY), 0);

  // Stage 3 changes: stage 1 (built last time) and the others (reused
  // twice) are reused from the running version.
  program.set("rules_3", uint32_t(1), DropDns);
  core::CycleReport third = program.cycle();
  ASSERT_TRUE(third.installed()) << third.describe();
  EXPECT_EQ(third.reused, stagesBut(3));
  answersAsTheOriginal("stage 3 changed");

  // A guarded change of a reused stage's ACL, no cycle since: it falls back
  // and answers with the new rule at once.
  program.set("rules_2", uint32_t(2), DropWeb);
  EXPECT_EQ(program.active(web2), program.original(web2));
  EXPECT_EQ(program.active(web2).verdict, uint32_t(XDP_DROP)) << "stale: the new rule";
  core::CycleReport fourth = program.cycle();
  ASSERT_TRUE(fourth.installed()) << fourth.describe();
  EXPECT_EQ(fourth.reused, stagesBut(2));
  answersAsTheOriginal("stage 2 changed");
}

// The fallback by tail call past slot 64: 70 programs attached on their
// own (many_programs.bpf.c with -DINDEPENDENT: no tail call in the object),
// built offline without facts from the kernel, so each falls back by tail
// call to its index. The fallback array the optimizer fills
// (createFallbackArray) holds every program; a stage past slot 64 answers
// from its specialized code while the version holds, and from the original
// in its slot once a guarded change makes it stale.
TEST(CompositePrograms, AStagePastSlot64FallsBackByTailCallToItsOriginal) {
  bpf::FrontendOptions frontend;
  frontend.cflags = {"-DPROGRAMS=70", "-DINDEPENDENT"};
  auto spec = bpf::ProgramSpec::load(corpusPath("many_programs.bpf.c"), frontend);
  ASSERT_THAT_EXPECTED(spec, llvm::Succeeded());
  const std::vector<std::string> &programs = (*spec)->programs();
  ASSERT_EQ(programs.size(), 70u);
  auto at = std::find(programs.begin(), programs.end(), "stage_69");
  ASSERT_NE(at, programs.end());
  uint32_t slot = uint32_t(at - programs.begin());
  ASSERT_GE(slot, 64u);

  auto original = bpf::LoadedObject::load((*spec)->originalElf(), (*spec)->objectName(), {});
  ASSERT_THAT_EXPECTED(original, llvm::Succeeded());
  int rules = original->mapFd("rules_69");
  uint32_t keys[] = {0, 1, 2};
  for (auto [key, rule] : {std::pair{keys[0], DropDns}, {keys[1], PassSsh}, {keys[2], SendBackWeb}})
    ASSERT_EQ(bpf_map_update_elem(rules, &key, &rule, BPF_ANY), 0);
  auto fallback = bpf::createFallbackArray(*original, programs, "many_entry");
  ASSERT_THAT_EXPECTED(fallback, llvm::Succeeded());
  Fd fallbackArray(fallback->fd);
  for (uint32_t i = 0; i < programs.size(); ++i)
    EXPECT_EQ(fallback->programs[programs[i]].fallbackSlot, std::optional(i)) << programs[i];

  auto guard = bpf::GuardWord::create();
  ASSERT_THAT_EXPECTED(guard, llvm::Succeeded());
  std::map<std::string, int> maps;
  for (const auto &[name, fd] : original->maps())
    if (!bpf::isFrozenSection(name))
      maps[name] = fd;
  auto snapshot = bpf::readSnapshot((*spec)->readPlan(64), (*spec)->catalog(), maps);
  ASSERT_THAT_EXPECTED(snapshot, llvm::Succeeded());
  maps[bpf::GuardMapName] = guard->fd();
  maps[bpf::FallbackMapName] = fallbackArray.fd;
  bpf::SpecializeRequest request; // no facts: each falls back by tail call
  request.guardVersion = guard->version();
  auto built = (*spec)->specialize(*snapshot, request);
  ASSERT_THAT_EXPECTED(built, llvm::Succeeded());
  auto decided = std::find_if(built->log.guards.begin(), built->log.guards.end(),
                              [](const core::GuardDecision &g) { return g.function == "stage_69"; });
  ASSERT_NE(decided, built->log.guards.end());
  EXPECT_EQ(decided->fallback, core::Fallback::TailCall) << decided->detail;
  EXPECT_EQ(decided->slot, slot);
  bpf::LoadOptions sharing;
  sharing.maps = maps;
  auto specialized = bpf::LoadedObject::load(built->elf, (*spec)->objectName(), sharing);
  ASSERT_THAT_EXPECTED(specialized, llvm::Succeeded());
  int stage = specialized->programFd("stage_69"), originalStage = original->programFd("stage_69");

  for (const StageCase &c : stageCases(69)) {
    Bytes packet = buildPacket(c.spec);
    RunResult active = runOnce(stage, packet);
    EXPECT_EQ(active, runOnce(originalStage, packet)) << "dport " << c.spec.dport;
    EXPECT_EQ(active.verdict, c.verdict) << "dport " << c.spec.dport;
  }
  guard->bump();
  ASSERT_EQ(bpf_map_update_elem(rules, &keys[2], &DropWeb, BPF_ANY), 0);
  Bytes web = buildPacket({.protocol = 6, .daddr = 0x0a000045, .dport = 8080});
  EXPECT_EQ(runOnce(stage, web).verdict, uint32_t(XDP_DROP))
      << "stale: the original in slot " << slot << ", not the old code nor XDP_ABORTED";
  EXPECT_EQ(runOnce(stage, web), runOnce(originalStage, web));
}

} // namespace
} // namespace morpheus::testing
