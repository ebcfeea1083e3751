// The configuration loader: what a good file writes, what reloading
// changes, and that a bad file is reported by line and changes nothing.
#include "LbTestSupport.h"

#include "Maglev.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>

#include <chrono>
#include <set>
#include <llvm/Testing/Support/Error.h>

void morpheus_nf_lb_commands(morpheus::nf::Commands &);
extern const char morpheus_nf_lb_summary[];

namespace morpheus::nf::lb::testing {
namespace {

class Loader : public ::testing::Test {
protected:
  void SetUp() override { ASSERT_TRUE(lb.ok()); }

  Expected<LoadReport> load(const std::string &text) {
    TempFile file(text);
    lastPath = file.path();
    return loadConfigFile(file.path(), lb.pinDir());
  }

  struct Snapshot {
    std::map<std::string, std::map<Bytes, Bytes>> tables;
    std::vector<std::vector<uint32_t>> rings;
    bool operator==(const Snapshot &) const = default;
  };

  Snapshot snapshot() {
    Snapshot shot;
    for (const char *map : {"config", "vips", "reals", "vip_stats"})
      shot.tables[map] = maps.entries(map);
    for (uint32_t index = 0; index < 6; ++index)
      shot.rings.push_back(maps.ring(index));
    return shot;
  }

