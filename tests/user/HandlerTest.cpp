// The user-space backend end to end, on the router handler
// (nf/router/user/router_user.c) compiled by clang-19 and JIT-compiled by
// ORC for real: the core's analysis on handler IR, the generic handler's
// behaviour, specialization behind the guard, the swap between bursts, and
// the differential check (generic and specialized handlers on twin tables:
// same verdicts, bytes and table contents).
#include "UserRouter.h"
#include "core/Pipeline.h"

#include <gtest/gtest.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Testing/Support/Error.h>

#include <arpa/inet.h>
#include <cstring>
#include <random>

namespace morpheus::user {
namespace {

using namespace testing;

const core::SiteDecision *applied(const core::SpecializationLog &log, const std::string &table) {
  for (const core::SiteDecision &decision : log.decisions)
    if (decision.table == table && decision.applied)
      return &decision;
  return nullptr;
}

TEST(UserAnalysis, TheCoreClassifiesTheRoutersTablesOnHandlerIR) {
  auto router = loadRouter();
  ASSERT_TRUE(router);
  llvm::Module &module = const_cast<llvm::Module &>(router->pristineModule());
  core::TableAccessInfo info =
      core::analyzeModule(module, router->accessSignatures(), router->tables().catalog());
  EXPECT_TRUE(info.isReadOnly("routes"));
  EXPECT_TRUE(info.isReadOnly("neighbors"));
  EXPECT_TRUE(info.isReadOnly("ports"));
  EXPECT_FALSE(info.isReadOnly("stats")); // the handler counts in it
  core::ReadPlan plan = core::planReads(info, router->tables().catalog(), 64);
  EXPECT_TRUE(plan.count("neighbors"));
  EXPECT_TRUE(plan.count("ports"));
  EXPECT_TRUE(plan.count("routes")); // LPM: planned for lpm-as-code
  EXPECT_EQ(router->tables().catalog().at("routes").match, core::TableMatch::LongestPrefix);
}

TEST(UserJit, TheGenericRouterForwardsPassesAndDrops) {
  auto router = loadRouter();
  ASSERT_TRUE(router);
  configure(router->tables());
  HandlerFunction generic = router->generic();
  ASSERT_EQ(router->trampoline().current(), generic);

  PacketResult forwarded = runPacket(generic, udpTo("10.1.2.3"), 0);
  EXPECT_EQ(forwarded.verdict, MU_TX);
  EXPECT_EQ(forwarded.port, 2u); // the /24 beats the /16
  EXPECT_EQ(forwarded.bytes[14 + 8], 63); // TTL
  EXPECT_TRUE(packet::ipv4ChecksumValid(forwarded.bytes, 14));
  EXPECT_TRUE(std::equal(GatewayMac.begin(), GatewayMac.end(), forwarded.bytes.begin()));
  EXPECT_EQ(forwarded.bytes[11], 2); // the egress port's own MAC
  EXPECT_EQ(runPacket(generic, udpTo("10.1.7.7"), 0).port, 1u);
  EXPECT_EQ(runPacket(generic, udpTo("8.8.8.8"), 0).port, 0u); // default route
  EXPECT_EQ(runPacket(generic, udpTo("10.9.9.9"), 0).verdict, MU_PASS);   // local
  EXPECT_EQ(runPacket(generic, udpTo("172.20.0.1"), 0).verdict, MU_PASS); // no neighbour
  EXPECT_EQ(runPacket(generic, udpTo("10.1.2.3", 1), 0).verdict, MU_PASS); // TTL
  Bytes broken = udpTo("10.1.2.3");
  broken[14 + 10] ^= 0xff;
  PacketResult dropped = runPacket(generic, broken, 0);
  EXPECT_EQ(dropped.verdict, MU_DROP);
  EXPECT_EQ(dropped.bytes, broken); // untouched

  uint32_t noNeighbor = STAT_NO_NEIGHBOR;
  auto *count = static_cast<uint64_t *>(router->tables().find("stats")->lookup(&noNeighbor));
  EXPECT_EQ(*count, 1u);
}

TEST(UserJit, ReadOnlyTablesAreSpecializedAndTheVersionIsInstalled) {
  auto router = loadRouter();
  ASSERT_TRUE(router);
  configure(router->tables());
  auto cycle = router->specialize();
  ASSERT_THAT_EXPECTED(cycle, llvm::Succeeded());
  EXPECT_EQ(cycle->outcome, core::CycleOutcome::Installed);
  EXPECT_EQ(cycle->version, router->tables().guard().version());
  EXPECT_NE(router->trampoline().current(), router->generic());
  // The neighbours (3 entries) and the ports (64 slots) are inlined, the
  // routes (5 prefixes) become a search (lpm-as-code); the written stats
  // are not specialized.
  EXPECT_TRUE(applied(cycle->log, "neighbors"));
  EXPECT_TRUE(applied(cycle->log, "ports"));
  const core::SiteDecision *routes = applied(cycle->log, "routes");
  ASSERT_TRUE(routes);
  EXPECT_EQ(routes->pass, "lpm-as-code");
  EXPECT_FALSE(applied(cycle->log, "stats"));
  ASSERT_FALSE(cycle->log.guards.empty());
  EXPECT_EQ(cycle->log.guards.front().fallback, core::Fallback::InProgram);

  // The specialized IR checks the guard first and keeps the generic code
  // behind it.
  auto ir = router->specializedIR();
  ASSERT_THAT_EXPECTED(ir, llvm::Succeeded());
  EXPECT_NE(ir->find("morpheus.guard"), std::string::npos);
  EXPECT_NE(ir->find(Guard::VersionSymbol), std::string::npos);
}

// The differential harness for this backend: two instances of the handler
// with twin tables, one generic and one specialized, the same packets
// through both (in bursts, through the event loop), compared packet by
// packet (verdict, port, bytes) and table by table afterwards.
// Twin routers, generic and specialized with `faults`, over the sample
// packets: the index of the first packet they treat differently (the
// packet count when only the tables differ afterwards), nullopt when none.
std::optional<size_t> firstDifference(const std::vector<std::string> &cflags,
                                      const core::FaultInjection &faults) {
  auto generic = loadRouter(cflags), specialized = loadRouter(cflags, faults);
  if (!generic || !specialized)
    return 0;
  configure(generic->tables());
  configure(specialized->tables());
  auto cycle = specialized->specialize();
  if (!cycle || cycle->outcome != core::CycleOutcome::Installed) {
    ADD_FAILURE() << (cycle ? "not installed" : toString(cycle.takeError()));
    return 0;
  }
  ReplayRing ring = ringOf(samplePackets(), 3);
  std::vector<PacketResult> expected = EventLoop(generic->trampoline(), 4).collect(ring);
  std::vector<PacketResult> actual = EventLoop(specialized->trampoline(), 4).collect(ring);
  for (size_t i = 0; i < expected.size(); ++i)
    if (!(actual[i] == expected[i]))
      return i;
  if (specialized->tables().dump() != generic->tables().dump())
    return expected.size();
  return std::nullopt;
}

// The harness can see a wrong specialization: compare chains that match
// the last key byte off by one (FaultInjection::breakKeyCompare) make the
// neighbour lookups miss, and the first packet that needs one differs.
TEST(UserEquivalence, CatchesABrokenKeyCompareChain) {
  core::FaultInjection broken;
  broken.breakKeyCompare = true;
  std::optional<size_t> difference = firstDifference({}, broken);
  ASSERT_TRUE(difference.has_value());
  EXPECT_EQ(firstDifference({}, {}), std::nullopt);
}

void expectEquivalent(const std::vector<std::string> &cflags) {
  auto generic = loadRouter(cflags), specialized = loadRouter(cflags);
  ASSERT_TRUE(generic && specialized);
  configure(generic->tables());
  configure(specialized->tables());
  auto cycle = specialized->specialize();
  ASSERT_THAT_EXPECTED(cycle, llvm::Succeeded());
  ASSERT_EQ(cycle->outcome, core::CycleOutcome::Installed);
  ASSERT_NE(specialized->trampoline().current(), specialized->generic());

  ReplayRing ring = ringOf(samplePackets(), 3);
  std::vector<PacketResult> expected = EventLoop(generic->trampoline(), 4).collect(ring);
  std::vector<PacketResult> actual = EventLoop(specialized->trampoline(), 4).collect(ring);
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(actual[i], expected[i]) << "packet " << i;
  EXPECT_EQ(specialized->tables().dump(), generic->tables().dump());
}

TEST(UserEquivalence, SpecializedAndGenericRoutersAgreeWithDir24) { expectEquivalent({}); }

TEST(UserEquivalence, SpecializedAndGenericRoutersAgreeWithLinearLookup) {
  expectEquivalent({"-DROUTER_LPM=MU_LPM_LINEAR"});
}

#ifdef MORPHEUS_WITH_DPDK
// DPDK's tables behind the same API: the routes on rte_lpm, the neighbours
// on rte_hash.
TEST(UserEquivalence, SpecializedAndGenericRoutersAgreeWithRteLpmAndRteHash) {
  expectEquivalent({"-DROUTER_LPM=MU_LPM_RTE", "-DROUTER_HASH=MU_HASH_RTE"});
}
#endif

// The differential harness over random table states: per state, random
// routes (nested prefixes of every length, local ones among them), random
// neighbours (some missing, some on unbound ports) and a random number of
// bound ports go into twin instances; one is specialized (inlining up to
// the whole neighbour table, or declining when it is too big), packets to
// random destinations near the routes go through both, and every packet's
// verdict, port and bytes and every table afterwards must match.
TEST(UserEquivalence, RandomTableStatesAgreePacketByPacket) {
  std::mt19937 random(5);
  for (int state = 0; state < 12; ++state) {
    SCOPED_TRACE("state " + std::to_string(state));
    auto generic = loadRouter(), specialized = loadRouter();
    ASSERT_TRUE(generic && specialized);
    const uint32_t bases[] = {0x0a000000, 0x0a010200, 0xc0a80000, 0xac100000};
    std::vector<uint32_t> gateways;
    for (int i = 0; i < 4; ++i)
      gateways.push_back(0xc0a80101 + random() % 8);
    uint32_t boundPorts = random() % 5;
    int routeCount = 1 + random() % 40, neighborCount = random() % 80;
    for (Handler *handler : {generic.get(), specialized.get()}) {
      std::mt19937 same(state); // both twins get the same entries
      TableSet &tables = handler->tables();
      Guard::Update change(tables.guard());
      for (uint32_t port = 0; port < boundPorts; ++port)
        ASSERT_THAT_ERROR(tables.updateUnguarded("ports", bytesOfValue(port),
                                                 bytesOfValue(uint32_t(1 + same() % 3))),
                          llvm::Succeeded());
      for (int i = 0; i < routeCount; ++i) {
        uint32_t length = same() % 33;
        uint32_t address = bases[same() % 4] + same() % 65536;
        route_key key{length, htonl(length ? address & ~uint32_t((uint64_t(1) << (32 - length)) - 1) : 0)};
        route value{same() % 4 ? htonl(gateways[same() % 4]) : 0, uint32_t(same() % 6),
                    same() % 8 ? uint32_t(ROUTE_FORWARD) : uint32_t(ROUTE_LOCAL)};
        ASSERT_THAT_ERROR(tables.updateUnguarded("routes", bytesOfValue(key), bytesOfValue(value)),
                          llvm::Succeeded());
      }
      for (int i = 0; i < neighborCount; ++i) {
        neighbor_key key{htonl(same() % 2 ? gateways[same() % 4] : bases[same() % 4] + same() % 65536),
                         uint32_t(same() % 6)};
        neighbor value{};
        for (auto &byte : value.dst_mac)
          byte = uint8_t(same());
        for (auto &byte : value.src_mac)
          byte = uint8_t(same());
        ASSERT_THAT_ERROR(
            tables.updateUnguarded("neighbors", bytesOfValue(key), bytesOfValue(value)),
            llvm::Succeeded());
      }
    }
    auto cycle = specialized->specialize();
    ASSERT_THAT_EXPECTED(cycle, llvm::Succeeded());
    ASSERT_EQ(cycle->outcome, core::CycleOutcome::Installed);

    std::vector<Bytes> frames;
    for (int i = 0; i < 200; ++i) {
      uint32_t destination = i % 10 == 0 ? uint32_t(random()) : bases[random() % 4] + random() % 65536;
      char text[16];
      std::snprintf(text, sizeof text, "%u.%u.%u.%u", destination >> 24, (destination >> 16) & 255,
                    (destination >> 8) & 255, destination & 255);
      frames.push_back(udpTo(text, uint8_t(random() % 4 == 0 ? random() % 3 : 64)));
    }
    ReplayRing ring = ringOf(frames, 2);
    std::vector<PacketResult> expected = EventLoop(generic->trampoline(), 8).collect(ring);
    std::vector<PacketResult> actual = EventLoop(specialized->trampoline(), 8).collect(ring);
    ASSERT_EQ(actual.size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i)
      ASSERT_EQ(actual[i], expected[i]) << "packet " << i;
    EXPECT_EQ(specialized->tables().dump(), generic->tables().dump());
  }
}

// A control-plane change between bursts: the installed specialization
// (built with the old neighbour) still sits in the trampoline, but its
// guard fails from the next packet on and the generic code behind it
// handles the packets with the new entry; the next cycle installs a new
// specialization. Every packet is compared with a generic twin that sees
// the same change at the same point.
TEST(UserGuard, AChangeBetweenBurstsFallsBackThenTheNextSpecializationIsInstalled) {
  auto router = loadRouter(), twin = loadRouter();
  ASSERT_TRUE(router && twin);
  configure(router->tables());
  configure(twin->tables());
  auto first = router->specialize();
  ASSERT_THAT_EXPECTED(first, llvm::Succeeded());
  ASSERT_EQ(first->outcome, core::CycleOutcome::Installed);
  HandlerFunction stale = router->trampoline().current();

  neighbor_key key{htonl(packet::parseIpv4("192.168.1.1")), 2};
  neighbor moved{};
  std::memcpy(moved.dst_mac, OtherMac.data(), 6);
  std::memcpy(moved.src_mac, PortMac.data(), 6);
  auto change = [&](Handler &handler) {
    ASSERT_THAT_ERROR(
        handler.tables().update("neighbors", bytesOfValue(key), bytesOfValue(moved)),
        llvm::Succeeded());
  };

  ReplayRing ring = ringOf({udpTo("10.1.2.3")}, 24); // port 2's neighbour
  const uint32_t burst = 4;
  unsigned bursts = 0;
  HandlerFunction during = nullptr, after = nullptr;
  std::vector<PacketResult> results =
      EventLoop(router->trampoline(), burst).collect(ring, [&] {
        ++bursts;
        if (bursts == 2) {
          change(*router);
        } else if (bursts == 3) {
          during = router->trampoline().current();
          auto next = router->specialize();
          ASSERT_THAT_EXPECTED(next, llvm::Succeeded());
          EXPECT_EQ(next->outcome, core::CycleOutcome::Installed);
          after = router->trampoline().current();
        }
      });
  unsigned twinBursts = 0;
  std::vector<PacketResult> expected = EventLoop(twin->trampoline(), burst).collect(ring, [&] {
    if (++twinBursts == 2)
      change(*twin);
  });

  EXPECT_EQ(during, stale); // burst 3 ran on the stale version, through its guard
  EXPECT_NE(after, stale);
  EXPECT_NE(after, router->generic());
  ASSERT_EQ(results.size(), expected.size());
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_EQ(results[i], expected[i]) << "packet " << i;
    bool changed = i >= 2 * burst;
    EXPECT_EQ(results[i].bytes[0], changed ? OtherMac[0] : GatewayMac[0]) << "packet " << i;
    EXPECT_EQ(results[i].bytes[1], changed ? OtherMac[1] : GatewayMac[1]) << "packet " << i;
  }
}

TEST(UserGuard, NothingIsCompiledWhileAChangeIsInProgress) {
  auto router = loadRouter();
  ASSERT_TRUE(router);
  configure(router->tables());
  Guard::Update change(router->tables().guard());
  auto cycle = router->specialize();
  ASSERT_THAT_EXPECTED(cycle, llvm::Succeeded());
  EXPECT_EQ(cycle->outcome, core::CycleOutcome::Deferred);
  EXPECT_EQ(router->trampoline().current(), router->generic());
}

TEST(UserJit, AHandlerWithWritableGlobalsIsRefusedNamingTheGlobal) {
  llvm::SmallString<128> path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("handler", "c", path));
  {
    std::error_code ec;
    llvm::raw_fd_ostream out(path, ec);
    out << "#include <morpheus_user.h>\nlong seen;\n"
           "MU_HANDLER int count(struct mu_packet *p) { return ++seen, MU_PASS; }\n";
  }
  HandlerOptions options;
  options.entry = "count";
  auto handler = Handler::load(path.str().str(), options);
  llvm::sys::fs::remove(path);
  ASSERT_FALSE(bool(handler));
  std::string message = toString(handler.takeError());
  EXPECT_NE(message.find("'seen'"), std::string::npos) << message;
}

} // namespace
} // namespace morpheus::user
