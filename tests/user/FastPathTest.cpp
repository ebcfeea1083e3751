// Fast paths in the user-space backend, with the real JIT: the core's
// instrument-table-sites records sampled keys of the LPM lookup of
// tests/user/handlers/lpm_probe.c into the handler's Profile,
// core::TrafficProfile counts them, and heavy-hitter-fast-path puts the
// heavy hitters with their answers in front of the lookup (the fast path
// + fallback template). The routes are more than the inline limit, so
// lpm-as-code declines; lpm-as-array, which would make them a derived
// table, is left out (it declines tries over 4,096 prefixes and IPv6 ones,
// which are what fast paths are for): the lookup stays, only the traffic
// can help.
#include "LpmProbe.h"
#include "UserRouter.h"
#include "core/Pipeline.h"

#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>

#include <random>

namespace morpheus::user {
namespace {

using testing::answerIn;
using testing::bytesOfValue;
using testing::lpmKey;
using testing::probeFor;

std::unique_ptr<Handler> loadProbe(bool followTraffic, const std::string &kind = "MU_LPM_DIR24") {
  HandlerOptions options;
  options.cflags = {"-DLPM_KIND=" + kind};
  options.tablePasses = core::tablePassesWithout({"lpm-as-array"});
  if (followTraffic) {
    core::TrafficProfileOptions traffic;
    traffic.initialPeriod = 4;
    options.traffic = traffic;
  }
  return testing::loadLpmProbe(options);
}

// 100 routes: /24s 10.0.N.0 (N < 96), and 10.0.0.0/16, 10.1.0.0/16,
// 10.0.7.128/25, 10.0.7.200/32 nested in them.
void addRoutes(TableSet &tables) {
  Guard::Update change(tables.guard());
  auto add = [&](uint32_t length, uint32_t address, uint32_t value) {
    ASSERT_THAT_ERROR(
        tables.updateUnguarded("routes", lpmKey(length, address), bytesOfValue(value)),
        llvm::Succeeded());
  };
  for (uint32_t n = 0; n < 96; ++n)
    add(24, 0x0a000000u | (n << 8), 100 + n);
  add(16, 0x0a000000u, 1);
  add(16, 0x0a010000u, 2);
  add(25, 0x0a000780u, 3);
  add(32, 0x0a0007c8u, 4);
}

// `packets` destinations: with `hot` > 0, that share goes to three hot
// addresses (10.0.7.200, 10.0.5.1, 10.1.2.3), the rest anywhere in 10.0/15
// and beyond; with 0, every packet to a random address.
ReplayRing trafficWith(double hot, size_t packets, unsigned seed) {
  std::mt19937 random(seed);
  const uint32_t hotAddresses[] = {0x0a0007c8u, 0x0a000501u, 0x0a010203u};
  ReplayRing ring;
  for (size_t i = 0; i < packets; ++i) {
    uint32_t address = std::uniform_real_distribution<double>(0, 1)(random) < hot
                           ? hotAddresses[random() % 3]
                           : 0x0a000000u + uint32_t(random() % 0x30000);
    ring.frames.push_back(probeFor(address));
    ring.sequence.push_back(uint32_t(i));
  }
  return ring;
}

const core::SiteDecision *decisionOn(const core::SpecializationLog &log, const std::string &pass) {
  for (const core::SiteDecision &decision : log.decisions)
    if (decision.table == "routes" && decision.pass == pass)
      return &decision;
  return nullptr;
}

// The routes on LPM kind `kind`.
void expectHotDestinationsGetAFastPathThatAgreesWithTheGenericHandler(const std::string &kind) {
  auto probe = loadProbe(true, kind), generic = loadProbe(false, kind);
  ASSERT_TRUE(probe && generic);
  addRoutes(probe->tables());
  addRoutes(generic->tables());

  // The first version records keys; nothing is known of the traffic yet.
  auto first = probe->specialize();
  ASSERT_THAT_EXPECTED(first, llvm::Succeeded());
  ASSERT_EQ(first->outcome, core::CycleOutcome::Installed);
  ASSERT_EQ(first->log.profiled.size(), 1u);
  unsigned site = first->log.profiled.begin()->first;
  EXPECT_EQ(first->log.profiled.begin()->second.table, "routes");
  const core::SiteDecision *lpm = decisionOn(first->log, "lpm-as-code");
  ASSERT_TRUE(lpm);
  EXPECT_FALSE(lpm->applied); // 100 prefixes: over the inline limit
  EXPECT_FALSE(decisionOn(first->log, "heavy-hitter-fast-path"));

  ReplayRing ring = trafficWith(0.9, 3000, 1);
  EventLoop(probe->trampoline(), 32).run(ring, 2);

  // The next cycle: the three hot keys in front of the lookup.
  auto second = probe->specialize();
  ASSERT_THAT_EXPECTED(second, llvm::Succeeded());
  ASSERT_EQ(second->outcome, core::CycleOutcome::Installed);
  ASSERT_TRUE(second->traffic.count(site));
  const core::SiteTraffic &traffic = second->traffic.at(site);
  EXPECT_EQ(traffic.hotKeys.size(), 3u) << traffic.why;
  for (uint32_t address : {0x0a0007c8u, 0x0a000501u, 0x0a010203u})
    EXPECT_NE(std::find(traffic.hotKeys.begin(), traffic.hotKeys.end(), lpmKey(32, address)),
              traffic.hotKeys.end())
        << "address " << std::hex << address;
  const core::SiteDecision *fastPath = decisionOn(second->log, "heavy-hitter-fast-path");
  ASSERT_TRUE(fastPath);
  EXPECT_TRUE(fastPath->applied) << fastPath->detail;

  // Hot and cold packets alike: the same answers as the generic handler.
  ReplayRing check = trafficWith(0.5, 2000, 2);
  auto expected = EventLoop(generic->trampoline(), 32).collect(check);
  auto actual = EventLoop(probe->trampoline(), 32).collect(check);
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i)
    ASSERT_EQ(actual[i], expected[i]) << "packet " << i;
  EXPECT_EQ(probe->tables().dump(), generic->tables().dump());