  LbProgram lb;
  MapView maps = viewOf(lb.nf());
  std::string lastPath;
};

TEST_F(Loader, GoodFileWritesSettingsVipsRealsAndRings) {
  auto report = load(baseConfig());
  ASSERT_THAT_EXPECTED(report, llvm::Succeeded());
  EXPECT_EQ(report->vips, 4u);
  EXPECT_EQ(report->reals, 9u);

  lb_config settings = maps.config();
  EXPECT_EQ(ntohl(settings.source), LbSource);
  EXPECT_EQ(settings.source_mask, 0u);
  EXPECT_EQ(Bytes(settings.gateway_mac, settings.gateway_mac + 6),
            Bytes(GatewayMac.begin(), GatewayMac.end()));
  EXPECT_EQ(settings.ttl, 64);
  EXPECT_EQ(ntohs(settings.gue_port), LB_GUE_DEFAULT_PORT);

  LbConfig config = parsed(baseConfig());
  std::set<uint32_t> vipIndexes, realIndexes;
  for (const VipSpec &vip : config.vips) {
    SCOPED_TRACE(describeVip(vip.address, vip.port, vip.protocol));
    auto entry = maps.vip(vip.address, vip.port, vip.protocol);
    ASSERT_TRUE(entry);
    EXPECT_EQ(entry->flags, vip.quic ? LB_VIP_QUIC : 0u);
    EXPECT_LT(entry->index, uint32_t(LB_MAX_VIPS));
    EXPECT_TRUE(vipIndexes.insert(entry->index).second) << "indexes are distinct";

    std::vector<MaglevBackend> backends;
    for (const RealSpec &real : vip.reals) {
      uint32_t index = maps.realIndexOf(real.address);
      ASSERT_NE(index, 0u);
      realIndexes.insert(index);
      EXPECT_EQ(maps.real(index).flags, LB_REAL_ACTIVE | (real.gue ? LB_REAL_GUE : 0u));
      backends.push_back({index, real.address, real.weight});
    }
    EXPECT_EQ(maps.ring(entry->index), buildMaglevTable(backends, LB_RING_SIZE));
  }
  EXPECT_EQ(realIndexes.size(), 9u);
  EXPECT_EQ(maps.entries("vips").size(), 4u);
}

TEST_F(Loader, ReloadingTheSameFileChangesNothing) {
  ASSERT_TRUE(bool(load(baseConfig())));
  Snapshot before = snapshot();
  auto again = load(baseConfig());
  ASSERT_THAT_EXPECTED(again, llvm::Succeeded());
  EXPECT_EQ(again->changes, 0u);
  EXPECT_TRUE(snapshot() == before);
}

TEST_F(Loader, ReloadKeepsIndexesAndWritesOnlyWhatDiffers) {
  ASSERT_TRUE(bool(load(baseConfig())));
  uint32_t web = maps.vip(WebVip, 80, IPPROTO_TCP)->index;
  uint32_t quic = maps.vip(QuicVip, 443, IPPROTO_UDP)->index;
  uint32_t removedReal = maps.realIndexOf(0x0a010001);
  uint32_t keptReal = maps.realIndexOf(0x0a010002);
  std::vector<uint32_t> webRing = maps.ring(web);

  // Drop 10.1.0.1 and the DNS VIP (and with it its reals); add a VIP.
  std::string text = replaced(replaced(baseConfig(), "real 10.1.0.1\n", ""),
                              "vip 10.0.0.2:53/udp\nreal 10.2.0.1\nreal 10.2.0.2 gue\n", "") +
                     "vip 10.0.0.9:8080/tcp\nreal 10.1.0.2\n";
  auto report = load(text);
  ASSERT_THAT_EXPECTED(report, llvm::Succeeded());

  EXPECT_EQ(maps.vip(WebVip, 80, IPPROTO_TCP)->index, web);
  EXPECT_EQ(maps.vip(QuicVip, 443, IPPROTO_UDP)->index, quic);
  EXPECT_FALSE(maps.vip(DnsVip, 53, IPPROTO_UDP));
  EXPECT_TRUE(maps.vip(0x0a000009, 8080, IPPROTO_TCP));
  EXPECT_EQ(maps.realIndexOf(0x0a010002), keptReal);
  EXPECT_EQ(maps.real(removedReal).flags, 0u) << "removed reals are deactivated";
  EXPECT_EQ(maps.realIndexOf(0x0a020001), 0u);

  // Only the web ring's slots of the removed real, and a few others, moved.
  std::vector<uint32_t> after = maps.ring(web);
  uint32_t moved = 0, itsSlots = 0;
  for (uint32_t slot = 0; slot < LB_RING_SIZE; ++slot) {
    itsSlots += webRing[slot] == removedReal;
    moved += webRing[slot] != after[slot];
  }
  EXPECT_GE(moved, itsSlots);
  EXPECT_LT(moved, 2 * itsSlots);
  // The new VIP's ring is all 10.1.0.2 (its only real).
  uint32_t added = maps.vip(0x0a000009, 8080, IPPROTO_TCP)->index;
  std::vector<uint32_t> addedRing = maps.ring(added);
  EXPECT_EQ(std::count(addedRing.begin(), addedRing.end(), keptReal), LB_RING_SIZE);
  EXPECT_LT(report->changes, 2 * LB_RING_SIZE) << "unchanged rings are not rewritten";
}

TEST_F(Loader, NewVipStartsWithZeroedStatsInAReusedIndex) {
  ASSERT_TRUE(bool(load(baseConfig())));
  uint32_t web = maps.vip(WebVip, 80, IPPROTO_TCP)->index;
  lb.run(packetOf(Flow{}));
  ASSERT_EQ(maps.vipCounters(web).packets, 1u);
  // The web VIP goes; a new one takes its index and must not inherit counts.
  ASSERT_TRUE(bool(load(replaced(baseConfig(), "vip 10.0.0.1:80/tcp", "vip 10.0.0.8:80/tcp"))));
  auto replacement = maps.vip(0x0a000008, 80, IPPROTO_TCP);
  ASSERT_TRUE(replacement);
  EXPECT_EQ(replacement->index, web);
  EXPECT_EQ(maps.vipCounters(web).packets, 0u);
}

struct BadCase {
  const char *name;
  std::string text;
  unsigned line;       // 0: an error about the whole file
  const char *message; // part of the error
};

std::string withLine(const std::string &line) { return baseConfig() + line + "\n"; }

TEST_F(Loader, BadLineIsReportedWithItsNumberAndNothingIsApplied) {
  ASSERT_TRUE(bool(load(baseConfig())));
  lb.run(packetOf(Flow{}));
  Snapshot before = snapshot();
  unsigned next = 17; // baseConfig has 16 lines
  std::string reals = "vip 10.0.0.9:80/tcp\nreal 10.9.0.1\n";
  std::vector<BadCase> cases = {
      {"unknown directive", withLine("backend 10.9.0.1"), next, "unknown directive 'backend'"},
      {"real before any vip", "source 10.255.0.1\nreal 10.1.0.1\n", 2, "real before any vip"},
      {"quic on tcp", withLine("vip 10.0.0.9:443/tcp quic"), next, "quic needs a udp VIP"},
      {"unknown vip flag", withLine("vip 10.0.0.9:443/udp fast"), next, "unknown flag 'fast'"},
      {"bad protocol", withLine("vip 10.0.0.9:443/sctp"), next, "neither tcp nor udp"},
      {"no port", withLine("vip 10.0.0.9/tcp"), next, "is not ADDRESS:PORT"},
      {"port 0", withLine("vip 10.0.0.9:0/tcp"), next, "0 is not a service port"},
      {"port too large", withLine("vip 10.0.0.9:70000/tcp"), next, "larger than 65535"},
      {"bad vip address", withLine("vip 10.0.0.300:80/tcp"), next, "not an IPv4 address"},
      {"duplicate vip", withLine("vip 10.0.0.1:80/tcp"), next, "already defined on line 4"},
      {"duplicate real", withLine("real 10.4.0.1"), next, "already listed for this vip on line 16"},
      {"bad weight", withLine("real 10.4.0.2 weight=heavy"), next, "'heavy' is not a number"},
      {"bad real word", withLine("real 10.4.0.2 fast"), next, "unexpected 'fast'"},
      {"real 0.0.0.0", withLine("real 0.0.0.0"), next, "cannot receive packets"},
      {"encapsulation conflict", withLine(reals + "real 10.2.0.2"), next + 2,
       "is ip-in-ip here but gue on line 10"},
      {"second source", withLine("source 10.255.0.2"), next, "given twice (first on line 2)"},
      {"bad gateway", "source 10.255.0.1\ngateway 02:00:00:00:00\n", 2, "not a MAC address"},
      {"ttl 0", withLine("ttl 0"), next, "ttl: 0"},
      {"gue-port words", withLine("gue-port 1 2"), next, "expected 'gue-port PORT'"},
      {"source with host bits", "source 10.255.0.1/16\n", 1, "host bits set"},
      {"no gateway", "source 10.255.0.1\n", 0, "no 'gateway' line"},
      {"no source", "gateway 02:00:00:00:00:fe\n", 0, "no 'source' line"},
  };
  for (const BadCase &bad : cases) {
    SCOPED_TRACE(bad.name);
    auto report = load(bad.text);
    ASSERT_FALSE(bool(report));
    std::string message = llvm::toString(report.takeError());
    std::string where =
        bad.line ? lastPath + ":" + std::to_string(bad.line) + ": " : lastPath + ": ";
    EXPECT_EQ(message.rfind(where, 0), 0u) << message;
    EXPECT_NE(message.find(bad.message), std::string::npos) << message;
    EXPECT_TRUE(snapshot() == before) << "nothing may be applied";
  }
}

TEST_F(Loader, CapacityErrorsNameTheLineThatDoesNotFit) {
  ASSERT_TRUE(bool(load(baseConfig())));
  Snapshot before = snapshot();

  std::string vips = "source 10.255.0.1\ngateway 02:00:00:00:00:fe\n";
  for (int i = 0; i <= LB_MAX_VIPS; ++i)
    vips += "vip 10.0.1." + std::to_string(i) + ":80/tcp\nreal 10.1.0.1\n";
  auto report = load(vips);
  ASSERT_FALSE(bool(report));
  std::string message = llvm::toString(report.takeError());
  EXPECT_EQ(message.rfind(lastPath + ":" + std::to_string(3 + 2 * LB_MAX_VIPS) + ": ", 0), 0u)
      << message;
  EXPECT_NE(message.find("the vips table holds 32"), std::string::npos) << message;
  EXPECT_TRUE(snapshot() == before);

  std::string reals = "source 10.255.0.1\ngateway 02:00:00:00:00:fe\nvip 10.0.0.1:80/tcp\n";
  for (int i = 0; i < LB_MAX_REALS; ++i)
    reals += "real 10.8." + std::to_string(i / 256) + "." + std::to_string(i % 256) + "\n";
  report = load(reals);
  ASSERT_FALSE(bool(report));
  message = llvm::toString(report.takeError());
  // Index 0 is reserved: the 4096th real (line 4 + 4095) has no room.
  EXPECT_EQ(message.rfind(lastPath + ":" + std::to_string(3 + LB_MAX_REALS) + ": ", 0), 0u)
      << message;
  EXPECT_TRUE(snapshot() == before);
}

TEST_F(Loader, ShippedConfigsLoad) {
  auto example =
      loadConfigFile(morpheus::testing::sourcePath("nf/lb/configs/example.conf"), lb.pinDir());
  ASSERT_THAT_EXPECTED(example, llvm::Succeeded());

  auto start = std::chrono::steady_clock::now();
  auto paper =
      loadConfigFile(morpheus::testing::sourcePath("nf/lb/configs/paper.conf"), lb.pinDir());
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_THAT_EXPECTED(paper, llvm::Succeeded());
  EXPECT_EQ(paper->vips, 10u);
  EXPECT_EQ(paper->reals, 1000u);
  RecordProperty("paper_load_seconds", std::to_string(seconds));
  std::printf("paper.conf: %zu changes (%zu ring slots), commit %.2f s, load %.2f s\n",
              paper->changes, paper->ringSlots, paper->commitSeconds, seconds);
  for (uint32_t vip = 0; vip < 10; ++vip) {
    std::map<uint32_t, uint32_t> shares;
    for (uint32_t real : maps.ring(vip))
      ++shares[real];
    EXPECT_EQ(shares.size(), 100u) << "vip " << vip;
    for (auto [real, slots] : shares)
      EXPECT_NEAR(slots, LB_RING_SIZE / 100.0, 1) << "vip " << vip << " real " << real;
  }
}

TEST_F(Loader, ExpireRemovesOnlyIdleFlows) {
  ASSERT_TRUE(bool(load(baseConfig())));
  Flow fresh, stale;
  stale.sport = 40001;
  lb.run(packetOf(fresh));
  lb.run(packetOf(stale));
  ASSERT_EQ(maps.flowCount(), 2u);
  // Timestamps count from boot (bpf_ktime_get_ns), so an age must fit in
  // the time since boot: the stale entry was last seen at half of it, and
  // entries idle for more than a quarter of it expire.
  lb_flow_key key = flowKey(stale);
  lb_flow value = *maps.flow(stale);
  uint64_t sinceBoot = maps.flow(fresh)->last_seen_ns;
  value.last_seen_ns = sinceBoot / 2;
  ASSERT_EQ(bpf_map_update_elem(lb.nf().mapFd("flows"), &key, &value, BPF_EXIST), 0);

  auto removed = expireFlows(lb.pinDir(), sinceBoot / 4);
  ASSERT_THAT_EXPECTED(removed, llvm::Succeeded());
  EXPECT_EQ(*removed, 1u);
  EXPECT_TRUE(maps.flow(fresh));
  EXPECT_FALSE(maps.flow(stale));
}

int runCli(std::vector<std::string> words) {
  return nf::testing::runCommand({"lb", morpheus_nf_lb_summary, morpheus_nf_lb_commands},
                                 std::move(words));
}

TEST_F(Loader, CommandLineExitCodes) {
  TempFile good(baseConfig()), bad(withLine("vip nonsense"));
  EXPECT_EQ(runCli({"lb", "load-config", "--pin-dir", lb.pinDir(), good.path()}), 0);
  Snapshot before = snapshot();
  EXPECT_EQ(runCli({"lb", "load-config", "--pin-dir", lb.pinDir(), bad.path()}), 1);
  EXPECT_TRUE(snapshot() == before);
  EXPECT_EQ(runCli({"lb", "load-config", "--pin-dir", lb.pinDir()}), 2);
  EXPECT_EQ(runCli({"lb", "stats", "--pin-dir", lb.pinDir()}), 0);
  EXPECT_EQ(runCli({"lb", "expire", "--pin-dir", lb.pinDir(), "--idle", "10s"}), 0);
  EXPECT_EQ(runCli({"lb", "expire", "--pin-dir", lb.pinDir()}), 2);
  EXPECT_EQ(runCli({"lb", "--help"}), 0);
  EXPECT_EQ(runCli({"lb", "frobnicate"}), 2);
  EXPECT_EQ(runCli({"lb", "load-config", "--pin-dir", "/nonexistent", good.path()}), 1);
}

} // namespace
} // namespace morpheus::nf::lb::testing
