// Following the traffic: instrumented lookups record keys, the optimizer
// counts them and puts the heavy hitters in front of the lookup. Whatever
// the traffic and whatever the hot set, every packet gets exactly what the
// original program gives it; the profile only decides speed. Tables the
// program itself writes (WrittenTable) too: a data-plane write of a hot key
// is seen by the next packet, new flows leave the fast path in place.
#include "PolicyFwd.h"

#include "backend/bpf/Frontend.h"
#include "core/WriteGuards.h"
#include "runtime/PacketSamples.h"
#include "support/CpuPin.h"

#include <bpf/bpf.h>
#include <linux/bpf.h> // XDP_PASS
#include <linux/in.h>

#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <set>
#include <thread>

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
    auto result = runtime::runPacket(fd, bpf::ProgramType::Xdp, {.packet = packet});
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

  static const core::SiteDecision *decision(const core::CycleReport &report,
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
  core::CycleReport first = router->specialize();
  const core::SiteDecision *instrumented = decision(first, "instrument-table-sites");
  ASSERT_NE(instrumented, nullptr);
  EXPECT_TRUE(instrumented->applied) << instrumented->detail;
  EXPECT_EQ(decision(first, "heavy-hitter-fast-path"), nullptr); // nothing seen yet

  std::vector<unsigned> cold;
  for (unsigned i = 20; i < 30; ++i)
    cold.push_back(i);
  sendAndCompare(traffic({3, 7, 11}, 30, cold));
  core::CycleReport second = router->specialize();
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

// The calling thread pinned to one CPU while it lives (BPF_PROG_TEST_RUN
// runs the program on the caller's CPU); the previous affinity back after.
// Shared by the tests that put traffic or writes on a given CPU.
class OnCpu {
public:
  explicit OnCpu(int cpu) : pin(cpu) {
    EXPECT_TRUE(pin.ok()) << "could not pin to CPU " << cpu;
    EXPECT_EQ(sched_getcpu(), cpu) << "could not run on CPU " << cpu;
  }

private:
  CpuPin pin;
};

// Different hot keys on CPU 0 and CPU 1, ten each: twenty would not fit one
// chain (maxFastPath 16), and each CPU would compare the other's keys.
// Each CPU gets a chain of its own; on both CPUs every packet — its own hot
// keys, the other CPU's, cold and unknown keys — gets what the original
// gives it, and a hot key the control plane changes is seen by the next
// packet on both.
TEST_F(FollowTheTraffic, DifferentHotKeysPerCpuGetChainsOfTheirOwn) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
    GTEST_SKIP() << "needs two CPUs";
  start(core::ProfileMode::Naive);
  router->specialize();
  std::vector<unsigned> hotOn0, hotOn1;
  for (unsigned i = 1; i <= 10; ++i) {
    hotOn0.push_back(i);
    hotOn1.push_back(100 + i);
  }
  {
    OnCpu cpu(0);
    sendAndCompare(traffic(hotOn0, 30, {50, 51, 52}));
  }
  {
    OnCpu cpu(1);
    sendAndCompare(traffic(hotOn1, 30, {60, 61, 62}));
  }
  core::CycleReport report = router->specialize();
  ASSERT_EQ(report.traffic.size(), 1u);
  const core::SiteTraffic &site = report.traffic.begin()->second;
  ASSERT_EQ(site.perCpuHotKeys.size(), 2u) << site.why;
  auto keysOf = [](const std::vector<unsigned> &numbers) {
    std::set<Bytes> keys;
    for (unsigned number : numbers)
      keys.insert(bytesOf(keyNumber(number)));
    return keys;
  };
  const std::vector<Bytes> &chain0 = site.perCpuHotKeys.at(0), &chain1 = site.perCpuHotKeys.at(1);
  EXPECT_EQ(std::set<Bytes>(chain0.begin(), chain0.end()), keysOf(hotOn0));
  EXPECT_EQ(std::set<Bytes>(chain1.begin(), chain1.end()), keysOf(hotOn1));
  const core::SiteDecision *fastPath = decision(report, "heavy-hitter-fast-path");
  ASSERT_NE(fastPath, nullptr);
  EXPECT_TRUE(fastPath->applied) << fastPath->detail;
  EXPECT_EQ(fastPath->detail.rfind("per-CPU chains: CPU 0: 10 hot keys compared before the "
                                   "lookup; CPU 1: 10 hot keys compared before the lookup;",
                                   0),
            0u)
      << fastPath->detail;

  PacketSpec unknown = specFor(keyNumber(3));
  unknown.dport += 1000;
  for (int cpu : {0, 1}) {
    OnCpu on(cpu);
    std::vector<Bytes> mixed = traffic(hotOn0, 2, {0, 50, 60, 150, 199});
    std::vector<Bytes> other = traffic(hotOn1, 2, {});
    mixed.insert(mixed.end(), other.begin(), other.end());
    mixed.push_back(buildPacket(unknown));
    sendAndCompare(mixed);
  }

  // The control plane changes a hot key of each CPU: the next packet on
  // either CPU sees it.
  router->setPolicy(keyNumber(3), policyValue(ACTION_PASS, 77));
  router->setPolicy(keyNumber(105), policyValue(ACTION_PASS, 88));
  for (int cpu : {0, 1}) {
    OnCpu on(cpu);
    EXPECT_EQ(run(router->opt().activeFd(), buildPacket(specFor(keyNumber(3)))).verdict,
              uint32_t(XDP_PASS))
        << "CPU " << cpu;
    EXPECT_EQ(run(router->opt().activeFd(), buildPacket(specFor(keyNumber(105)))).verdict,
              uint32_t(XDP_PASS))
        << "CPU " << cpu;
    sendAndCompare(traffic({3, 105}, 1, {}));
  }
}