  // A route that changes a hot key's answer, between bursts: the next
  // burst answers with it (the guard sends it to the generic lookup).
  ReplayRing hot{{probeFor(0x0a000501u)}, {0}, 0};
  EXPECT_EQ(answerIn(EventLoop(probe->trampoline(), 1).collect(hot)[0]), 105u);
  ASSERT_THAT_ERROR(
      probe->tables().update("routes", lpmKey(28, 0x0a000500u), bytesOfValue<uint32_t>(7)),
      llvm::Succeeded());
  EXPECT_EQ(answerIn(EventLoop(probe->trampoline(), 1).collect(hot)[0]), 7u);
  auto third = probe->specialize();
  ASSERT_THAT_EXPECTED(third, llvm::Succeeded());
  EXPECT_EQ(answerIn(EventLoop(probe->trampoline(), 1).collect(hot)[0]), 7u);
}

TEST(UserFastPath, HotDestinationsGetAFastPathThatAgreesWithTheGenericHandler) {
  expectHotDestinationsGetAFastPathThatAgreesWithTheGenericHandler("MU_LPM_DIR24");
}

#ifdef MORPHEUS_WITH_DPDK
// The fast path's answers are the probed keys' answers from rte_lpm.
TEST(UserFastPath, HotDestinationsOverRteLpmGetAFastPathThatAgreesWithTheGenericHandler) {
  expectHotDestinationsGetAFastPathThatAgreesWithTheGenericHandler("MU_LPM_RTE");
}
#endif

// No locality: every destination a few times at most, no key's share is
// worth a compare, so no fast path (the lookup stays, with the reason).
TEST(UserFastPath, WithoutLocalityNoFastPath) {
  auto probe = loadProbe(true);
  ASSERT_TRUE(probe);
  addRoutes(probe->tables());
  ASSERT_THAT_EXPECTED(probe->specialize(), llvm::Succeeded());
  EventLoop(probe->trampoline(), 32).run(trafficWith(0, 3000, 3), 2);
  auto cycle = probe->specialize();
  ASSERT_THAT_EXPECTED(cycle, llvm::Succeeded());
  ASSERT_EQ(cycle->traffic.size(), 1u);
  EXPECT_TRUE(cycle->traffic.begin()->second.hotKeys.empty()) << cycle->traffic.begin()->second.why;
  const core::SiteDecision *fastPath = decisionOn(cycle->log, "heavy-hitter-fast-path");
  EXPECT_TRUE(!fastPath || !fastPath->applied);
}

} // namespace
} // namespace morpheus::user
