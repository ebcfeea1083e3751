// The metrics registry (runtime/Metrics): the text of every kind of family,
// escaping, cumulative buckets, removal, registration refused, values
// Prometheus parses, and updates from many threads. The page served over
// HTTP and read by Prometheus's own parser is tested in MetricsServerTest.
#include "runtime/Metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>

#include <cmath>
#include <limits>
#include <thread>

namespace morpheus::runtime::metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(Metrics, EveryKindRendersWithHelpTypeAndEscapedLabels) {
  Registry registry;
  auto cycles =
      registry.counter("morpheus_cycles_total", "Cycles run, by outcome", {"program", "outcome"});
  ASSERT_THAT_EXPECTED(cycles, llvm::Succeeded());
  cycles->with({"fw", "installed"}).inc();
  cycles->with({"fw", "installed"}).inc(2);
  cycles->with({"fw", "failed"}).inc();
  cycles->with({"a\\b\"c\nd", "refused"}).inc(0.5);
  auto entries = registry.gauge("morpheus_map_entries",
                                "Entries of a table\nread when scraped, \\ and \" kept", {"map"});
  ASSERT_THAT_EXPECTED(entries, llvm::Succeeded());
  entries->with({"policy"}).set(12);
  entries->with({"routes"}).inc(5);
  entries->with({"routes"}).dec(2);
  auto seconds = registry.histogram("morpheus_cycle_seconds", "Duration of a cycle", {"program"},
                                    {0.25, 1, 2.5});
  ASSERT_THAT_EXPECTED(seconds, llvm::Succeeded());
  for (double observed : {0.125, 0.25, 0.5, 4.0})
    seconds->with({"fw"}).observe(observed);
  auto up = registry.gauge("morpheus_up", "1 while the agent runs");
  ASSERT_THAT_EXPECTED(up, llvm::Succeeded());

  // Families by name, children by label values; the label-less gauge is
  // there at 0 although nothing set it; 0.25 is counted in le="0.25"
  // (bounds are inclusive), and 2.5 repeats 1's count (cumulative).
  EXPECT_EQ(registry.exposition(), R"(# HELP morpheus_cycle_seconds Duration of a cycle
# TYPE morpheus_cycle_seconds histogram
morpheus_cycle_seconds_bucket{program="fw",le="0.25"} 2
morpheus_cycle_seconds_bucket{program="fw",le="1"} 3
morpheus_cycle_seconds_bucket{program="fw",le="2.5"} 3
morpheus_cycle_seconds_bucket{program="fw",le="+Inf"} 4
morpheus_cycle_seconds_sum{program="fw"} 4.875
morpheus_cycle_seconds_count{program="fw"} 4
# HELP morpheus_cycles_total Cycles run, by outcome
# TYPE morpheus_cycles_total counter
morpheus_cycles_total{program="a\\b\"c\nd",outcome="refused"} 0.5
morpheus_cycles_total{program="fw",outcome="failed"} 1
morpheus_cycles_total{program="fw",outcome="installed"} 3
# HELP morpheus_map_entries Entries of a table\nread when scraped, \\ and " kept
# TYPE morpheus_map_entries gauge
morpheus_map_entries{map="policy"} 12
morpheus_map_entries{map="routes"} 3
# HELP morpheus_up 1 while the agent runs
# TYPE morpheus_up gauge
morpheus_up 0
)");
}