TEST_F(FollowTheTraffic, UniformTrafficGetsNoFastPath) {
  start(core::ProfileMode::Naive);
  router->specialize();
  std::vector<unsigned> every;
  for (unsigned i = 0; i < Policies; ++i)
    every.push_back(i);
  sendAndCompare(traffic({}, 0, every));
  core::CycleReport report = router->opt().runCycle();
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
  core::CycleReport report = router->specialize();
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
  core::CycleReport report = router->specialize();
  const core::SiteDecision *instrumented = decision(report, "instrument-table-sites");
  ASSERT_NE(instrumented, nullptr);
  EXPECT_FALSE(instrumented->applied);
  EXPECT_TRUE(report.log.profiled.empty());
}

// tests/kernel/learning.bpf.c: a flow table the program itself writes.
struct FlowKey {
  uint32_t addr, port;
};
struct Flow {
  uint32_t verdict, learned;
  uint64_t updates;
};
enum : uint32_t { Look = 0, Learn = 1, Forget = 2 };
constexpr uint32_t Flows = 300; // more than inline-small-table takes whole

class WrittenTable : public ::testing::Test {
protected:
  void SetUp() override {
    runtime::OptimizerOptions options;
    options.traffic.mode = core::ProfileMode::Naive;
    auto created =
        runtime::Optimizer::create(sourcePath("tests/kernel/learning.bpf.c"), options);
    ASSERT_THAT_EXPECTED(created, llvm::Succeeded());
    opt = std::move(*created);
    // Filled before the first cycle, as a control plane would.
    for (uint32_t addr = 0; addr < Flows; ++addr) {
      FlowKey key{addr, 80};
      Flow flow{addr % 2 ? uint32_t(XDP_DROP) : uint32_t(XDP_TX), 0, 0};
      ASSERT_EQ(bpf_map_update_elem(opt->mapFd("flows"), &key, &flow, BPF_ANY), 0);
      verdicts[addr] = flow.verdict;
    }
  }

  uint32_t send(uint32_t op, uint32_t addr, uint32_t verdict = 0) {
    Bytes packet(64, 0);
    uint32_t words[4] = {op, addr, 80, verdict};
    std::memcpy(packet.data(), words, sizeof(words));
    auto result = runtime::runPacket(opt->activeFd(), bpf::ProgramType::Xdp, {.packet = packet});
    EXPECT_THAT_EXPECTED(result, llvm::Succeeded());
    return result ? result->verdict : ~0u;
  }

