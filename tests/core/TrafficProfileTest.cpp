// The traffic profile's decisions, in user space alone: fast-path sizing by
// benefit, merging CPUs, ageing, adaptive periods and churn.
#include "core/TrafficProfile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

using namespace morpheus::core;

namespace {

Bytes key(uint8_t n) { return Bytes{n, 0, 0, 0}; }

// `hot` keys each taking `share` of the samples, the rest spread thinly.
std::vector<Bytes> skewed(size_t hot, double share, size_t total, uint8_t base = 0) {
  std::vector<Bytes> keys;
  for (size_t i = 0; i < total; ++i) {
    size_t hotSamples = size_t(share * double(total));
    keys.push_back(i < hot * hotSamples ? key(uint8_t(base + i % hot))
                                        : Bytes{uint8_t(i), uint8_t(i >> 8), 1, 1});
  }
  return keys;
}

} // namespace

TEST(FastPathSize, UniformTrafficGetsNoFastPath) {
  std::vector<double> shares(16, 1.0 / 10000);
  EXPECT_EQ(fastPathSize(shares, 0.4, 29, 1.0, 16), 0u);
}

TEST(FastPathSize, SkewedTrafficGetsTheKeysThatPay) {
  // Ten keys with 9% each: all ten pay for a 29 ns hash lookup.
  std::vector<double> shares(10, 0.09);
  shares.push_back(0.0001);
  EXPECT_EQ(fastPathSize(shares, 0.4, 29, 1.0, 16), 10u);
  // Against an array lookup the verifier inlines (0.6 ns) nothing pays.
  EXPECT_EQ(fastPathSize(shares, 0.4, 0.6, 1.0, 16), 0u);
  // The limit bounds it.
  EXPECT_EQ(fastPathSize(shares, 0.4, 29, 1.0, 4), 4u);
}

TEST(TrafficProfile, MergesCpusAndKeepsPerCpuViews) {
  TrafficProfile profile;
  profile.beginCycle();
  profile.add(3, 0, {key(1), key(1)}, 10, 2);
  profile.add(3, 1, {key(2)}, 10, 1);
  EXPECT_EQ(profile.counts(3).at(key(1)), 20);
  EXPECT_EQ(profile.counts(3).at(key(2)), 10);
  EXPECT_EQ(profile.countsOn(3, 1).count(key(1)), 0u);
  EXPECT_EQ(profile.countsOn(3, 1).at(key(2)), 10);
}

TEST(TrafficProfile, CountsAgeEachCycle) {
  TrafficProfile profile;
  profile.beginCycle();
  profile.add(0, 0, {key(1)}, 8, 1);
  profile.beginCycle();
  EXPECT_EQ(profile.counts(0).at(key(1)), 4);
  profile.beginCycle();
  profile.beginCycle();
  profile.beginCycle(); // 0.5 < 1: forgotten
  EXPECT_EQ(profile.counts(0).count(key(1)), 0u);
}

TEST(TrafficProfile, HotKeysFirstEqualCountsNeverMerged) {
  TrafficProfile profile;
  profile.beginCycle();
  profile.add(0, 0, skewed(4, 0.2, 200), 1, 200);
  SiteTraffic traffic = profile.decide(0, TableMatch::Exact, 4);
  ASSERT_EQ(traffic.hotKeys.size(), 4u);
  // Equal counts: by key, each its own entry.
  EXPECT_EQ(traffic.hotKeys[0], key(0));
  EXPECT_EQ(traffic.hotKeys[3], key(3));
}

TEST(TrafficProfile, PeriodRisesWhileStableAndFallsOnAShift) {
  TrafficProfile profile;
  uint32_t start = profile.initialPeriod();
  uint32_t period = start;
  // The first cycle finds a hot set where there was none: a shift.
  for (int cycle = 0; cycle < 6; ++cycle) {
    profile.beginCycle();
    profile.add(0, 0, skewed(4, 0.2, 64), period, 64);
    period = profile.decide(0, TableMatch::Exact, 4).period;
  }
  EXPECT_GT(period, start);
  uint32_t stablePeriod = period;
  profile.beginCycle();
  // A new hot set, many times the old one's weight.
  for (int i = 0; i < 10; ++i)
    profile.add(0, 0, skewed(4, 0.2, 64, 100), period, 64);
  SiteTraffic shifted = profile.decide(0, TableMatch::Exact, 4);
  EXPECT_LT(shifted.period, stablePeriod);
}

