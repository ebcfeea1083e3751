// Analysis precise enough for real code: configuration beside a counter in
// one value or one map, and arrays that are small by content. Each test
// runs the corpus program (tests/programs/) under an Optimizer, checks the
// specialization's decision and compares the specialized program with the
// original on the packets that exercise it; the counters the data plane
// writes must still reach the live map.
#include "Corpus.h"

#include <bpf/bpf.h>
#include <linux/bpf.h>

namespace morpheus::testing {
namespace {

struct Rule {
  uint32_t action;
  uint32_t port;
  uint64_t hits;
};

uint64_t hitsOf(CorpusProgram &program) {
  Rule rule{};
  uint32_t zero = 0;
  EXPECT_EQ(bpf_map_lookup_elem(program.opt().mapFd("rules"), &zero, &rule), 0);
  return rule.hits;
}

TEST(PreciseAnalysis, ConfigurationBesideACounterIsFoldedAndTheCounterStillCounts) {
  CorpusProgram program("field_counter.bpf.c");
  ASSERT_TRUE(program.ok());
  program.set("rules", uint32_t(0), Rule{XDP_DROP, 7, 0});
  program.set("stats", uint32_t(0), uint64_t(100)); // the ttl limit; key 1 counts
  runtime::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  const core::SiteDecision *folded = CorpusProgram::decision(report, "rules", true);
  ASSERT_NE(folded, nullptr) << report.log.toText();
  EXPECT_EQ(folded->pass, "fold-read-only-fields") << folded->detail;
  const core::SiteDecision *limit = CorpusProgram::decision(report, "stats", true);
  ASSERT_NE(limit, nullptr) << "key 0 is never written: " << report.log.toText();
  EXPECT_EQ(limit->pass, "constant-key-lookup");

  uint64_t before = hitsOf(program);
  for (PacketSpec spec : {PacketSpec{.ttl = 64, .tos = 7}, PacketSpec{.ttl = 64, .tos = 3},
                          PacketSpec{.ttl = 200, .tos = 3}}) {
    Bytes packet = buildPacket(spec);
    EXPECT_EQ(program.active(packet), program.original(packet)) << "tos " << int(spec.tos);
  }
  EXPECT_EQ(program.original(buildPacket({.ttl = 64, .tos = 3})).verdict, uint32_t(XDP_DROP));
  // Three packets through each version, and one more above: every one
  // counted in the live entry, by the specialized version too.
  EXPECT_EQ(hitsOf(program), before + 7);

  // A change through Morpheus is seen on the very next packet.
  program.set("rules", uint32_t(0), Rule{XDP_TX, 7, 0});
  Bytes packet = buildPacket({.ttl = 64, .tos = 3});
  EXPECT_EQ(program.active(packet).verdict, uint32_t(XDP_TX));
}

struct Backend {
  uint32_t weight;
  uint32_t action;
};

TEST(PreciseAnalysis, SparseArrayIsASmallTableAndOtherSlotsHoldZero) {
  CorpusProgram program("sparse_array.bpf.c");
  ASSERT_TRUE(program.ok());
  program.set("backends", uint32_t(5), Backend{1, XDP_DROP});
  program.set("backends", uint32_t(900), Backend{2, XDP_TX});
  runtime::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  const core::SiteDecision *inlined = CorpusProgram::decision(report, "backends", true);
  ASSERT_NE(inlined, nullptr) << report.log.toText();
  EXPECT_EQ(inlined->pass, "inline-small-table");
  EXPECT_NE(inlined->detail.find("non-zero slots of 1024"), std::string::npos) << inlined->detail;
  for (uint16_t id : {5, 900, 0, 7, 1023, 1024 + 5}) {
    Bytes packet = buildPacket({.id = id});
    EXPECT_EQ(program.active(packet), program.original(packet)) << "id " << id;
  }
  EXPECT_EQ(program.original(buildPacket({.id = 5})).verdict, uint32_t(XDP_DROP));
  EXPECT_EQ(program.original(buildPacket({.id = 7})).verdict, uint32_t(XDP_PASS));
}

TEST(PreciseAnalysis, SparseArrayWithTooManySlotsIsDeclinedWithItsReason) {
  runtime::OptimizerOptions options = CorpusProgram::noShadow();
  options.inlineLimit = 2;
  CorpusProgram program("sparse_array.bpf.c", options);
  ASSERT_TRUE(program.ok());
  for (uint32_t slot : {1u, 2u, 3u})
    program.set("backends", slot, Backend{1, XDP_DROP});
  runtime::CycleReport report = program.cycle();
  const core::SiteDecision *kept = CorpusProgram::decision(report, "backends", false);
  ASSERT_NE(kept, nullptr) << report.describe() << report.log.toText();
  EXPECT_NE(kept->detail.find("larger than the inline limit of 2"), std::string::npos)
      << kept->detail;
}

} // namespace
} // namespace morpheus::testing