  // What the flow table says, as the program's lookup answers it.
  uint32_t expected(uint32_t addr) const {
    auto it = verdicts.find(addr);
    return it == verdicts.end() ? uint32_t(XDP_PASS) : it->second;
  }

  void lookAll(const std::vector<uint32_t> &addrs, unsigned rounds) {
    for (unsigned round = 0; round < rounds; ++round)
      for (uint32_t addr : addrs)
        ASSERT_EQ(send(Look, addr), expected(addr)) << "flow " << addr;
  }

  static uint32_t bucketOf(uint32_t addr) {
    FlowKey key{addr, 80};
    Bytes bytes(sizeof(key));
    std::memcpy(bytes.data(), &key, sizeof(key));
    return core::writeBucket("flows", bytes, bpf::WriteBucketBits, true);
  }

  uint64_t writeCount(uint32_t bucket) {
    uint64_t count = 0;
    EXPECT_EQ(bpf_map_lookup_elem(opt->mapFd(bpf::WritesMapName), &bucket, &count), 0);
    return count;
  }

  // A first cycle, then `hot` looked up 30 times each: the next cycle
  // builds their fast path.
  void buildFastPathFor(const std::vector<uint32_t> &hot) {
    ASSERT_TRUE(opt->runCycle().installed());
    lookAll(hot, 30);
    core::CycleReport built = opt->runCycle();
    ASSERT_TRUE(built.installed()) << built.describe();
    ASSERT_NE(fastPath(built), nullptr) << built.log.toText();
  }

  const core::SiteDecision *fastPath(const core::CycleReport &report) {
    for (const core::SiteDecision &decision : report.log.decisions)
      if (decision.table == "flows" && decision.pass == "heavy-hitter-fast-path" &&
          decision.applied)
        return &decision;
    return nullptr;
  }

  std::unique_ptr<runtime::Optimizer> opt;
  std::map<uint32_t, uint32_t> verdicts;
};

TEST_F(WrittenTable, AWriteOfAHotKeyIsSeenByTheNextPacketAndNewFlowsLeaveTheFastPath) {
  core::CycleReport first = opt->runCycle();
  ASSERT_TRUE(first.installed()) << first.describe();
  EXPECT_EQ(fastPath(first), nullptr); // nothing seen yet
  // 900 is a flow the table does not hold: answered "absent" under its count.
  std::vector<uint32_t> hot = {3, 7, 11, 900};
  lookAll(hot, 30);
  lookAll({20, 21, 22, 23, 24, 25}, 1);
  core::CycleReport second = opt->runCycle();
  ASSERT_TRUE(second.installed()) << second.describe();
  const core::SiteDecision *decision = fastPath(second);
  ASSERT_NE(decision, nullptr) << second.log.toText();
  EXPECT_EQ(decision->detail, "3 hot keys compared before the lookup, 1 absent ones answered "
                              "null, each under its write count");
  lookAll(hot, 2);

  // New flows are inserted (their buckets are not the hot keys'): the hot
  // keys' counts stay, so their fast path stays.
  std::set<uint32_t> hotBuckets = {bucketOf(3), bucketOf(7), bucketOf(11), bucketOf(900)};
  std::map<uint32_t, uint64_t> before;
  for (uint32_t bucket : hotBuckets)
    before[bucket] = writeCount(bucket);
  unsigned learned = 0;
  for (uint32_t addr = 1000; learned < 20; ++addr) {
    if (hotBuckets.count(bucketOf(addr)))
      continue;
    ASSERT_EQ(send(Learn, addr, XDP_DROP), uint32_t(XDP_TX));
    verdicts[addr] = XDP_DROP;
    ++learned;
    ASSERT_EQ(send(Look, addr), uint32_t(XDP_DROP));
  }
  for (uint32_t bucket : hotBuckets)
    EXPECT_EQ(writeCount(bucket), before[bucket]) << "bucket " << bucket;
  lookAll(hot, 1);

  // The data plane changes a hot flow: the very next packet sees it.
  ASSERT_EQ(send(Learn, 7, XDP_PASS), uint32_t(XDP_TX));
  verdicts[7] = XDP_PASS;
  // Counted after each of its two stores (the verdict, the update count).
  EXPECT_EQ(writeCount(bucketOf(7)), before[bucketOf(7)] + 2);
  EXPECT_EQ(send(Look, 7), uint32_t(XDP_PASS));
  lookAll(hot, 1);
  // ... inserts the hot absent one: the next packet finds it.
  ASSERT_EQ(send(Look, 900), uint32_t(XDP_PASS));
  ASSERT_EQ(send(Learn, 900, XDP_DROP), uint32_t(XDP_TX));
  verdicts[900] = XDP_DROP;
  EXPECT_EQ(send(Look, 900), uint32_t(XDP_DROP));
  // ... and forgets one: the next packet finds it gone.
  ASSERT_EQ(send(Forget, 11), uint32_t(XDP_TX));
  verdicts.erase(11);
  EXPECT_EQ(send(Look, 11), uint32_t(XDP_PASS));
  lookAll(hot, 3);

  // The next cycle builds the fast path again under the new counts.
  core::CycleReport third = opt->runCycle();
  ASSERT_TRUE(third.installed()) << third.describe();
  EXPECT_NE(fastPath(third), nullptr) << third.log.toText();
  lookAll(hot, 2);
  ASSERT_EQ(send(Learn, 3, XDP_DROP), uint32_t(XDP_TX));
  verdicts[3] = XDP_DROP;
  EXPECT_EQ(send(Look, 3), uint32_t(XDP_DROP));

  // Traffic the fast path was not built for (a wrong hot set for it):
  // slower, never different.
  lookAll({40, 41, 42, 1000, 1001, 5000}, 3);
}

