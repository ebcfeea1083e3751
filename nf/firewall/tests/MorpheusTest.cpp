// The firewall under Morpheus: configured through the control plane, the
// specialized program must give the original's verdict, output bytes and
// counter updates for every packet of the semantic tests.
#include "Harness.h"
#include "runtime/Optimizer.h"

#include <bpf/bpf.h>

#include <optional>
#include <set>
#include <string>
#include <llvm/Testing/Support/Error.h>

namespace morpheus::nf::firewall::testing {
namespace {

struct Probe {
  Bytes packet;
  std::optional<uint32_t> slot; // rule_hits slot the reference expects, IPv4 only
};

Bytes frame(std::initializer_list<uint16_t> tpids, uint16_t etherType, size_t payload) {
  packet::PacketBuilder builder;
  builder.ethernet({2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 2}, etherType);
  for (uint16_t tpid : tpids)
    builder.vlan(3, 0, tpid);
  Bytes bytes = builder.payload(payload).build();
  bytes[bytes.size() - payload - 2] = etherType >> 8;
  bytes[bytes.size() - payload - 1] = etherType & 0xff;
  return bytes;
}

std::vector<Probe> corpus(const std::vector<Rule> &rules) {
  std::vector<Probe> probes;
  auto add = [&](const Tuple &tuple, uint8_t optionWords = 0) {
    size_t rule = referenceMatch(rules, tuple);
    probes.push_back({packetFor(tuple, optionWords),
                      rule < rules.size() ? uint32_t(rule) : FW_DEFAULT_SLOT});
  };
  std::vector<Tuple> tuples = tuplesFor(rules, 600, 3);
  for (const Tuple &tuple : tuples)
    add(tuple);
  for (uint8_t words : {1, 5, 10})
    add(tuples[words], words);
  for (uint16_t fragment : {0x2000, 0x0001, 0x20ff, 0x4000}) {
    Tuple tuple = tuples[fragment & 0xf];
    tuple.fragment = fragment;
    add(tuple);
  }
  Bytes whole = packetFor(tuples[0]);
  for (size_t length = 14; length < whole.size(); ++length)
    probes.push_back({Bytes(whole.begin(), whole.begin() + length), std::nullopt});
  Bytes badIhl = whole;
  badIhl[14] = 0x43;
  probes.push_back({badIhl, std::nullopt});
  probes.push_back({frame({}, 0x86dd, 60), std::nullopt});              // IPv6
  probes.push_back({frame({}, 0x0806, 28), std::nullopt});              // ARP
  probes.push_back({frame({0x8100}, 0x0806, 28), std::nullopt});        // ARP in a VLAN
  probes.push_back({frame({0x88a8, 0x8100, 0x8100}, 0x0800, 40), std::nullopt});
  return probes;
}

void expectSameBehaviour(runtime::Optimizer &optimizer, const std::vector<Probe> &probes) {
  int original = optimizer.originalFd(), specialized = optimizer.activeFd();
  int stats = optimizer.mapFd("fw_stats"), hits = optimizer.mapFd("rule_hits");
  fw_config config = {};
  uint32_t zero = 0;
  ASSERT_EQ(bpf_map_lookup_elem(optimizer.mapFd("fw_config"), &zero, &config), 0);
  auto counters = [&](const Probe &probe) {
    std::vector<uint64_t> values = morpheus::testing::perCpuCounters(stats, FW_STAT_MAX);
    if (probe.slot)
      values.push_back(perCpuValue(hits, config.generation * FW_HIT_SLOTS + *probe.slot));
    return values;
  };
  for (size_t i = 0; i < probes.size(); ++i) {
    const Probe &probe = probes[i];
    std::vector<uint64_t> before = counters(probe);
    RunResult expected = morpheus::testing::runOnce(original, probe.packet);
    std::vector<uint64_t> middle = counters(probe);
    RunResult actual = morpheus::testing::runOnce(specialized, probe.packet);
    std::vector<uint64_t> after = counters(probe);
    SCOPED_TRACE("probe " + std::to_string(i) + ":\n" + morpheus::hexDump(probe.packet));
    EXPECT_EQ(actual.verdict, expected.verdict);
    EXPECT_EQ(actual.output, expected.output);
    for (size_t c = 0; c < before.size(); ++c)
      EXPECT_EQ(after[c] - middle[c], middle[c] - before[c]) << "counter " << c;
    if (probe.slot) {
      EXPECT_EQ(middle.back() - before.back(), 1u) << "not counted in the reference's rule";
    }
    if (::testing::Test::HasFailure())
      return;
  }
}

struct Configuration {
  const char *file;
  LoadOptions options;
};

LoadOptions everything() {
  LoadOptions options;
  options.defaultAction = FW_ACCEPT;
  options.conntrack = true;
  options.ipv6Accept = true;
  return options;
}

// Loads each configuration in turn through the pins (so every change goes
// through the Morpheus guard), runs a cycle, hands its report to `check`,
// and compares the version with the original on the configuration's probes
// (also before the cycle: the guard's generic code, on the new rules).
template <typename Check>
void specializeEach(runtime::Optimizer &optimizer, const std::string &pins,
                    std::initializer_list<Configuration> configurations, Check check) {
  for (const Configuration &configuration : configurations) {
    SCOPED_TRACE(configuration.file);
    std::vector<Rule> rules = rulesFromConfig(configuration.file);
    bool replacing = optimizer.activeFd() != optimizer.originalFd();
    Error err = loadRules(pins, rules, configuration.options);
    ASSERT_THAT_ERROR(std::move(err), llvm::Succeeded());
    // The running version was built for the previous rule set: until the
    // next cycle the guard sends every packet to the generic code.
    if (replacing)
      expectSameBehaviour(optimizer, corpus(rules));
    core::CycleReport report = optimizer.runCycle();
    ASSERT_TRUE(report.installed()) << report.describe();
    for (const auto &decision : report.log.decisions)
      if (decision.applied)
        std::printf("  [morpheus] site %u %s %s: %s\n", decision.site, decision.table.c_str(),
                    decision.pass.c_str(), decision.detail.c_str());
    ASSERT_NE(optimizer.activeFd(), optimizer.originalFd());
    check(configuration, report);
    expectSameBehaviour(optimizer, corpus(rules));
    if (::testing::Test::HasFailure())
      return;
  }
}

std::set<std::string> tablesWhere(const core::CycleReport &report, const std::string &pass) {
  std::set<std::string> tables;
  for (const auto &decision : report.log.decisions)
    if (decision.applied && decision.pass == pass)
      tables.insert(decision.table);
  return tables;
}

TEST(Morpheus, SpecializedFirewallMatchesTheOriginal) {
  PinDir pins("firewall-morpheus");
  runtime::OptimizerOptions options;
  options.pinDir = pins.path();
  auto created =
      runtime::Optimizer::create(morpheus::testing::sourcePath("nf/firewall/firewall.bpf.c"),
                                 options);
  ASSERT_THAT_EXPECTED(created, llvm::Succeeded());
  runtime::Optimizer &optimizer = **created;
  specializeEach(
      optimizer, pins.path(),
      {{"classbench-fw1-449-rules.txt", {}}, {"generated-1000-rules.txt", everything()}},
      [&](const Configuration &configuration, const core::CycleReport &report) {
        // Both (generation, prefix) tries become derived tables, one per
        // generation they hold (lpm-as-array's leading word).
        EXPECT_EQ(tablesWhere(report, "lpm-as-array"),
                  (std::set<std::string>{"dst_prefixes", "src_prefixes"}))
            << report.describe();
        // Hundreds of rules: too many combinations of distinct sets for
        // the classifier to become a table.
        EXPECT_TRUE(tablesWhere(report, "region-as-table").empty()) << report.describe();
        // The configuration is folded into the code, taking the connection
        // tracking path with it when it is off.
        nf::testing::SpecializedAlone alone(optimizer);
        EXPECT_FALSE(nf::testing::usesMap(alone.programFd(), optimizer.mapFd("fw_config")));
        EXPECT_EQ(nf::testing::usesMap(alone.programFd(), optimizer.mapFd("conntrack")),
                  configuration.options.conntrack);
      });
}

// A small rule set (region-as-table): after the five lookups, the AND over
// the rule sets' words and the lowest common bit read nothing but what the
// lookups answered; with a few distinct sets per field the version reads
// the rule from a derived table indexed by the answers' classes instead of
// running the loop. Each rule set is loaded twice (the second time into the
// other generation, which then holds the same sets: no more classes); every
// probe answers as the original (verdict, bytes, counters), also between
// the loads under the guard.
TEST(Morpheus, SmallRuleSetsClassifyThroughADerivedTable) {
  for (const char *file : {"classbench-fw1-16-rules.txt", "mixed-12-rules.txt"}) {
    SCOPED_TRACE(file);
    PinDir pins("firewall-small");
    runtime::OptimizerOptions options;
    options.pinDir = pins.path();
    auto created = runtime::Optimizer::create(
        morpheus::testing::sourcePath("nf/firewall/firewall.bpf.c"), options);
    ASSERT_THAT_EXPECTED(created, llvm::Succeeded());
    specializeEach(**created, pins.path(), {{file, {}}, {file, everything()}},
                   [&](const Configuration &, const core::CycleReport &report) {
                     EXPECT_EQ(tablesWhere(report, "region-as-table"),
                               (std::set<std::string>{"dport_sets+dst_prefixes+protocols+"
                                                      "sport_sets+src_prefixes"}))
                         << report.describe();
                   });
  }
}

// Hot flows (flow-fast-path): an instrumented version records the
// firewall's tuples at its first trie lookup; after hot traffic, the next
// version compares them before the classifier and runs a copy of the code
// after it per hot tuple, with the tuple as constants. Every packet — the
// hot flows, a hot flow's neighbour differing in one field, cold flows,
// fragments, non-IP — answers as the original in verdict, bytes and
// counters; a rule change by the control plane is seen by the next packet.
TEST(Morpheus, HotFlowsGetACopyOfTheClassifierThatAnswersAsTheOriginal) {
  PinDir pins("firewall-flows");
  runtime::OptimizerOptions options;
  options.pinDir = pins.path();
  options.traffic.mode = core::ProfileMode::Naive;
  auto created =
      runtime::Optimizer::create(morpheus::testing::sourcePath("nf/firewall/firewall.bpf.c"),
                                 options);
  ASSERT_THAT_EXPECTED(created, llvm::Succeeded());
  runtime::Optimizer &optimizer = **created;
  std::vector<Rule> rules = rulesFromConfig("classbench-fw1-449-rules.txt");
  ASSERT_THAT_ERROR(loadRules(pins.path(), rules, {}), llvm::Succeeded());
  auto flowDecision = [](const core::CycleReport &report, const std::string &start) {
    for (const auto &decision : report.log.decisions)
      if (decision.pass == "flow-fast-path" && decision.applied &&
          decision.detail.rfind(start, 0) == 0)
        return decision.detail;
    return std::string();
  };
  core::CycleReport first = optimizer.runCycle();
  ASSERT_TRUE(first.installed()) << first.describe();
  EXPECT_NE(flowDecision(first, "flow tuples sampled"), "") << first.log.toText();

  std::vector<Tuple> tuples = tuplesFor(rules, 200, 11);
  std::vector<Tuple> hot;
  for (const Tuple &tuple : tuples)
    if (tuple.hasPorts() && referenceMatch(rules, tuple) < rules.size() && hot.size() < 3)
      hot.push_back(tuple);
  ASSERT_EQ(hot.size(), 3u);
  for (int round = 0; round < 40; ++round)
    for (const Tuple &tuple : hot)
      morpheus::testing::runOnce(optimizer.activeFd(), packetFor(tuple));
  for (size_t i = 100; i < 120; ++i)
    morpheus::testing::runOnce(optimizer.activeFd(), packetFor(tuples[i]));
  core::CycleReport second = optimizer.runCycle();
  ASSERT_TRUE(second.installed()) << second.describe();
  std::string copies = flowDecision(second, "3 hot tuples");
  EXPECT_NE(copies, "") << second.log.toText();
  std::printf("  [morpheus] %s\n", copies.c_str());
  // The copies' keys are constants: both tries are answered in each copy.
  size_t answeredTries = 0;
  for (const auto &decision : second.log.decisions)
    answeredTries += decision.pass == "constant-key-lookup" && decision.applied &&
                     (decision.table == "src_prefixes" || decision.table == "dst_prefixes");
  EXPECT_EQ(answeredTries, 2 * 3u) << second.log.toText();

  auto probesFor = [&](const std::vector<Rule> &ruleSet) {
    std::vector<Probe> probes = corpus(ruleSet);
    auto add = [&](const Tuple &tuple) {
      size_t rule = referenceMatch(ruleSet, tuple);
      probes.push_back(
          {packetFor(tuple), rule < ruleSet.size() ? uint32_t(rule) : FW_DEFAULT_SLOT});
    };
    for (const Tuple &tuple : hot) {
      add(tuple);
      for (int field = 0; field < 6; ++field) {
        Tuple neighbour = tuple;
        switch (field) {
        case 0: neighbour.saddr ^= 1; break;
        case 1: neighbour.daddr ^= 1; break;
        case 2: neighbour.sport += 1; break;
        case 3: neighbour.dport += 1; break;
        case 4: neighbour.protocol = tuple.protocol == Tcp ? Udp : Tcp; break;
        case 5: neighbour.fragment = 0x0001; break; // no ports
        }
        add(neighbour);
      }
    }
    return probes;
  };
  expectSameBehaviour(optimizer, probesFor(rules));

  // The control plane flips the action of the rule deciding the hottest
  // flow: the next packet sees it.
  size_t deciding = referenceMatch(rules, hot[0]);
  ASSERT_LT(deciding, rules.size());
  uint32_t before = morpheus::testing::runOnce(optimizer.activeFd(), packetFor(hot[0])).verdict;
  rules[deciding].action = rules[deciding].action == FW_DROP ? FW_ACCEPT : FW_DROP;
  ASSERT_THAT_ERROR(loadRules(pins.path(), rules, {}), llvm::Succeeded());
  EXPECT_NE(morpheus::testing::runOnce(optimizer.activeFd(), packetFor(hot[0])).verdict, before);
  expectSameBehaviour(optimizer, probesFor(rules));
}

} // namespace
} // namespace morpheus::nf::firewall::testing