// The sampling-rate sweep holds a period by bounding it on both sides:
// neither a stable hot set, nor a shift, nor samples filling the slots
// move it.
TEST(TrafficProfile, APeriodBoundedOnBothSidesHolds) {
  TrafficProfileOptions options;
  options.initialPeriod = options.minPeriod = options.maxPeriod = 16;
  TrafficProfile profile(options);
  for (int cycle = 0; cycle < 4; ++cycle) {
    profile.beginCycle();
    profile.add(0, 0, skewed(4, 0.2, 64), 16, 64);
    EXPECT_EQ(profile.decide(0, TableMatch::Exact, 4).period, 16u) << "stable, cycle " << cycle;
  }
  profile.beginCycle();
  for (int i = 0; i < 10; ++i)
    profile.add(0, 0, skewed(4, 0.2, 64, 100), 16, 64);
  EXPECT_EQ(profile.decide(0, TableMatch::Exact, 4).period, 16u) << "shifted";
  profile.beginCycle();
  profile.add(0, 0, skewed(4, 0.2, 4), 16, 4);
  EXPECT_EQ(profile.decide(0, TableMatch::Exact, 4).period, 16u) << "few samples";
}

// The data plane keeps each CPU's last `slots` samples: a cycle that took
// 100 times as many shows only its last hundredth. The next period is the
// one that would have just filled the slots (x128, the power of two at or
// above 100), judged by the CPU that sampled most, not by the sum.
TEST(TrafficProfile, AnOverflowedRingJumpsToThePeriodThatFillsIt) {
  TrafficProfileOptions options;
  options.maxPeriod = 1u << 20;
  TrafficProfile profile(options);
  uint32_t start = profile.initialPeriod();
  profile.beginCycle();
  profile.add(0, 0, skewed(4, 0.2, 64), start, 100 * options.slots);
  profile.add(0, 1, skewed(4, 0.2, 64), start, 100 * options.slots);
  EXPECT_EQ(profile.decide(0, TableMatch::Exact, 4).period, start * 128);
  // Filled, no more: doubled, as before.
  TrafficProfile filled(options);
  filled.beginCycle();
  filled.add(0, 0, skewed(4, 0.2, 64), start, options.slots);
  EXPECT_EQ(filled.decide(0, TableMatch::Exact, 4).period, start * 2);
  // Capped by maxPeriod.
  TrafficProfile capped;
  capped.beginCycle();
  capped.add(0, 0, skewed(4, 0.2, 64), start, 1000 * options.slots);
  EXPECT_EQ(capped.decide(0, TableMatch::Exact, 4).period, capped.settings().maxPeriod);
}

// A hot set that only gains keys (one key seen in a short window, then the
// wider view finds three more) does not speed the sampling up; losing its
// keys does.
TEST(TrafficProfile, OnlyLosingHotKeysSpeedsTheSamplingUp) {
  TrafficProfileOptions options;
  options.decay = 0;
  TrafficProfile profile(options);
  uint32_t start = profile.initialPeriod();
  profile.beginCycle();
  profile.add(0, 0, skewed(1, 0.9, 64), start, options.slots);
  SiteTraffic first = profile.decide(0, TableMatch::Exact, 4);
  ASSERT_EQ(first.hotKeys.size(), 1u) << first.why;
  profile.beginCycle();
  profile.add(0, 0, skewed(4, 0.2, 64), first.period, options.slots);
  SiteTraffic grown = profile.decide(0, TableMatch::Exact, 4);
  ASSERT_EQ(grown.hotKeys.size(), 4u) << grown.why;
  EXPECT_GE(grown.period, first.period);
  profile.beginCycle();
  profile.add(0, 0, skewed(4, 0.2, 64, 100), grown.period, options.slots);
  SiteTraffic moved = profile.decide(0, TableMatch::Exact, 4);
  EXPECT_LT(moved.period, grown.period);
}

TEST(TrafficProfile, NaiveRecordsEveryLookup) {
  TrafficProfileOptions options;
  options.mode = ProfileMode::Naive;
  TrafficProfile profile(options);
  EXPECT_EQ(profile.initialPeriod(), 1u);
  profile.beginCycle();
  profile.add(0, 0, skewed(4, 0.2, 64), 1, 64);
  EXPECT_EQ(profile.decide(0, TableMatch::Exact, 4).period, 1u);
}