// Churn: a hot key the data plane rewrites every period takes the fast
// path away (TrafficProfile's churn rule, logged per site); calm periods
// bring it back. Packets are right all along.
TEST_F(WrittenTable, HotKeysRewrittenEveryPeriodLoseTheFastPathUntilWritesCalm) {
  std::vector<uint32_t> hot = {3, 7, 11};
  ASSERT_NO_FATAL_FAILURE(buildFastPathFor(hot));
  unsigned churnCycles = core::TrafficProfileOptions{}.churnCycles;
  core::CycleReport report;
  for (unsigned cycle = 0; cycle < churnCycles; ++cycle) {
    lookAll(hot, 30);
    uint32_t verdict = cycle % 2 ? uint32_t(XDP_DROP) : uint32_t(XDP_PASS);
    ASSERT_EQ(send(Learn, 7, verdict), uint32_t(XDP_TX));
    verdicts[7] = verdict;
    lookAll(hot, 1);
    report = opt->runCycle();
  }
  ASSERT_EQ(report.traffic.size(), 1u);
  const core::SiteTraffic &churned = report.traffic.begin()->second;
  EXPECT_TRUE(churned.churning) << churned.why;
  EXPECT_NE(churned.why.find("write guards fired"), std::string::npos) << churned.why;
  EXPECT_EQ(fastPath(report), nullptr) << report.log.toText();
  lookAll(hot, 2);
  // At most calmCycles cycles without writes bring it back (fewer when the
  // churn began before the loop above ended).
  unsigned calmCycles = core::TrafficProfileOptions{}.calmCycles;
  for (unsigned cycle = 0; cycle < calmCycles; ++cycle) {
    lookAll(hot, 30);
    report = opt->runCycle();
    ASSERT_EQ(report.traffic.size(), 1u);
    if (!report.traffic.begin()->second.churning)
      break;
  }
  EXPECT_FALSE(report.traffic.begin()->second.churning);
  EXPECT_TRUE(report.installed()) << report.describe();
  EXPECT_NE(fastPath(report), nullptr) << report.describe() << report.log.toText();
  lookAll(hot, 2);
}

