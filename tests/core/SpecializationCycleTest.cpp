// The one specialization cycle (core/SpecializationCycle.h) and what it
// decides from the traffic (core/TrafficFollowing.h), on a backend and a
// data plane made of plain fields: the order of the steps, every outcome,
// the hot keys a version is built with, when write counts are read, and
// which sites sample. The eBPF and user-space backends run this same code
// (tests/kernel, tests/user show it on real data planes).
#include "core/SpecializationCycle.h"

#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>

#include <functional>

using namespace morpheus;
using namespace morpheus::core;

namespace {

Bytes key(uint8_t n) { return Bytes{n, 0, 0, 0}; }

// A data plane's samples and counters, set by the test.
struct FakeTraffic : TrafficSource {
  std::map<unsigned, std::vector<Bytes>> pending; // per site, read once
  std::map<unsigned, uint32_t> periods;
  std::map<uint32_t, uint64_t> counts;
  unsigned countReads = 0;
  bool genericCounts = true;
  unsigned cpu = 0; // the CPU every sample comes from

  Expected<std::vector<Samples>> samples(unsigned site, uint32_t) override {
    std::vector<Samples> cpus(1);
    cpus[0].cpu = cpu;
    cpus[0].keys = std::exchange(pending[site], {});
    cpus[0].written = cpus[0].keys.size();
    cpus[0].period = 1;
    return cpus;
  }
  Error setPeriod(unsigned site, uint32_t period) override {
    periods[site] = period;
    return Error::success();
  }
  unsigned writeBucketBits() const override { return 12; }
  Expected<uint64_t> writeCount(uint32_t bucket) override {
    ++countReads;
    return counts[bucket];
  }
  bool genericCountsWrites() const override { return genericCounts; }
};

struct FakeCandidate : CycleCandidate {
  TrafficChoice traffic;
};

// A backend whose every step the test can watch and steer.
struct FakeBackend : CycleBackend {
  uint64_t version = 1;
  bool changing = false;
  TableCatalog tables{{"flows", {"flows", "hash", TableMatch::Exact}}};
  std::vector<std::string> steps;
  ReadPlan lastPlan;
  TrafficChoice built, installed;
  bool fits = false, refuse = false;
  std::map<unsigned, ProfiledSite> profiled{{7, {"flows", 4, std::nullopt}}};
  std::map<unsigned, FastPathKeys> chains; // what a version's fast paths compare
  std::function<void()> duringBuild = [] {};

  uint64_t guardVersion() const override { return version; }
  bool guardChanging() const override { return changing; }
  const TableCatalog &catalog() const override { return tables; }
  ReadPlan readPlan() const override { return {{"flows", {}}}; }
  std::optional<TableSnapshot> readTables(const ReadPlan &plan, CycleReport &) override {
    steps.push_back("read");
    lastPlan = plan;
    return TableSnapshot{};
  }
  bool installedFits(const TableSnapshot &, const CycleReport &) const override { return fits; }
  std::unique_ptr<CycleCandidate> buildCandidate(TableSnapshot &, const TrafficChoice &traffic,
                                                 CycleReport &report) override {
    steps.push_back("build");
    built = traffic;
    report.log.profiled = profiled;
    report.log.fastPaths = chains;
    duringBuild();
    auto candidate = std::make_unique<FakeCandidate>();
    candidate->traffic = traffic;
    return candidate;
  }
  bool validateCandidate(const CycleCandidate &, const TableSnapshot &,
                         CycleReport &report) override {
    steps.push_back("validate");
    if (refuse)
      report.end(CycleOutcome::Refused, "differs");
    return !refuse;
  }
  Error installCandidate(std::unique_ptr<CycleCandidate> candidate, TableSnapshot,
                         CycleReport &) override {
    steps.push_back("install");
    installed = static_cast<FakeCandidate &>(*candidate).traffic;
    return Error::success();
  }
};

TrafficProfileOptions adaptive() {
  TrafficProfileOptions options;
  options.perCpuChains = false;
  return options;
}

} // namespace

