// The cost model alone and as the pipeline's chooser: its fit of measured
// points, its predictions per representation, the cheapest eligible
// representation chosen (including a trie within the inline limit, which
// lpm-as-code would take by limits alone, given to the derived table or
// left to the trie when the measured costs say so), and its file format.
#include "TestSignatures.h"
#include "core/CostModel.h"
#include "core/Pipeline.h"
#include "core/passes/PrefixIntervals.h"
#include "core/passes/TrieRepresentation.h"

#include <gtest/gtest.h>
#include <llvm/AsmParser/Parser.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Testing/Support/Error.h>

#include <cmath>

namespace morpheus::core {
namespace {

TEST(CostModel, InterpolatesBetweenMeasuredSizesAndIsFlatOutside) {
  // The trie as calibrated: 20, 44, 109 ns at 16, 256, 4,096 prefixes.
  SizeCurve trie = {{{16, 20}, {256, 44}, {4096, 109}}};
  EXPECT_DOUBLE_EQ(trie.at(16), 20);
  EXPECT_DOUBLE_EQ(trie.at(256), 44);
  EXPECT_DOUBLE_EQ(trie.at(64), 32);             // halfway in log2 from 16 to 256
  EXPECT_DOUBLE_EQ(trie.at(1024), 44 + 65 / 2.0); // halfway from 256 to 4,096
  // Flat outside: a 2-prefix trie is not priced below the smallest measured
  // size (a line through these points gave 16 prefixes 47.9 ns, not 20).
  EXPECT_DOUBLE_EQ(trie.at(2), 20);
  EXPECT_DOUBLE_EQ(trie.at(1), 20);
  EXPECT_DOUBLE_EQ(trie.at(100000), 109);
  EXPECT_DOUBLE_EQ((SizeCurve{{{8, 3}}}.at(2)), 3);
  EXPECT_DOUBLE_EQ(SizeCurve{}.at(8), 0);

  OperationCosts costs;
  costs.lpmLookupNs = trie;
  CostModel model(costs, "test");
  EXPECT_DOUBLE_EQ(model.lpmLookupNs(20), 20 + 24 * (std::log2(20) - 4) / 4);
  EXPECT_DOUBLE_EQ(model.originalLookupNs(TableMatch::LongestPrefix, 0), 20);
}

TEST(CostModel, PredictsEachRepresentationFromItsUnitCosts) {
  OperationCosts costs;
  costs.hashLookupNs = 30;
  costs.lpmLookupNs = {{{2, 13}, {256, 34}}};
  costs.compareNs = {{{64, 0.5}}};
  costs.searchLevelNs = {{{4, 1}, {256, 2}}};   // a larger search mispredicts more
  costs.derivedLoadNs = {{{4096, 1}, {131072, 4}}}; // a larger table misses more
  CostModel model(costs, "test");
  EXPECT_TRUE(model.calibrated());
  EXPECT_DOUBLE_EQ(model.lpmLookupNs(256), 34);

  TableShape trie;
  trie.match = TableMatch::LongestPrefix;
  trie.entries = 256;
  trie.keySize = 8;
  trie.intervals = 300; // 9 levels, priced at the largest measured search
  trie.derivedLoads = 2;
  trie.derivedBytes = 131072;
  EXPECT_DOUBLE_EQ(model.predictNs(Representation::OriginalMap, trie), 34);
  EXPECT_DOUBLE_EQ(model.predictNs(Representation::PrefixSearch, trie), 0.5 + 9 * 2);
  EXPECT_DOUBLE_EQ(model.predictNs(Representation::DerivedArray, trie), 3 * 0.5 + 2 * 4.5);
  TableShape generations = trie; // one table per leading word: a compare each
  generations.keySize = 12;
  generations.leadingCompares = 2;
  EXPECT_DOUBLE_EQ(model.predictNs(Representation::DerivedArray, generations),
                   5 * 0.5 + 2 * 4.5);
  // A 4-interval search (2 levels) at its own measured level cost; a 4 KiB
  // table's loads at theirs.
  trie.intervals = 4;
  trie.derivedBytes = 4096;
  EXPECT_DOUBLE_EQ(model.predictNs(Representation::PrefixSearch, trie), 0.5 + 2 * 1);
  EXPECT_DOUBLE_EQ(model.predictNs(Representation::DerivedArray, trie), 3 * 0.5 + 2 * 1.5);
  // A derived hash of IPv6 /64s (two words): the length test, a multiply
  // per word, the home's and the entry's bounds, then per slot probed a
  // load priced at the table's size and a compare of the tag and each word.
  TableShape v6 = trie;
  v6.keySize = 20;
  v6.hashLengths = {{2, 1.25}};
  v6.hashBytes = 4096;
  EXPECT_DOUBLE_EQ(model.predictNs(Representation::DerivedHash, v6),
                   5 * 0.5 + 1.25 * (1 + 3 * 0.5));
  EXPECT_EQ(CostModel::memoryBytes(Representation::DerivedHash, v6), 4096u);
  // Prefixes of /64 and /32 too: each further length adds its multiplies,
  // its home's bound and its probes (a key no /64 holds probes both).
  v6.hashLengths.push_back({1, 1.5});
  EXPECT_DOUBLE_EQ(model.predictNs(Representation::DerivedHash, v6),
                   5 * 0.5 + 1.25 * (1 + 3 * 0.5) + 2 * 0.5 + 1.5 * (1 + 2 * 0.5));

  TableShape hash;
  hash.match = TableMatch::Exact;
  hash.entries = 9;
  hash.keySize = 16; // two words a compare
  EXPECT_DOUBLE_EQ(model.predictNs(Representation::CompareChain, hash), 5 * 2 * 0.5);
  // Two hot keys with half the traffic each: 1 and 2 compares, no miss.
  hash.hotShares = {0.5, 0.5};
  EXPECT_DOUBLE_EQ(model.predictNs(Representation::FastPath, hash), 0.5 * 1 + 0.5 * 2);
  // With a quarter missing, the misses pay both compares and the map.
  hash.hotShares = {0.5, 0.25};
  EXPECT_DOUBLE_EQ(model.predictNs(Representation::FastPath, hash),
                   0.5 * 1 + 0.25 * 2 + 0.25 * (2 + 30));
}

// A compare costs what it costs in a chain of that length: 0.25 ns among
// eight, 1 ns in a chain of 4,096 whose code leaves the instruction cache;
// a search's level and a table's bounds are compares among a few.
TEST(CostModel, PricesACompareByTheLengthOfItsChain) {
  OperationCosts costs;
  costs.compareNs = {{{8, 0.25}, {4096, 1}}};
  costs.searchLevelNs = {{{4, 1}}};
  CostModel model(costs, "test");
  TableShape chain;
  chain.match = TableMatch::Exact;
  chain.keySize = 4;
  chain.entries = 7;
  EXPECT_DOUBLE_EQ(model.predictNs(Representation::CompareChain, chain), 4 * 0.25);
  chain.entries = 4096;
  EXPECT_DOUBLE_EQ(model.predictNs(Representation::CompareChain, chain), 4097 / 2.0 * 1);
  chain.entries = 64; // halfway in log2 between 8 and 4,096
  EXPECT_DOUBLE_EQ(model.predictNs(Representation::CompareChain, chain),
                   32.5 * (0.25 + 0.75 * (std::log2(64) - 3) / 9));
  TableShape trie;
  trie.match = TableMatch::LongestPrefix;
  trie.intervals = 4;
  EXPECT_DOUBLE_EQ(model.predictNs(Representation::PrefixSearch, trie), 0.25 + 2 * 1);
}

TEST(CostModel, ChoosesTheCheapestEligibleRepresentation) {
  OperationCosts costs;
  costs.searchLevelNs = {{{2, 3}}}; // a search this slow loses to two loads
  costs.derivedLoadNs = {{{4096, 1}}};
  CostModel model(costs, "test");
  TableShape trie;
  trie.match = TableMatch::LongestPrefix;
  trie.entries = 20;
  trie.keySize = 8;
  trie.intervals = 41;
  trie.derivedLoads = 2;
  RepresentationChoice both =
      model.choose(trie, {Representation::PrefixSearch, Representation::DerivedArray});
  EXPECT_EQ(both.chosen, Representation::DerivedArray);
  ASSERT_EQ(both.candidates.size(), 3u); // the map is always a candidate
  EXPECT_TRUE(std::is_sorted(both.candidates.begin(), both.candidates.end(),
                             [](auto &a, auto &b) { return a.ns < b.ns; }));
  EXPECT_EQ(both.predictionFor(Representation::PrefixSearch), 0.4 + 6 * 3.0);
  // Without the derived table the search still beats the trie.
  EXPECT_EQ(model.choose(trie, {Representation::PrefixSearch}).chosen,
            Representation::PrefixSearch);
  // Nothing eligible: the map.
  RepresentationChoice none = model.choose(trie, {});
  EXPECT_EQ(none.chosen, Representation::OriginalMap);
  EXPECT_NE(none.describe().find("chosen: map; calibrated"), std::string::npos)
      << none.describe();
  EXPECT_NE(CostModel().choose(trie, {}).describe().find("default costs"), std::string::npos);
}

TEST(CostModel, AMemoryDeclinedTableFallsBackToTheNextCandidateThatPaysForItsOwn) {
  // A trie of 40 prefixes in 3 lengths: the 16-8-8 table (260 KiB) is the
  // cheapest, but saves less over the map than its memory asks; the
  // hashes (a few hundred bytes) save less, yet more than theirs.
  OperationCosts costs;
  costs.lpmLookupNs = {{{16, 21}}};
  costs.derivedLoadNs = {{{4096, 1}}};
  CostModel model(costs, "test");
  TableShape trie;
  trie.match = TableMatch::LongestPrefix;
  trie.entries = 40;
  trie.keySize = 12;
  trie.derivedLoads = 3;
  trie.leadingCompares = 1;
  trie.derivedBytes = 260 * 1024;
  trie.hashLengths = {{2, 1.0}, {2, 1.0}, {2, 1.0}};
  trie.hashBytes = 400;
  RepresentationChoice choice =
      model.choose(trie, {Representation::DerivedArray, Representation::DerivedHash});
  ASSERT_EQ(choice.candidates.front().representation, Representation::DerivedArray);
  EXPECT_EQ(choice.chosen, Representation::DerivedHash) << choice.describe();
  EXPECT_NE(choice.memoryDeclined.find("derived table's 260 KiB"), std::string::npos)
      << choice.memoryDeclined;
  // Without the hashes, the map.
  EXPECT_EQ(model.choose(trie, {Representation::DerivedArray}).chosen,
            Representation::OriginalMap);
}

TEST(CostModel, FastPathCostsComeFromTheCalibration) {
  OperationCosts costs;
  costs.hashLookupNs = 41;
  costs.compareNs = {{{8, 0.3}, {16, 0.7}, {4096, 2}}};
  FastPathCosts fast = CostModel(costs, "test").fastPathCosts();
  EXPECT_EQ(fast.exactLookupNs, 41);
  EXPECT_EQ(fast.compareNs, 0.7); // a chain of the most keys a fast path compares
  EXPECT_EQ(fast.minimumSavingNs, FastPathCosts().minimumSavingNs);
}

TEST(CostModel, RoundTripsThroughItsFileAndNamesTheFileAtFault) {
  OperationCosts costs;
  costs.hashLookupNs = 31.5;
  costs.derivedLoadNs = {{{4096, 1.25}, {131072, 2.25}}};
  costs.compareNs = {{{8, 0.25}, {512, 0.5}}};
  CostModel model(costs, "host x, kernel y");
  auto back = CostModel::fromJson(model.toJson(), "cal.json");
  ASSERT_THAT_EXPECTED(back, llvm::Succeeded());
  EXPECT_EQ(back->operations(), costs);
  EXPECT_EQ(back->source(), "host x, kernel y");
  EXPECT_TRUE(back->calibrated());

  auto broken = CostModel::fromJson(R"({"hash_lookup_ns": 30})", "cal.json");
  ASSERT_FALSE(bool(broken));
  std::string message = llvm::toString(broken.takeError());
  EXPECT_NE(message.find("cal.json"), std::string::npos) << message;
  EXPECT_NE(message.find("format 3"), std::string::npos) << message; // an older file
  std::string json = model.toJson();
  std::string descending = json;
  descending.replace(descending.find("4096"), 4, "999999");
  broken = CostModel::fromJson(descending, "cal.json");
  ASSERT_FALSE(bool(broken));
  message = llvm::toString(broken.takeError());
  EXPECT_NE(message.find("derived_load_ns"), std::string::npos) << message;
  EXPECT_THAT_EXPECTED(CostModel::fromJson("not json", "cal.json"), llvm::Failed());
  EXPECT_FALSE(CostModel().calibrated());
  EXPECT_NE(CostModel().source().find("defaults"), std::string::npos);
}

TEST(CostModel, MultibitShapeCountsChunksAndLoads) {
  // 10.0.0.0/8, 10.1.0.0/16, 10.1.2.0/24: the 10.1.2 block needs no chunk
  // (it is /24-aligned), the 10.1 block one: two loads on the deepest path.
  auto at = [](uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
    return PrefixAddress((a << 24) | (b << 16) | (c << 8) | d);
  };
  std::vector<PrefixInterval> intervals = {
      {0, nullptr},          {at(10, 0, 0, 0), nullptr}, {at(10, 1, 0, 0), nullptr},
      {at(10, 1, 2, 0), nullptr}, {at(10, 1, 3, 0), nullptr}, {at(10, 2, 0, 0), nullptr},
      {at(11, 0, 0, 0), nullptr}};
  MultibitShape shape = multibitShape(intervals);
  EXPECT_EQ(shape.chunks, 1u);
  EXPECT_EQ(shape.loads, 2u);
  EXPECT_EQ(shape.bytes, (65536u + 256u) * 2);
  intervals.push_back({at(12, 0, 0, 1), nullptr}); // a /32: 3 loads, two chunks more
  shape = multibitShape(intervals);
  EXPECT_EQ(shape.chunks, 3u);
  EXPECT_EQ(shape.loads, 3u);
}

// A program looking up an IPv4 trie with a whole address from the packet.
const char TrieProgram[] = R"(
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@routes = global { ptr, ptr } zeroinitializer, section ".maps", align 8

define i32 @prog(ptr %ctx) section "xdp" {
entry:
  %key = alloca { i32, i32 }, align 4
  store i32 32, ptr %key, align 4
  %addr = load i32, ptr %ctx, align 4
  %data = getelementptr inbounds i8, ptr %key, i64 4
  store i32 %addr, ptr %data, align 4
  %route = call ptr inttoptr (i64 1 to ptr)(ptr @routes, ptr %key)
  %hit = icmp ne ptr %route, null
  %verdict = select i1 %hit, i32 1, i32 2
  ret i32 %verdict
}
)";

// An IPv4 trie entry: prefix a.b.c.0/length, value `value`.
TableEntry prefixEntry(uint8_t length, uint8_t a, uint8_t b, uint8_t c, uint16_t value) {
  return TableEntry{Bytes{length, 0, 0, 0, a, b, c, 0},
                    Bytes{uint8_t(value), uint8_t(value >> 8), 0, 0}};
}

// Unit costs as this machine's calibration measured them (`morpheus bench
// calibrate --rounds 15`, 2026-11-24 18:41 UTC, load 8.8): a trie 11 ns at
// 2 prefixes, 123 ns at 4,096; a search level 3.5-5 ns; a derived load
// dearer in a larger table.
OperationCosts calibratedHere() {
  OperationCosts costs;
  costs.hashLookupNs = 34.06;
  costs.arrayLookupNs = 0.94;
  costs.helperCallNs = 15.06;
  costs.compareNs = {{{64, 0.2}}};
  costs.lpmLookupNs = {{{2, 11.44}, {16, 21.12}, {256, 45.94}, {4096, 123.06}}};
  costs.searchLevelNs = {{{4, 5}, {32, 3.6}, {256, 3.5}}};
  costs.derivedLoadNs = {{{4096, 1.38}, {131072, 4.75}, {1048576, 10.62}}};
  return costs;
}

class TrieChoice : public ::testing::Test {
protected:
  void SetUp() override {
    llvm::SMDiagnostic diagnostic;
    module = llvm::parseAssemblyString(TrieProgram, diagnostic, context);
    ASSERT_TRUE(module) << diagnostic.getMessage().str();
    annotateAccessCalls(*module, signatures);
    TableInfo routes;
    routes.name = "routes";
    routes.typeName = "lpm_trie";
    routes.match = TableMatch::LongestPrefix;
    routes.keySize = 8;
    routes.valueSize = 4;
    routes.maxEntries = 64;
    catalog["routes"] = routes;
    // 10.0.0.0/8, 10.1.0.0/16, 10.1.2.0/24: 7 intervals, 3 search levels,
    // a derived table of one chunk (2 loads).
    TableContents &contents = snapshot["routes"];
    contents.complete = true;
    contents.entries = {prefixEntry(8, 10, 0, 0, 1), prefixEntry(16, 10, 1, 0, 2),
                        prefixEntry(24, 10, 1, 2, 3)};
  }