// A hot set that builds up over several cycles (as after a shift, while
// the aged counts of the old set fade) keeps its fast path: only keys lost
// count toward churn.
TEST(TrafficProfile, AHotSetThatOnlyGrowsIsNotChurn) {
  TrafficProfileOptions options;
  options.decay = 0;
  TrafficProfile profile(options);
  for (size_t hot = 1; hot <= 4 + options.churnCycles; ++hot) {
    profile.beginCycle();
    profile.add(0, 0, skewed(hot, 0.9 / double(hot), 200), 1, 200);
    SiteTraffic traffic = profile.decide(0, TableMatch::Exact, 4);
    EXPECT_FALSE(traffic.churning) << hot << " hot keys";
    EXPECT_EQ(traffic.hotKeys.size(), hot) << traffic.why;
  }
}

TEST(TrafficProfile, ChurnDropsTheFastPathUntilTrafficCalms) {
  TrafficProfileOptions options;
  options.decay = 0; // each cycle sees only its own samples
  TrafficProfile profile(options);
  SiteTraffic traffic;
  uint8_t base = 0;
  for (unsigned cycle = 0; cycle <= options.churnCycles; ++cycle, base += 10) {
    profile.beginCycle();
    profile.add(0, 0, skewed(4, 0.2, 100, base), 1, 100);
    traffic = profile.decide(0, TableMatch::Exact, 4);
  }
  EXPECT_TRUE(traffic.churning);
  EXPECT_TRUE(traffic.hotKeys.empty());
  EXPECT_NE(traffic.why.find("changed"), std::string::npos);
  // The first calm cycle is one more shift; then it holds still.
  for (unsigned cycle = 0; cycle <= options.calmCycles; ++cycle) {
    profile.beginCycle();
    profile.add(0, 0, skewed(4, 0.2, 100, base), 1, 100);
    traffic = profile.decide(0, TableMatch::Exact, 4);
  }
  EXPECT_FALSE(traffic.churning);
  EXPECT_EQ(traffic.hotKeys.size(), 4u);
}

// Per-entry write guards that fire every cycle (the data plane rewrites a
// hot key faster than the period) count as churn, through the same rule:
// the fast path goes after churnCycles such cycles and comes back after
// calmCycles without.
TEST(TrafficProfile, WriteGuardsFiringEveryCycleDropTheFastPathUntilWritesCalm) {
  TrafficProfileOptions options;
  options.decay = 0;
  TrafficProfile profile(options);
  SiteTraffic traffic;
  for (unsigned cycle = 0; cycle < options.churnCycles; ++cycle) {
    profile.beginCycle();
    profile.add(0, 0, skewed(4, 0.2, 100), 1, 100);
    profile.writesInvalidated(0);
    traffic = profile.decide(0, TableMatch::Exact, 4);
  }
  EXPECT_TRUE(traffic.churning);
  EXPECT_TRUE(traffic.hotKeys.empty());
  EXPECT_NE(traffic.why.find("write guards fired"), std::string::npos) << traffic.why;
  EXPECT_NE(traffic.why.find("the data plane wrote a hot key"), std::string::npos);
  for (unsigned cycle = 0; cycle < options.calmCycles; ++cycle) {
    profile.beginCycle();
    profile.add(0, 0, skewed(4, 0.2, 100), 1, 100);
    traffic = profile.decide(0, TableMatch::Exact, 4);
  }
  EXPECT_FALSE(traffic.churning);
  EXPECT_EQ(traffic.hotKeys.size(), 4u);
}

// A guard firing now and then (fewer than churnCycles in a row) keeps it.
TEST(TrafficProfile, AnOccasionalWriteOfAHotKeyKeepsTheFastPath) {
  TrafficProfileOptions options;
  options.decay = 0;
  TrafficProfile profile(options);
  SiteTraffic traffic;
  for (unsigned cycle = 0; cycle < 3 * options.churnCycles; ++cycle) {
    profile.beginCycle();
    profile.add(0, 0, skewed(4, 0.2, 100), 1, 100);
    if (cycle % options.churnCycles == 0)
      profile.writesInvalidated(0);
    traffic = profile.decide(0, TableMatch::Exact, 4);
    EXPECT_FALSE(traffic.churning) << "cycle " << cycle;
  }
  EXPECT_EQ(traffic.hotKeys.size(), 4u);
}