// The lookup whose value the program writes keeps its search (the write
// must reach the entry), and is the one whose writes are counted.
TEST_F(WrittenTable, TheLookupWrittenThroughKeepsItsSearch) {
  core::CycleReport first = opt->runCycle();
  ASSERT_TRUE(first.installed()) << first.describe();
  unsigned counted = 0, declined = 0;
  for (const core::SiteDecision &decision : first.log.decisions) {
    if (decision.table != "flows")
      continue;
    if (decision.pass == "guard-table-writes" && decision.applied)
      ++counted;
    if (decision.pass == "analysis" &&
        decision.detail.find("writes through this lookup's value") != std::string::npos)
      ++declined;
  }
  EXPECT_EQ(counted, 3u) << first.log.toText(); // the written-through lookup, insert, delete
  EXPECT_EQ(declined, 1u) << first.log.toText();
  lookAll({5}, 3);
  ASSERT_EQ(send(Learn, 5, XDP_PASS), uint32_t(XDP_TX));
  verdicts[5] = XDP_PASS;
  lookAll({5}, 3);
  Flow flow{};
  FlowKey key{5, 80};
  ASSERT_EQ(bpf_map_lookup_elem(opt->mapFd("flows"), &key, &flow), 0);
  EXPECT_EQ(flow.updates, 1u);
}

// The data plane rewrites a hot key on one CPU while the other CPU looks it
// up through the fast path. Each write bumps the key's count after the
// store, and the count only grows, so a reader never goes back: once it has
// seen a value it never again sees an older one (the snapshot's included),
// and once the writer is done both CPUs see its last value.
TEST_F(WrittenTable, AHotKeyRewrittenOnOneCpuWhileTheOtherLooksItUpNeverGoesBack) {
  std::vector<uint32_t> hot = {3, 7, 11};
  ASSERT_NO_FATAL_FAILURE(buildFastPathFor(hot));

  constexpr uint32_t First = 1000, Writes = 3000; // verdicts 1001..4000, above any XDP action
  std::atomic<bool> writing{true};
  std::atomic<unsigned> wentBack{0}, strange{0}, reads{0};
  uint32_t before = verdicts[7];
  std::thread reader([&] {
    OnCpu on(1);
    uint32_t last = before;
    while (writing.load()) {
      uint32_t seen = send(Look, 7);
      if (seen != before && (seen <= First || seen > First + Writes))
        ++strange;
      else if (last != before && (seen == before || seen < last))
        ++wentBack;
      last = seen;
      ++reads;
      if (send(Look, 3) != verdicts.at(3) || send(Look, 11) != verdicts.at(11))
        ++strange;
    }
  });
  std::thread writer([&] {
    OnCpu on(0);
    for (uint32_t i = 1; i <= Writes; ++i)
      EXPECT_EQ(send(Learn, 7, First + i), uint32_t(XDP_TX));
    writing = false;
  });
  writer.join();
  reader.join();
  EXPECT_EQ(wentBack.load(), 0u);
  EXPECT_EQ(strange.load(), 0u);
  EXPECT_GT(reads.load(), 0u);
  verdicts[7] = First + Writes;
  for (int cpu : {0, 1}) {
    std::thread look([&] {
      OnCpu on(cpu);
      lookAll(hot, 2);
    });
    look.join();
  }
}