  // The decision of `pass` at `routes` in the last specialization.
  const SiteDecision *decisionOf(const std::string &pass) const {
    for (const SiteDecision &decision : decisions)
      if (decision.table == "routes" && decision.pass == pass)
        return &decision;
    return nullptr;
  }

  // Which pass applied at `routes`, or "" when none did; `declined` gets
  // lpm-as-code's decision when it declined.
  std::string specializeWith(const CostModel &model, const SiteDecision **declined = nullptr,
                             std::optional<std::vector<std::string>> passes = std::nullopt) {
    SpecializationOptions options;
    options.costModel = model;
    options.optimize = SpecializationOptions::Optimization::None;
    options.tablePasses = std::move(passes);
    auto log = specializeModule(*module, signatures, catalog, snapshot, options);
    EXPECT_THAT_EXPECTED(log, llvm::Succeeded());
    if (!log)
      return "error";
    decisions = log->decisions;
    std::string applied;
    for (const SiteDecision &decision : decisions) {
      if (decision.table != "routes")
        continue;
      if (decision.applied)
        applied = decision.pass;
      if (!decision.applied && decision.pass == "lpm-as-code" && declined)
        *declined = &decision;
      if (decision.pass == "lpm-as-code" || decision.pass == "lpm-as-array" ||
          decision.pass == "lpm-as-hash") {
        EXPECT_TRUE(decision.choice.has_value()) << decision.pass << ": " << decision.detail;
      }
    }
    return applied;
  }

  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> module;
  testing::TestSignatures signatures;
  TableCatalog catalog;
  TableSnapshot snapshot;
  std::vector<SiteDecision> decisions;
};

TEST_F(TrieChoice, DefaultCostsKeepTheSearchWithinTheLimit) {
  EXPECT_EQ(specializeWith(CostModel()), "lpm-as-code");
  for (const SiteDecision &decision : decisions)
    if (decision.applied) {
      ASSERT_TRUE(decision.choice);
      EXPECT_EQ(decision.choice->chosen, Representation::PrefixSearch);
      EXPECT_FALSE(decision.choice->calibrated);
      EXPECT_EQ(decision.choice->candidates.size(), 4u); // search, derived table, hash, map
    }
}

TEST_F(TrieChoice, ASlowSearchIsDeclinedForTheDerivedTable) {
  // Within the inline limit, so by limits alone lpm-as-code would take it.
  OperationCosts costs;
  costs.searchLevelNs = {{{2, 20}}};
  costs.derivedLoadNs = {{{4096, 1}}};
  const SiteDecision *declined = nullptr;
  EXPECT_EQ(specializeWith(CostModel(costs, "test"), &declined), "lpm-as-array");
  ASSERT_NE(declined, nullptr);
  EXPECT_NE(declined->detail.find("the cost model prefers the derived table"), std::string::npos)
      << declined->detail;
  ASSERT_TRUE(declined->choice);
  EXPECT_EQ(declined->choice->chosen, Representation::DerivedArray);
  EXPECT_GT(*declined->choice->predictionFor(Representation::PrefixSearch),
            *declined->choice->predictionFor(Representation::DerivedArray));
}

TEST_F(TrieChoice, ACheapTrieKeepsItsLookup) {
  OperationCosts costs;
  costs.lpmLookupNs = {{{2, 0.1}}};
  EXPECT_EQ(specializeWith(CostModel(costs, "test")), "");
}

TEST_F(TrieChoice, NatsTwoPrefixesGetNoDerivedTable) {
  // nat's inside prefixes: one load from a 128 KiB table, predicted 5.9 ns
  // under the trie (the cheapest without memory: the 3-level search is
  // dearer), under the 8 ns its memory asks: without lpm-as-hash the trie
  // keeps its lookup.
  snapshot["routes"].entries = {prefixEntry(16, 192, 168, 0, 1), prefixEntry(8, 10, 0, 0, 2)};
  EXPECT_EQ(specializeWith(CostModel(calibratedHere(), "test"), nullptr,
                           std::vector<std::string>{"lpm-as-code", "lpm-as-array"}),
            "");
  const SiteDecision *derived = decisionOf("lpm-as-array");
  ASSERT_NE(derived, nullptr);
  EXPECT_FALSE(derived->applied);
  ASSERT_TRUE(derived->choice);
  const RepresentationChoice &choice = *derived->choice;
  EXPECT_EQ(choice.chosen, Representation::OriginalMap);
  // Without its memory's price the derived table would have been chosen.
  double derivedNs = *choice.predictionFor(Representation::DerivedArray);
  EXPECT_EQ(choice.candidates.front().representation, Representation::DerivedArray);
  EXPECT_LT(choice.predictedNs - derivedNs, 128 * MemoryNsPerKiB);
  EXPECT_NE(choice.memoryDeclined.find("128 KiB"), std::string::npos) << choice.memoryDeclined;
  EXPECT_NE(derived->detail.find("the cost model prefers the map"), std::string::npos)
      << derived->detail;
  EXPECT_NE(derived->detail.find("its memory asks"), std::string::npos) << derived->detail;
}

TEST_F(TrieChoice, NatsTwoPrefixesGetADerivedHashPerLength) {
  // The same two prefixes with lpm-as-hash: a hash per length, a few
  // dozen bytes, probed /16 then /8, predicted under the trie and under
  // the 128 KiB table with its memory's price.
  snapshot["routes"].entries = {prefixEntry(16, 192, 168, 0, 1), prefixEntry(8, 10, 0, 0, 2)};
  EXPECT_EQ(specializeWith(CostModel(calibratedHere(), "test")), "lpm-as-hash");
  const SiteDecision *hashed = decisionOf("lpm-as-hash");
  ASSERT_NE(hashed, nullptr);
  ASSERT_TRUE(hashed->choice);
  EXPECT_EQ(hashed->choice->chosen, Representation::DerivedHash);
  EXPECT_NE(hashed->detail.find("2 lengths (16, 8)"), std::string::npos) << hashed->detail;
  EXPECT_LT(hashed->choice->predictedNs,
            *hashed->choice->predictionFor(Representation::OriginalMap));
  const SiteDecision *derived = decisionOf("lpm-as-array");
  ASSERT_NE(derived, nullptr);
  EXPECT_NE(derived->detail.find("the cost model prefers the derived hash"), std::string::npos)
      << derived->detail;
}

TEST_F(TrieChoice, FiveHundredRoutesKeepTheirDerivedTable) {
  // 500 routes, over the inline limit: the derived table (over 128 KiB)
  // saves far more of the trie's lookup than its memory asks.
  TableContents &contents = snapshot["routes"];
  contents.entries.clear();
  for (uint16_t i = 0; i < 500; ++i) // nine lengths, /16 to /24
    contents.entries.push_back(prefixEntry(uint8_t(16 + i % 9), uint8_t(10 + i / 256),
                                           uint8_t(i), uint8_t(i * 7), i));
  catalog["routes"].maxEntries = 1024;
  EXPECT_EQ(specializeWith(CostModel(calibratedHere(), "test")), "lpm-as-array");
  const SiteDecision *derived = decisionOf("lpm-as-array");
  ASSERT_NE(derived, nullptr);
  ASSERT_TRUE(derived->choice);
  const RepresentationChoice &choice = *derived->choice;
  EXPECT_EQ(choice.chosen, Representation::DerivedArray);
  // Prefixes of nine lengths: no derived hash among the candidates.
  EXPECT_FALSE(choice.predictionFor(Representation::DerivedHash));
  EXPECT_TRUE(choice.memoryDeclined.empty()) << choice.memoryDeclined;
  double saving = *choice.predictionFor(Representation::OriginalMap) - choice.predictedNs;
  // More than the largest table 500 routes can cut asks (128 KiB and 500
  // chunks of 512 bytes: under 384 KiB).
  EXPECT_GT(saving, 384 * MemoryNsPerKiB) << derived->detail;
}

TEST_F(TrieChoice, PrefixesOfOneLengthGetTheDerivedHash) {
  // 500 /24s (over the inline limit): a derived hash of a few KiB, one
  // probe or two, against the 16-8-8 table's two loads from over 128 KiB.
  TableContents &contents = snapshot["routes"];
  contents.entries.clear();
  for (uint16_t i = 0; i < 500; ++i)
    contents.entries.push_back(prefixEntry(24, uint8_t(10 + i / 256), uint8_t(i), 0, i));
  catalog["routes"].maxEntries = 1024;
  EXPECT_EQ(specializeWith(CostModel(calibratedHere(), "test")), "lpm-as-hash");
  const SiteDecision *hashed = decisionOf("lpm-as-hash");
  ASSERT_NE(hashed, nullptr);
  ASSERT_TRUE(hashed->choice);
  const RepresentationChoice &choice = *hashed->choice;
  EXPECT_EQ(choice.chosen, Representation::DerivedHash);
  ASSERT_TRUE(choice.predictionFor(Representation::DerivedArray));
  EXPECT_LT(choice.predictedNs, *choice.predictionFor(Representation::DerivedArray));
  EXPECT_NE(hashed->detail.find("500 prefixes of length 24 as a derived hash of 1024 home slots"),
            std::string::npos)
      << hashed->detail;
}

TEST_F(TrieChoice, ARepresentationWhosePassDoesNotRunIsNotACandidate) {
  // The derived table would win (4 ns), the search still beats the trie
  // (15.4 ns against 23.2): without lpm-as-array the search it is.
  OperationCosts costs;
  costs.searchLevelNs = {{{2, 5}}};
  costs.derivedLoadNs = {{{4096, 1}}};
  SpecializationOptions options;
  options.costModel = CostModel(costs, "test");
  options.optimize = SpecializationOptions::Optimization::None;
  options.tablePasses = std::vector<std::string>{"lpm-as-code"};
  auto log = specializeModule(*module, signatures, catalog, snapshot, options);
  ASSERT_THAT_EXPECTED(log, llvm::Succeeded());
  bool searched = false;
  for (const SiteDecision &decision : log->decisions)
    searched |= decision.applied && decision.pass == "lpm-as-code";
  EXPECT_TRUE(searched);
}

} // namespace
} // namespace morpheus::core