TEST(SpecializationCycle, StepsRunInOrderAndEveryOutcomeIsReported) {
  FakeBackend backend;
  SpecializationCycle cycle(backend, adaptive(), nullptr);
  CycleReport first = cycle.run();
  EXPECT_EQ(first.outcome, CycleOutcome::Installed) << first.describe();
  EXPECT_EQ(backend.steps, (std::vector<std::string>{"read", "build", "validate", "install"}));
  EXPECT_EQ(first.version, 1u);

  backend.steps.clear();
  backend.fits = true;
  EXPECT_EQ(cycle.run().outcome, CycleOutcome::Unchanged);
  EXPECT_EQ(backend.steps, std::vector<std::string>{"read"});
  EXPECT_EQ(cycle.run(/*force=*/true).outcome, CycleOutcome::Installed);

  backend.changing = true;
  backend.steps.clear();
  CycleReport deferred = cycle.run();
  EXPECT_EQ(deferred.outcome, CycleOutcome::Deferred);
  EXPECT_TRUE(backend.steps.empty()); // nothing read while a change is in progress
  backend.changing = false;

  backend.fits = false;
  backend.duringBuild = [&] { ++backend.version; };
  backend.steps.clear();
  CycleReport superseded = cycle.run();
  EXPECT_EQ(superseded.outcome, CycleOutcome::Superseded);
  EXPECT_EQ(backend.steps, (std::vector<std::string>{"read", "build"})); // never validated
  backend.duringBuild = [] {};

  backend.refuse = true;
  backend.steps.clear();
  CycleReport refused = cycle.run();
  EXPECT_EQ(refused.outcome, CycleOutcome::Refused);
  EXPECT_EQ(refused.detail, "differs");
  EXPECT_EQ(backend.steps, (std::vector<std::string>{"read", "build", "validate"}));
  EXPECT_EQ(cycle.cycles(), 6u);
}

// What the installed version's sites sampled decides the next version's
// hot keys: probed with the tables, passed to the build, remembered as the
// installed choice (an unchanged choice and fitting tables build nothing).
TEST(SpecializationCycle, TheHeavyHittersGoToTheNextVersionAndItsProbes) {
  FakeBackend backend;
  FakeTraffic traffic;
  SpecializationCycle cycle(backend, adaptive(), &traffic);
  ASSERT_EQ(cycle.run().outcome, CycleOutcome::Installed);
  // The version records site 7: it samples from before it ran.
  EXPECT_EQ(traffic.periods.at(7), adaptive().initialPeriod);

  traffic.pending[7] = std::vector<Bytes>(60, key(1));
  for (int i = 0; i < 4; ++i)
    traffic.pending[7].push_back(key(uint8_t(10 + i)));
  CycleReport followed = cycle.run();
  ASSERT_EQ(followed.outcome, CycleOutcome::Installed) << followed.describe();
  ASSERT_TRUE(followed.traffic.count(7));
  ASSERT_EQ(backend.built.hotKeys.at(7).front(), key(1)) << followed.traffic.at(7).why;
  EXPECT_EQ(backend.lastPlan.at("flows").keys.front(), key(1)); // its answer probed
  EXPECT_EQ(backend.installed, cycle.traffic().installedChoice());
  // Every version counts writes: the hot key's bucket was read before the tables.
  EXPECT_EQ(followed.writeCounts.size(), 1u);

  // A version that no longer records the site stops its sampling.
  backend.profiled.clear();
  traffic.pending[7] = std::vector<Bytes>(60, key(1));
  ASSERT_EQ(cycle.run().outcome, CycleOutcome::Installed);
  EXPECT_EQ(traffic.periods.at(7), 0u);
}

// When the generic code counts no writes (the eBPF backend's original),
// counts are read only once a counting version has run a whole period:
// never in the cycle that installs the first one.
TEST(SpecializationCycle, WriteCountsWaitForAVersionThatCountsWhenTheGenericCodeDoesNot) {
  FakeBackend backend;
  FakeTraffic traffic;
  traffic.genericCounts = false;
  SpecializationCycle cycle(backend, adaptive(), &traffic);
  traffic.pending[7] = std::vector<Bytes>(64, key(1));
  ASSERT_EQ(cycle.run().outcome, CycleOutcome::Installed); // cycle 1 installs the first
  traffic.pending[7] = std::vector<Bytes>(64, key(1));
  CycleReport second = cycle.run();
  ASSERT_FALSE(backend.built.hotKeys.empty()) << second.traffic.at(7).why;
  EXPECT_FALSE(second.writeCounts.empty()); // cycle 2 > cycle 1: counted a whole period
}