TEST(Metrics, HistogramWithoutLabelsOrBoundsHasTheInfBucketAlone) {
  Registry registry;
  auto latency = registry.histogram("latency_seconds", "x", {}, {});
  ASSERT_THAT_EXPECTED(latency, llvm::Succeeded());
  latency->with({}).observe(2);
  latency->with({}).observe(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(registry.exposition(), R"(# HELP latency_seconds x
# TYPE latency_seconds histogram
latency_seconds_bucket{le="+Inf"} 2
latency_seconds_sum NaN
latency_seconds_count 2
)");
}

TEST(Metrics, RemoveWhereDropsOneProgramsChildrenOnly) {
  Registry registry;
  auto cycles = registry.counter("cycles_total", "c", {"program", "outcome"});
  auto seconds = registry.histogram("cycle_seconds", "s", {"program"}, {1});
  ASSERT_THAT_EXPECTED(cycles, llvm::Succeeded());
  ASSERT_THAT_EXPECTED(seconds, llvm::Succeeded());
  Counter fwInstalled = cycles->with({"fw", "installed"});
  fwInstalled.inc();
  cycles->with({"fw", "failed"}).inc();
  cycles->with({"lb", "installed"}).inc(7);
  seconds->with({"fw"}).observe(0.5);
  seconds->with({"lb"}).observe(2);

  EXPECT_EQ(cycles->removeWhere("program", "fw"), 2u) << "fw's two outcomes";
  EXPECT_EQ(seconds->removeWhere("program", "fw"), 1u);
  EXPECT_EQ(cycles->removeWhere("program", "fw"), 0u) << "nothing left of fw";
  // A handle kept from before counts on, exposed nowhere.
  fwInstalled.inc();
  EXPECT_EQ(registry.exposition(), R"(# HELP cycle_seconds s
# TYPE cycle_seconds histogram
cycle_seconds_bucket{program="lb",le="1"} 0
cycle_seconds_bucket{program="lb",le="+Inf"} 1
cycle_seconds_sum{program="lb"} 2
cycle_seconds_count{program="lb"} 1
# HELP cycles_total c
# TYPE cycles_total counter
cycles_total{program="lb",outcome="installed"} 7
)");

  // The program comes back: its children start from zero.
  cycles->with({"fw", "installed"});
  EXPECT_THAT(registry.exposition(),
              HasSubstr("cycles_total{program=\"fw\",outcome=\"installed\"} 0\n"));
  EXPECT_EQ(cycles->removeWhere("outcome", "installed"), 2u) << "by the second label too";
  EXPECT_THAT(registry.exposition(), Not(HasSubstr("cycles_total{")));
}

TEST(Metrics, ValuesAreWrittenAsPrometheusReadsThem) {
  EXPECT_EQ(formatValue(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(formatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(formatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(formatValue(0), "0");
  EXPECT_EQ(formatValue(-0.0), "0");
  EXPECT_EQ(formatValue(1000000), "1000000") << "integers in digits, not 1e+06";
  EXPECT_EQ(formatValue(-42), "-42");
  EXPECT_EQ(formatValue(9007199254740992.0), "9007199254740992") << "2^53";
  EXPECT_EQ(formatValue(1e21), "1e+21");
  EXPECT_EQ(formatValue(0.1), "0.1") << "shortest text that reads back the same";
  EXPECT_EQ(formatValue(-2.5), "-2.5");
  EXPECT_EQ(formatValue(1e-7), "1e-07");
  EXPECT_EQ(std::stod(formatValue(1.0 / 3)), 1.0 / 3) << "round trip";

  Registry registry;
  auto value = registry.gauge("value", "v");
  ASSERT_THAT_EXPECTED(value, llvm::Succeeded());
  value->with({}).set(-std::numeric_limits<double>::infinity());
  EXPECT_THAT(registry.exposition(), HasSubstr("\nvalue -Inf\n"));
}

TEST(Metrics, BadNamesAndShapesAreRefusedNamingTheMetric) {
  Registry registry;
  auto refusal = [](auto registered, const char *what) {
    EXPECT_THAT_EXPECTED(registered, llvm::FailedWithMessage(HasSubstr(what))) << what;
  };
  refusal(registry.counter("9lives", "h"), "metric '9lives': not a metric name");
  refusal(registry.counter("a-b", "h"), "metric 'a-b': not a metric name");
  refusal(registry.counter("", "h"), "metric '': not a metric name");
  refusal(registry.gauge("g", "h", {"a:b"}), "metric 'g': label 'a:b' is not a label name");
  refusal(registry.gauge("g", "h", {"1st"}), "label '1st' is not a label name");
  refusal(registry.gauge("g", "h", {"__name__"}), "label '__name__': names starting with __");
  refusal(registry.gauge("g", "h", {"program", "program"}), "label 'program' named twice");
  refusal(registry.histogram("h", "h", {"le"}, {1}), "label 'le' is a histogram's bucket bound");
  refusal(registry.histogram("h", "h", {}, {1, 1}), "not strictly increasing (1 then 1)");
  refusal(registry.histogram("h", "h", {}, {2, 1}), "not strictly increasing (2 then 1)");
  refusal(registry.histogram("h", "h", {}, {1, std::numeric_limits<double>::infinity()}),
          "bucket bound +Inf is not finite");
  refusal(registry.histogram("h", "h", {}, {std::nan("")}), "bucket bound NaN is not finite");
  EXPECT_EQ(registry.exposition(), "") << "nothing refused was registered";

  // Colons are allowed in metric names (the grammar's), not in labels.
  EXPECT_THAT_EXPECTED(registry.gauge("job:rate", "h", {"_x1"}), llvm::Succeeded());
}

TEST(Metrics, ANameRegisteredAgainInAnotherShapeIsRefusedSayingWhatDiffers) {
  Registry registry;
  auto cycles = registry.counter("cycles_total", "Cycles", {"program", "outcome"});
  ASSERT_THAT_EXPECTED(cycles, llvm::Succeeded());
  ASSERT_THAT_EXPECTED(registry.histogram("seconds", "S", {"program"}, {1, 2}), llvm::Succeeded());
  EXPECT_THAT_EXPECTED(
      registry.gauge("cycles_total", "Cycles", {"program", "outcome"}),
      llvm::FailedWithMessage("metric 'cycles_total': registered as a counter, now as a gauge"));
  EXPECT_THAT_EXPECTED(registry.counter("cycles_total", "Cycles", {"program"}),
                       llvm::FailedWithMessage("metric 'cycles_total': labels (program, outcome) "
                                               "changed to (program)"));
  EXPECT_THAT_EXPECTED(
      registry.counter("cycles_total", "Runs", {"program", "outcome"}),
      llvm::FailedWithMessage("metric 'cycles_total': help \"Cycles\" changed to \"Runs\""));
  EXPECT_THAT_EXPECTED(
      registry.histogram("seconds", "S", {"program"}, {1, 3}),
      llvm::FailedWithMessage("metric 'seconds': buckets (1, 2) changed to (1, 3)"));
  // Another family's sample names are taken too, and a counter x_total
  // takes x, its family's name for OpenMetrics parsers.
  EXPECT_THAT_EXPECTED(registry.gauge("seconds_count", "S"),
                       llvm::FailedWithMessage("metric 'seconds_count': 'seconds_count' is taken "
                                               "by histogram 'seconds'"));
  EXPECT_THAT_EXPECTED(registry.counter("seconds_sum_total", "S"),
                       llvm::FailedWithMessage("metric 'seconds_sum_total': 'seconds_sum' is taken "
                                               "by histogram 'seconds'"));
  EXPECT_THAT_EXPECTED(
      registry.histogram("cycles", "C", {}, {1}),
      llvm::FailedWithMessage("metric 'cycles': 'cycles' is taken by counter 'cycles_total'"));
  EXPECT_THAT_EXPECTED(registry.gauge("runs", "R"), llvm::Succeeded());
  EXPECT_THAT_EXPECTED(
      registry.counter("runs_total", "R"),
      llvm::FailedWithMessage("metric 'runs_total': 'runs' is taken by gauge 'runs'"));

  // The same registration again is the same family.
  auto again = registry.counter("cycles_total", "Cycles", {"program", "outcome"});
  ASSERT_THAT_EXPECTED(again, llvm::Succeeded());
  again->with({"fw", "installed"}).inc();
  cycles->with({"fw", "installed"}).inc();
  EXPECT_THAT(registry.exposition(),
              HasSubstr("\ncycles_total{program=\"fw\",outcome=\"installed\"} 2\n"));
}

TEST(Metrics, AWrongNumberOfLabelValuesNeverReachesThePage) {
  Registry registry;
  auto cycles = registry.counter("cycles_total", "c", {"program"});
  ASSERT_THAT_EXPECTED(cycles, llvm::Succeeded());
  std::string before = registry.exposition();
  // Debug builds stop at the assertion; release builds count on a child
  // that is exposed nowhere.
  EXPECT_DEBUG_DEATH(cycles->with({"fw", "extra"}).inc(), "one value per label name");
  EXPECT_EQ(registry.exposition(), before);
}

TEST(Metrics, UpdatesFromManyThreadsAreAllCounted) {
  Registry registry;
  auto packets = registry.counter("packets_total", "p", {"program"});
  auto seconds = registry.histogram("seconds", "s", {"program"}, {0.5});
  ASSERT_THAT_EXPECTED(packets, llvm::Succeeded());
  ASSERT_THAT_EXPECTED(seconds, llvm::Succeeded());
  constexpr int Threads = 4, Each = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < Threads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < Each; ++i) {
        packets->with({"fw"}).inc();
        seconds->with({"fw"}).observe(t % 2 ? 0.25 : 1);
        if (i % 1000 == 0)
          (void)registry.exposition(); // rendering meanwhile
      }
    });
  for (std::thread &thread : threads)
    thread.join();
  std::string page = registry.exposition();
  EXPECT_THAT(page, HasSubstr("\npackets_total{program=\"fw\"} 80000\n"));
  EXPECT_THAT(page, HasSubstr("\nseconds_bucket{program=\"fw\",le=\"0.5\"} 40000\n"));
  EXPECT_THAT(page, HasSubstr("\nseconds_count{program=\"fw\"} 80000\n"));
  EXPECT_THAT(page, HasSubstr("\nseconds_sum{program=\"fw\"} 50000\n"));
}

} // namespace
} // namespace morpheus::runtime::metrics