// An LRU table the data plane fills past its size (learning_lru.bpf.c):
// inserts evict entries, hot ones included, and no write names them, so no
// fast path may answer for it (the analysis declines LRU tables). Whatever
// is evicted, every lookup answers what the table holds, as the original.
TEST(EvictingTable, NoFastPathAnswersForAnLruTableAndEvictionsChangeNoAnswer) {
  runtime::OptimizerOptions options;
  options.traffic.mode = core::ProfileMode::Naive;
  auto created =
      runtime::Optimizer::create(sourcePath("tests/kernel/learning_lru.bpf.c"), options);
  ASSERT_THAT_EXPECTED(created, llvm::Succeeded());
  std::unique_ptr<runtime::Optimizer> opt = std::move(*created);
  constexpr uint32_t Filled = 200; // of the table's 256
  for (uint32_t addr = 0; addr < Filled; ++addr) {
    FlowKey key{addr, 80};
    Flow flow{addr % 2 ? uint32_t(XDP_DROP) : uint32_t(XDP_TX), 0, 0};
    ASSERT_EQ(bpf_map_update_elem(opt->mapFd("flows"), &key, &flow, BPF_ANY), 0);
  }
  auto send = [](int fd, uint32_t op, uint32_t addr, uint32_t verdict = 0) {
    Bytes packet(64, 0);
    uint32_t words[4] = {op, addr, 80, verdict};
    std::memcpy(packet.data(), words, sizeof(words));
    auto result = runtime::runPacket(fd, bpf::ProgramType::Xdp, {.packet = packet});
    EXPECT_THAT_EXPECTED(result, llvm::Succeeded());
    return result ? result->verdict : ~0u;
  };
  // What the table holds: a lookup from user space sets no reference bit.
  auto held = [&](uint32_t addr) -> std::optional<uint32_t> {
    FlowKey key{addr, 80};
    Flow flow{};
    if (bpf_map_lookup_elem(opt->mapFd("flows"), &key, &flow) != 0)
      return std::nullopt;
    return flow.verdict;
  };
  auto lookAll = [&](const std::vector<uint32_t> &addrs, unsigned rounds) {
    for (unsigned round = 0; round < rounds; ++round)
      for (uint32_t addr : addrs) {
        uint32_t got = send(opt->activeFd(), Look, addr);
        ASSERT_EQ(got, held(addr).value_or(uint32_t(XDP_PASS))) << "flow " << addr;
        ASSERT_EQ(got, send(opt->originalFd(), Look, addr)) << "flow " << addr;
      }
  };
  // No fast path, ever: the first cycle says why; later ones sample no site
  // of the table, so what they install (if anything) has none either.
  auto fastPaths = [](const core::CycleReport &report) {
    unsigned built = 0;
    for (const core::SiteDecision &decision : report.log.decisions)
      built += decision.table == "flows" && decision.pass == "heavy-hitter-fast-path" &&
               decision.applied;
    return built;
  };
  core::CycleReport first = opt->runCycle();
  ASSERT_TRUE(first.installed()) << first.describe();
  EXPECT_NE(first.log.toText().find("lru_hash table: an insert may evict"), std::string::npos)
      << first.log.toText();
  EXPECT_EQ(fastPaths(first), 0u);
  for (const core::SiteDecision &decision : first.log.decisions)
    EXPECT_FALSE(decision.table == "flows" && decision.pass == "instrument-table-sites" &&
                 decision.applied)
        << "an LRU table's lookups are sampled: " << decision.detail;
  std::vector<uint32_t> hot = {3, 7, 11};
  lookAll(hot, 30);
  core::CycleReport profiled = opt->runCycle();
  ASSERT_TRUE(profiled.installed() || profiled.outcome == core::CycleOutcome::Unchanged)
      << profiled.describe();
  EXPECT_EQ(fastPaths(profiled), 0u) << profiled.log.toText();

  // The data plane learns 4,000 new flows, each looked up once, and two of
  // the hot ones between; the third, 7, not: the table evicts it with the
  // cold ones, and the next lookup of it must miss as the original's does.
  for (uint32_t addr = 1000; addr < 5000; ++addr) {
    ASSERT_EQ(send(opt->activeFd(), Learn, addr, XDP_DROP), uint32_t(XDP_TX));
    lookAll({addr}, 1); // referenced too: the LRU's active list turns over
    if (addr % 50 == 0)
      lookAll({3, 11}, 1);
  }
  unsigned kept = 0;
  for (uint32_t addr = 0; addr < Filled; ++addr)
    kept += held(addr).has_value();
  EXPECT_LT(kept, Filled); // the table evicted
  EXPECT_FALSE(held(7).has_value()); // evicted
  std::vector<uint32_t> sample;
  for (uint32_t addr = 0; addr < 5000; addr += 97)
    sample.push_back(addr);
  lookAll(sample, 1);
  lookAll(hot, 2);

  core::CycleReport after = opt->runCycle();
  ASSERT_TRUE(after.installed() || after.outcome == core::CycleOutcome::Unchanged)
      << after.describe();
  EXPECT_EQ(fastPaths(after), 0u) << after.log.toText();
  lookAll(hot, 2);
  lookAll(sample, 1);
}

} // namespace
} // namespace morpheus::testing