// A write of a hot key the installed fast path answers (its bucket's count
// moved since the version was built) counts as churn for that site.
TEST(SpecializationCycle, AWriteOfAnAnsweredHotKeyIsChurn) {
  FakeBackend backend;
  FakeTraffic traffic;
  TrafficProfileOptions options = adaptive();
  options.churnCycles = 1;
  SpecializationCycle cycle(backend, options, &traffic);
  ASSERT_EQ(cycle.run().outcome, CycleOutcome::Installed);
  traffic.pending[7] = std::vector<Bytes>(64, key(1));
  ASSERT_EQ(cycle.run().outcome, CycleOutcome::Installed);
  ASSERT_FALSE(backend.installed.hotKeys.empty());
  for (auto &[bucket, count] : traffic.counts)
    ++count; // the data plane wrote the hot key
  traffic.pending[7] = std::vector<Bytes>(64, key(1));
  CycleReport churned = cycle.run();
  ASSERT_TRUE(churned.traffic.count(7));
  EXPECT_TRUE(churned.traffic.at(7).churning) << churned.traffic.at(7).why;
  EXPECT_TRUE(backend.built.hotKeys.empty());
}

// The installed fast path's hits, as its site's samples tell: a sampled
// key is a hit when the chain its CPU takes compares it (a CPU with a chain
// of its own takes that one). A version without a fast path, or a period
// without samples, has no figure.
TEST(SpecializationCycle, FastPathHitsAreTheShareOfSampledKeysTheChainCompares) {
  FakeBackend backend;
  FakeTraffic traffic;
  SpecializationCycle cycle(backend, adaptive(), &traffic);
  ASSERT_EQ(cycle.run().outcome, CycleOutcome::Installed);
  traffic.pending[7] = std::vector<Bytes>(64, key(1));
  CycleReport noChain = cycle.run();
  EXPECT_TRUE(noChain.fastPathHits.empty()) << "the version sampled has no fast path";

  // From here on, versions compare key 1 for every CPU, key 2 on CPU 1.
  backend.chains = {{7, {{key(1)}, {{1, {key(2)}}}}}};
  traffic.pending[7] = std::vector<Bytes>(64, key(1));
  ASSERT_EQ(cycle.run().outcome, CycleOutcome::Installed);
  for (int i = 0; i < 10; ++i) {
    for (int hot = 0; hot < 3; ++hot)
      traffic.pending[7].push_back(key(1));
    traffic.pending[7].push_back(key(uint8_t(20 + i)));
  }
  CycleReport onCpu0 = cycle.run();
  ASSERT_EQ(onCpu0.fastPathHits.count(7), 1u);
  const FastPathHits &hits = onCpu0.fastPathHits.at(7);
  EXPECT_EQ(hits.table, "flows");
  EXPECT_EQ(hits.samples, 40u);
  EXPECT_DOUBLE_EQ(hits.ratio(), 0.75) << "30 of 40 sampled keys are key 1";

  traffic.cpu = 1;
  traffic.pending[7] = std::vector<Bytes>(15, key(2));
  for (int i = 0; i < 5; ++i)
    traffic.pending[7].push_back(key(1));
  CycleReport onCpu1 = cycle.run();
  ASSERT_EQ(onCpu1.fastPathHits.count(7), 1u);
  EXPECT_DOUBLE_EQ(onCpu1.fastPathHits.at(7).ratio(), 0.75)
      << "CPU 1 takes its own chain: key 2 hits, key 1 misses";

  CycleReport idle = cycle.run();
  EXPECT_TRUE(idle.fastPathHits.empty()) << "nothing sampled, no figure";
}
