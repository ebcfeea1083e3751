// Following the traffic: instrumented lookups record keys, the optimizer
// counts them and puts the heavy hitters in front of the lookup. Whatever
// the traffic and whatever the hot set, every packet gets exactly what the
// original program gives it; the profile only decides speed.
#include "PolicyFwd.h"

#include "runtime/PacketSamples.h"

#include <linux/bpf.h> // XDP_PASS
#include <linux/in.h>

namespace morpheus::testing {
namespace {

constexpr unsigned Policies = 200; // more than inline-small-table takes whole

PacketSpec specFor(const policy_key &key) {
  PacketSpec spec;
  spec.daddr = ntohl(key.daddr);
  spec.dport = ntohs(key.dport);
  spec.protocol = key.proto;
  return spec;
}

policy_key keyNumber(unsigned i) {
  return policyKey(0x0a000001 + i, 80 + i % 4, IPPROTO_UDP);
}

class FollowTheTraffic : public ::testing::Test {
protected:
  void start(core::ProfileMode mode) {
    runtime::OptimizerOptions options;
    options.traffic.mode = mode;
    router.emplace(options);
    ASSERT_TRUE(router->ok());
    router->setConfig(CFG_POLICY_ENABLED, ACTION_PASS);
    for (unsigned i = 0; i < Policies; ++i)
      router->setPolicy(keyNumber(i), policyValue(i % 2 ? ACTION_TX : ACTION_DROP, uint8_t(i)));
  }

  runtime::PacketResult run(int fd, const Bytes &packet) {
    auto result = runtime::runPacket(fd, bpf::ProgramType::Xdp, {packet, 0});
    EXPECT_THAT_EXPECTED(result, llvm::Succeeded());
    return result ? *result : runtime::PacketResult{};
  }

  // Sends `packets` through the running version; each must get what the
  // original gives it.
  void sendAndCompare(const std::vector<Bytes> &packets) {
    int active = router->opt().activeFd(), original = router->opt().originalFd();
    for (size_t i = 0; i < packets.size(); ++i) {
      runtime::PacketResult got = run(active, packets[i]);
      runtime::PacketResult want = run(original, packets[i]);
      ASSERT_EQ(got.verdict, want.verdict) << "packet " << i;
      ASSERT_EQ(got.output, want.output) << "packet " << i;
    }
  }

  // `perHot` packets to each of the keys numbered in `hot`, one to each of
  // `cold` others.
  static std::vector<Bytes> traffic(const std::vector<unsigned> &hot, unsigned perHot,
                                    const std::vector<unsigned> &cold) {
    std::vector<Bytes> packets;
    for (unsigned round = 0; round < perHot; ++round)
      for (unsigned key : hot)
        packets.push_back(buildPacket(specFor(keyNumber(key))));
    for (unsigned key : cold)
      packets.push_back(buildPacket(specFor(keyNumber(key))));
    return packets;
  }

  static const core::SiteDecision *decision(const runtime::CycleReport &report,
                                            const std::string &pass) {
    for (const core::SiteDecision &decision : report.log.decisions)
      if (decision.table == "policy" && decision.pass == pass)
        return &decision;
    return nullptr;
  }