// Different hot sets per CPU: ten keys hot on CPU 0, ten others on CPU 1.
// One chain would hold at most maxFastPath (16) of the twenty and make
// each CPU compare the other's keys; chains of their own pay for reading
// the CPU number many times over.
TEST(TrafficProfile, DifferentHotSetsPerCpuGetChainsOfTheirOwn) {
  TrafficProfile profile;
  profile.beginCycle();
  profile.add(0, 0, skewed(10, 0.09, 1000), 1, 1000);
  profile.add(0, 1, skewed(10, 0.09, 1000, 100), 1, 1000);
  SiteTraffic traffic = profile.decide(0, TableMatch::Exact, 4);
  ASSERT_EQ(traffic.perCpuHotKeys.size(), 2u) << traffic.why;
  std::set<Bytes> cpu0(traffic.perCpuHotKeys.at(0).begin(), traffic.perCpuHotKeys.at(0).end());
  std::set<Bytes> cpu1(traffic.perCpuHotKeys.at(1).begin(), traffic.perCpuHotKeys.at(1).end());
  std::set<Bytes> want0, want1;
  for (uint8_t i = 0; i < 10; ++i) {
    want0.insert(key(i));
    want1.insert(key(uint8_t(100 + i)));
  }
  EXPECT_EQ(cpu0, want0);
  EXPECT_EQ(cpu1, want1);
  EXPECT_NE(traffic.why.find("2 CPUs with chains of their own"), std::string::npos)
      << traffic.why;
  // The global chain stays, for CPUs without a chain of their own.
  EXPECT_FALSE(traffic.hotKeys.empty());
}

// The same hot set on both CPUs: one chain serves both.
TEST(TrafficProfile, TheSameHotSetOnEveryCpuKeepsOneChain) {
  TrafficProfile profile;
  profile.beginCycle();
  profile.add(0, 0, skewed(4, 0.2, 200), 1, 200);
  profile.add(0, 1, skewed(4, 0.2, 200), 1, 200);
  SiteTraffic traffic = profile.decide(0, TableMatch::Exact, 4);
  EXPECT_TRUE(traffic.perCpuHotKeys.empty());
  EXPECT_EQ(traffic.hotKeys.size(), 4u);
  EXPECT_NE(traffic.why.find("the CPUs' hot sets agree"), std::string::npos) << traffic.why;
}

// Hot sets that differ by one key of four: chains of their own would save
// less than reading the CPU number costs.
TEST(TrafficProfile, HotSetsThatBarelyDifferKeepOneChain) {
  TrafficProfile profile;
  profile.beginCycle();
  std::vector<Bytes> cpu1 = skewed(4, 0.2, 200);
  std::replace(cpu1.begin(), cpu1.end(), key(3), key(9));
  profile.add(0, 0, skewed(4, 0.2, 200), 1, 200);
  profile.add(0, 1, cpu1, 1, 200);
  SiteTraffic traffic = profile.decide(0, TableMatch::Exact, 4);
  EXPECT_TRUE(traffic.perCpuHotKeys.empty());
  EXPECT_EQ(traffic.hotKeys.size(), 5u);
  EXPECT_NE(traffic.why.find("per-CPU chains would save"), std::string::npos) << traffic.why;
}

// A flow's tuples (flow-fast-path) are sized by the saving a hit is
// predicted, not by a table's lookup: the same skewed samples (each CPU
// its own three tuples) get all six against a 60 ns region and none against
// one that saves less than their compares; no per-CPU chains either way.
TEST(TrafficProfile, AFlowIsSizedByWhatItsCopiesSave) {
  for (auto [saving, expected] : {std::pair{60.0, size_t(6)}, std::pair{0.5, size_t(0)}}) {
    TrafficProfile profile;
    profile.beginCycle();
    profile.add(24, 0, skewed(3, 0.3, 100), 1, 100);
    profile.add(24, 1, skewed(3, 0.3, 100, 3), 1, 100);
    SiteTraffic decision = profile.decideFlow(24, saving, 18);
    EXPECT_EQ(decision.hotKeys.size(), expected) << "saving " << saving << ": " << decision.why;
    EXPECT_TRUE(decision.perCpuHotKeys.empty());
  }
}