  std::optional<PolicyFwd> router;
};

TEST_F(FollowTheTraffic, HeavyHittersGetAFastPathThatAnswersAsTheTable) {
  start(core::ProfileMode::Naive);
  runtime::CycleReport first = router->specialize();
  const core::SiteDecision *instrumented = decision(first, "instrument-table-sites");
  ASSERT_NE(instrumented, nullptr);
  EXPECT_TRUE(instrumented->applied) << instrumented->detail;
  EXPECT_EQ(decision(first, "heavy-hitter-fast-path"), nullptr); // nothing seen yet

  std::vector<unsigned> cold;
  for (unsigned i = 20; i < 30; ++i)
    cold.push_back(i);
  sendAndCompare(traffic({3, 7, 11}, 30, cold));
  runtime::CycleReport second = router->specialize();
  const core::SiteDecision *fastPath = decision(second, "heavy-hitter-fast-path");
  ASSERT_NE(fastPath, nullptr);
  EXPECT_TRUE(fastPath->applied) << fastPath->detail;
  EXPECT_EQ(fastPath->detail, "3 hot keys compared before the lookup");
  ASSERT_EQ(second.traffic.size(), 1u);
  const core::SiteTraffic &site = second.traffic.begin()->second;
  ASSERT_EQ(site.hotKeys.size(), 3u);
  EXPECT_EQ(site.period, 1u); // naive: every lookup
  std::set<Bytes> hot(site.hotKeys.begin(), site.hotKeys.end());
  for (unsigned key : {3u, 7u, 11u})
    EXPECT_TRUE(hot.count(bytesOf(keyNumber(key)))) << "key " << key;

  // Hot, cold, unknown: all as the original.
  std::vector<Bytes> mixed = traffic({3, 7, 11}, 2, {0, 1, 2, 150, 199});
  PacketSpec unknown = specFor(keyNumber(3));
  unknown.dport += 1000;
  mixed.push_back(buildPacket(unknown));
  sendAndCompare(mixed);

  // Traffic the fast path was not built for (a wrong hot set for it):
  // slower, never different.
  sendAndCompare(traffic({40, 41, 42}, 5, {}));

  // The control plane changes a hot key: the guard sends packets to the
  // generic code at once.
  router->setPolicy(keyNumber(7), policyValue(ACTION_PASS, 99));
  sendAndCompare(traffic({3, 7, 11}, 1, {}));
  EXPECT_EQ(run(router->opt().activeFd(), buildPacket(specFor(keyNumber(7)))).verdict,
            uint32_t(XDP_PASS));
}

TEST_F(FollowTheTraffic, UniformTrafficGetsNoFastPath) {
  start(core::ProfileMode::Naive);
  router->specialize();
  std::vector<unsigned> every;
  for (unsigned i = 0; i < Policies; ++i)
    every.push_back(i);
  sendAndCompare(traffic({}, 0, every));
  runtime::CycleReport report = router->opt().runCycle();
  EXPECT_EQ(decision(report, "heavy-hitter-fast-path"), nullptr);
  ASSERT_EQ(report.traffic.size(), 1u);
  EXPECT_TRUE(report.traffic.begin()->second.hotKeys.empty());
  EXPECT_EQ(report.traffic.begin()->second.why, "no set of hot keys pays for its compares");
}

TEST_F(FollowTheTraffic, AdaptiveSamplingFindsTheHeavyHitters) {
  start(core::ProfileMode::Adaptive);
  router->specialize();
  // Enough packets for the countdown to sample each key many times; the
  // keys alternate, which a fixed period would alias onto one of them.
  sendAndCompare(traffic({5, 9}, 2000, {}));
  runtime::CycleReport report = router->specialize();
  ASSERT_EQ(report.traffic.size(), 1u);
  const core::SiteTraffic &site = report.traffic.begin()->second;
  std::set<Bytes> hot(site.hotKeys.begin(), site.hotKeys.end());
  EXPECT_EQ(hot, (std::set<Bytes>{bytesOf(keyNumber(5)), bytesOf(keyNumber(9))}));
  const core::SiteDecision *fastPath = decision(report, "heavy-hitter-fast-path");
  ASSERT_NE(fastPath, nullptr);
  EXPECT_TRUE(fastPath->applied) << fastPath->detail;
  sendAndCompare(traffic({5, 9}, 3, {1, 2, 3}));
}

TEST_F(FollowTheTraffic, NoProfileLeavesATableAlone) {
  runtime::OptimizerOptions options;
  options.traffic.mode = core::ProfileMode::Naive;
  options.notProfiled = {"policy"};
  router.emplace(options);
  ASSERT_TRUE(router->ok());
  router->setConfig(CFG_POLICY_ENABLED, ACTION_PASS);
  for (unsigned i = 0; i < Policies; ++i)
    router->setPolicy(keyNumber(i), policyValue(ACTION_TX, uint8_t(i)));
  runtime::CycleReport report = router->specialize();
  const core::SiteDecision *instrumented = decision(report, "instrument-table-sites");
  ASSERT_NE(instrumented, nullptr);
  EXPECT_FALSE(instrumented->applied);
  EXPECT_TRUE(report.log.profiled.empty());
}

} // namespace
} // namespace morpheus::testing
