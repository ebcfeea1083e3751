// The verifier accepts whatever it accepted before: bounds that constant
// folding removes, inlined values handed to global functions, compare chains
// that multiply the verifier's states, inline asm. Programs: tests/programs/.
#include "Corpus.h"
#include "core/Pipeline.h"
#include "support/CpuPin.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <linux/bpf.h>

#include <llvm/ADT/ScopeExit.h>

#include <algorithm>

namespace morpheus::testing {
namespace {

const uint32_t Zero = 0;

struct DivisionCase {
  const char *file;
  uint32_t divisor;
  uint32_t buckets;
  bool signedField; // the program divides the TOS byte as signed, else the TTL
  // Signed division needs v4. Unsigned cases use v2 (64-bit arithmetic
  // only): the verifier tracks no upper half after a 32-bit division, so
  // the originals themselves would need a mask with alu32.
  const char *cpu;
};

std::ostream &operator<<(std::ostream &out, const DivisionCase &c) { return out << c.file; }

class DivisionBounds : public ::testing::TestWithParam<DivisionCase> {};

// The specialized program (divisor now a constant) must load, and count and
// answer every value of the divided byte as the original does.
TEST_P(DivisionBounds, SpecializedProgramLoadsAndCountsAlike) {
  const DivisionCase &c = GetParam();
  runtime::OptimizerOptions options = CorpusProgram::noShadow();
  options.frontend.cflags = {c.cpu};
  CorpusProgram program(c.file, options);
  ASSERT_TRUE(program.ok());
  program.set("divisor", Zero, c.divisor);
  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();

  int hits = program.opt().mapFd("hits");
  std::vector<uint64_t> zero(c.buckets, 0);
  auto countAll = [&](int programFd, std::vector<uint32_t> &verdicts) {
    EXPECT_EQ(bpf_map_update_elem(hits, &Zero, zero.data(), BPF_ANY), 0);
    for (unsigned value = 0; value < 256; ++value) {
      PacketSpec spec;
      (c.signedField ? spec.tos : spec.ttl) = uint8_t(value);
      verdicts.push_back(runOnce(programFd, buildPacket(spec)).verdict);
    }
    std::vector<uint64_t> counts(c.buckets);
    EXPECT_EQ(bpf_map_lookup_elem(hits, &Zero, counts.data()), 0);
    return counts;
  };
  std::vector<uint32_t> expected, actual;
  std::vector<uint64_t> expectedCounts = countAll(program.opt().originalFd(), expected);
  std::vector<uint64_t> actualCounts = countAll(program.opt().activeFd(), actual);
  EXPECT_EQ(actual, expected);
  EXPECT_EQ(actualCounts, expectedCounts);
}

INSTANTIATE_TEST_SUITE_P(Corpus, DivisionBounds,
                         ::testing::Values(
                             DivisionCase{"udiv_bound.bpf.c", 26, 16, false, "-mcpu=v2"},
                             DivisionCase{"urem_bound.bpf.c", 10, 10, false, "-mcpu=v2"},
                             DivisionCase{"sdiv_bound.bpf.c", 13, 32, true, "-mcpu=v4"},
                             DivisionCase{"srem_bound.bpf.c", 7, 16, true, "-mcpu=v4"}),
                         [](const auto &info) {
                           std::string name = info.param.file;
                           return name.substr(0, name.find('_'));
                         });

struct Verdict {
  uint32_t action;
  uint32_t mark;
};

TEST(VerifierAcceptance, ValuePassedToAGlobalFunctionIsDeclined) {
  CorpusProgram program("global_function_value.bpf.c");
  ASSERT_TRUE(program.ok());
  program.set("decisions", htonl(0x0a000001), Verdict{1, 0});
  program.set("decisions", htonl(0x0a000002), Verdict{0, 7});
  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  const core::SiteDecision *declined = CorpusProgram::decision(report, "decisions", false);
  ASSERT_NE(declined, nullptr);
  EXPECT_NE(declined->detail.find("global function 'decide'"), std::string::npos)
      << declined->detail;
  for (uint32_t address : {0x0a000001u, 0x0a000002u, 0x0a000003u}) {
    Bytes packet = buildPacket({.daddr = address});
    EXPECT_EQ(program.active(packet), program.original(packet)) << std::hex << address;
  }
}

struct Window {
  uint16_t offset;
  uint16_t length;
};

// Four 64-entry tables whose hits are packet offsets: inlined as constants
// they would make 65^4 distinct packet ranges for the verifier.
void fillWindows(CorpusProgram &program) {
  for (uint16_t i = 0; i < 64; ++i) {
    program.set("by_source", htonl(0x0a000100 + i), Window{i, i});
    program.set("by_destination", htonl(0x0a000200 + i), Window{uint16_t(63 - i), 1});
    program.set("by_id", uint32_t(htons(100 + i)), Window{uint16_t(i / 2), 2});
    program.set("by_checksum", uint32_t(htons(1000 + i)), Window{uint16_t(i % 7), 3});
  }
}

TEST(VerifierAcceptance, ManyChainsFeedingBoundsChecksStayWithinTheVerifierBudget) {
  CorpusProgram program("many_chains.bpf.c");
  ASSERT_TRUE(program.ok());
  fillWindows(program);
  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  for (uint32_t i = 0; i < 64; i += 3) {
    Bytes packet = buildPacket({.saddr = 0x0a000100 + i, .daddr = 0x0a000200 + (i * 7) % 64,
                                .id = uint16_t(100 + i), .payload = 64});
    EXPECT_EQ(program.active(packet), program.original(packet)) << i;
  }
}

// Without the budget (a test-only switch), the four chains make the kernel
// refuse the candidate: the same cycle retries without compare chains and
// installs that; a later cycle on the same snapshot goes straight to it
// (the refusal it cites is the first cycle's); new table contents let
// chains be tried again.
TEST(VerifierAcceptance, RefusedCandidateIsRetriedWithoutChainsAndRemembered) {
  runtime::OptimizerOptions options = CorpusProgram::noShadow();
  options.faults.ignoreVerifierBudget = true;
  CorpusProgram program("many_chains.bpf.c", options);
  ASSERT_TRUE(program.ok());
  fillWindows(program);
  core::CycleReport first = program.cycle();
  ASSERT_TRUE(first.installed()) << first.describe();
  const core::SiteDecision *off = CorpusProgram::decision(first, "by_source", false);
  ASSERT_NE(off, nullptr);
  EXPECT_EQ(off->detail, "compare chains off: the kernel refused this snapshot's "
                         "specialization with them (cycle 1)");
  Bytes packet = buildPacket({.saddr = 0x0a000105, .daddr = 0x0a000207, .id = 103, .payload = 64});
  EXPECT_EQ(program.active(packet), program.original(packet));

  core::CycleReport again = program.opt().runCycle(/*force=*/true);
  EXPECT_NE(again.outcome, core::CycleOutcome::Failed) << again.describe();
  off = CorpusProgram::decision(again, "by_source", false);
  ASSERT_NE(off, nullptr) << "the same snapshot: no chains, no second refusal";
  EXPECT_NE(off->detail.find("(cycle 1)"), std::string::npos) << off->detail;

  program.opt().injectFaults({});
  program.set("by_source", htonl(0x0a000105), Window{9, 9});
  core::CycleReport changed = program.cycle();
  ASSERT_TRUE(changed.installed()) << changed.describe();
  EXPECT_NE(CorpusProgram::decision(changed, "by_source", true), nullptr)
      << "new contents: chains again";
  EXPECT_EQ(program.active(packet), program.original(packet));
}

// A shared map that no longer has the layout the object declares (here one
// with room for 128 entries where many_chains declares 64, put behind the
// optimizer's descriptor of by_source, with the same entries) is no
// verifier rejection: the cycle fails naming the map and the field, the
// kernel refused nothing, nothing is rebuilt with less, and the snapshot is
// not remembered as refused: once the map is back, the same snapshot is
// built with its compare chains and installed.
TEST(VerifierAcceptance, AMapOfAnotherLayoutIsNoVerifierRejection) {
  CorpusProgram program("many_chains.bpf.c");
  ASSERT_TRUE(program.ok());
  fillWindows(program);
  int shared = program.opt().mapFd("by_source");
  Fd impostor(bpf_map_create(BPF_MAP_TYPE_HASH, "by_source", 4, sizeof(Window), 128, nullptr));
  ASSERT_GE(impostor.fd, 0) << strerror(errno);
  for (uint16_t i = 0; i < 64; ++i) {
    uint32_t key = htonl(0x0a000100 + i);
    Window window{i, i};
    ASSERT_EQ(bpf_map_update_elem(impostor.fd, &key, &window, BPF_ANY), 0) << strerror(errno);
  }
  Fd saved(dup(shared));
  ASSERT_GE(saved.fd, 0) << strerror(errno);
  ASSERT_EQ(dup2(impostor.fd, shared), shared) << strerror(errno);
  auto restore = llvm::make_scope_exit([&] { dup2(saved.fd, shared); });
  core::CycleReport mismatch = program.opt().runCycle(/*force=*/true);
  restore.release();
  ASSERT_EQ(dup2(saved.fd, shared), shared) << strerror(errno);

  EXPECT_EQ(mismatch.outcome, core::CycleOutcome::Failed) << mismatch.describe();
  EXPECT_EQ(mismatch.refusedByKernel, 0u) << "a layout mismatch: " << mismatch.describe();
  EXPECT_NE(mismatch.detail.find("map 'by_source'"), std::string::npos) << mismatch.detail;
  EXPECT_NE(mismatch.detail.find("max_entries: declared 64, the map has 128"), std::string::npos)
      << mismatch.detail;

  core::CycleReport back = program.opt().runCycle(/*force=*/true);
  ASSERT_TRUE(back.installed()) << "the same snapshot, nothing remembered: " << back.describe();
  EXPECT_EQ(back.refusedByKernel, 0u);
  EXPECT_NE(CorpusProgram::decision(back, "by_source", true), nullptr)
      << "compare chains were not withheld";
  for (const core::SiteDecision &d : back.log.decisions)
    EXPECT_EQ(d.detail.find("the kernel refused"), std::string::npos)
        << d.pass << " at " << d.table << ": " << d.detail;
  Bytes packet = buildPacket({.saddr = 0x0a000105, .daddr = 0x0a000207, .id = 103, .payload = 64});
  EXPECT_EQ(program.active(packet), program.original(packet));
}

// The four tables as fast-path candidates (inline limit 4): 32 hot keys
// each (the profile takes 16 of them, all with `ignoreBudget`), all
// answered with a value, the four offsets live at once. `ignoreBudget`
// (test-only): the kernel refuses that candidate (too complex) and the
// same cycle falls back to one without fast paths nor chains, the running
// version; with the budget, the fast paths that would multiply past it are
// not built and the candidate loads at once. Either way every packet gets
// what the original gives it.
constexpr uint32_t HotKeysPerTable = 32;

void hotKeysInEveryTable(bool ignoreBudget) {
  runtime::OptimizerOptions options = CorpusProgram::noShadow();
  options.faults.ignoreVerifierBudget = ignoreBudget;
  options.inlineLimit = 4;
  options.traffic.mode = core::ProfileMode::Naive;
  // Refused, the candidate must be: fast paths of every hot key (four
  // chains of 32) are past what the kernel verifies. The profile's usual
  // 16 per table are not since versions get the clean-up instead of O2.
  if (ignoreBudget)
    options.traffic.maxFastPath = HotKeysPerTable;
  // by_id and by_checksum are keyed by 16-bit fields, which hash-as-array
  // makes direct indexes (no fast path needed): left out, so that all four
  // tables stay fast-path candidates.
  options.tablePasses = core::tablePassNames();
  std::erase(*options.tablePasses, "hash-as-array");
  CorpusProgram program("many_chains.bpf.c", options);
  ASSERT_TRUE(program.ok());
  std::vector<Bytes> hot;
  for (uint32_t i = 0; i < HotKeysPerTable; ++i) {
    program.set("by_source", htonl(0x0a000100 + i), Window{uint16_t(i), 1});
    program.set("by_destination", htonl(0x0a000200 + i), Window{uint16_t(40 - i), 1});
    program.set("by_id", uint32_t(htons(100 + i)), Window{uint16_t(i / 2), 2});
    hot.push_back(buildPacket({.saddr = 0x0a000100 + i, .daddr = 0x0a000200 + i,
                               .id = uint16_t(100 + i), .payload = 64}));
    uint32_t check = uint32_t(hot.back()[24]) | uint32_t(hot.back()[25]) << 8; // ip->check
    program.set("by_checksum", check, Window{uint16_t(i % 7), 3});
  }
  ASSERT_TRUE(program.cycle().installed()); // instrumented, nothing seen yet
  // The samples of one CPU: a thread moved between CPUs halfway (a loaded
  // machine) gives each CPU a chain of its own, a candidate of another
  // shape than the one whose refusal this test is about.
  CpuPin oneCpu;
  for (unsigned round = 0; round < 20; ++round)
    for (const Bytes &packet : hot)
      ASSERT_EQ(program.active(packet), program.original(packet));
  core::CycleReport report = program.cycle();
  // Refused, the retry builds what is already running: it stays.
  ASSERT_EQ(report.outcome, ignoreBudget ? core::CycleOutcome::Unchanged
                                         : core::CycleOutcome::Installed)
      << report.describe();
  const core::SiteDecision *fastPath = nullptr;
  for (const core::SiteDecision &d : report.log.decisions)
    if (d.table == "by_source" && d.pass == "heavy-hitter-fast-path")
      fastPath = &d;
  ASSERT_NE(fastPath, nullptr);
  if (ignoreBudget) {
    EXPECT_FALSE(fastPath->applied);
    EXPECT_EQ(fastPath->detail, "compare chains off: the kernel refused this snapshot's "
                                "specialization with them (cycle 2)");
  } else {
    size_t built = 0;
    for (const core::SiteDecision &d : report.log.decisions)
      built += d.pass == "heavy-hitter-fast-path" && d.applied;
    EXPECT_GE(built, 1u) << "the budget keeps what fits";
    EXPECT_LT(built, 4u) << "and drops what does not";
  }
  for (const Bytes &packet : hot)
    EXPECT_EQ(program.active(packet), program.original(packet));
  Bytes cold = buildPacket({.saddr = 0x0a000130, .daddr = 0x0a000205, .id = 7, .payload = 64});
  EXPECT_EQ(program.active(cold), program.original(cold));
}

TEST(VerifierAcceptance, RefusedFastPathsFallBackInTheSameCycle) { hotKeysInEveryTable(true); }

TEST(VerifierAcceptance, FastPathsMultiplyingPastTheBudgetAreNotBuilt) {
  hotKeysInEveryTable(false);
}

// tests/programs/region_index.bpf.c: the rule bits of TOS t are t for
// t < 128 (the rule, the lowest bit of the seven, is 0..6, or 7 for none);
// the other TOS values have none. 128 distinct words: the class of a
// TOS is a byte loaded from a derived array, the row's byte is not a
// constant on any path the verifier follows.
void setClassRules(CorpusProgram &program) {
  for (uint32_t tos = 0; tos < 128; ++tos)
    program.set("class_rules", tos, tos);
}

// The decision region-as-table took, or nullptr.
const core::SiteDecision *regionDecision(const core::CycleReport &report) {
  for (const core::SiteDecision &d : report.log.decisions)
    if (d.pass == "region-as-table")
      return &d;
  return nullptr;
}

// Every class's packet through the active version and the original: the
// same verdict, and the same counter byte of the same rule counted.
void expectRegionIndexAnswersAsTheOriginal(CorpusProgram &program, const std::string &when) {
  int tallies = program.opt().mapFd("tallies");
  auto counted = [&](int programFd, const Bytes &packet) {
    uint8_t zero[8] = {}, hits[8] = {};
    EXPECT_EQ(bpf_map_update_elem(tallies, &Zero, zero, BPF_ANY), 0);
    RunResult result = runOnce(programFd, packet);
    EXPECT_EQ(bpf_map_lookup_elem(tallies, &Zero, hits), 0);
    return std::make_pair(result, std::vector<uint8_t>(hits, hits + 8));
  };
  for (unsigned tos = 0; tos < 256; ++tos) {
    Bytes packet = buildPacket({.tos = uint8_t(tos)});
    auto expected = counted(program.opt().originalFd(), packet);
    EXPECT_EQ(std::count(expected.second.begin(), expected.second.end(), 1), 1)
        << "premise: the original counts one rule (tos " << tos << ")";
    EXPECT_EQ(counted(program.opt().activeFd(), packet), expected) << when << ", tos " << tos;
  }
}

// A loop-bounded index (0..7) that region-as-table turns into a byte
// loaded from a derived table (0..255), then used to pick a byte of an
// 8-byte value: the column keeps the loop's bound, so the verifier takes
// the region and the program counts and answers as the original.
TEST(VerifierAcceptance, ARegionsValuesKeepTheBoundsTheOriginalProved) {
  CorpusProgram program("region_index.bpf.c");
  ASSERT_TRUE(program.ok());
  setClassRules(program);
  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  EXPECT_EQ(report.refusedByKernel, 0u) << "accepted at once";
  const core::SiteDecision *region = regionDecision(report);
  ASSERT_NE(region, nullptr);
  EXPECT_TRUE(region->applied) << "the loop is a table: " << region->detail;
  EXPECT_EQ(region->table, "class_rules");
  expectRegionIndexAnswersAsTheOriginal(program, "specialized");
}

// With the region's bound left out (a test-only fault), the kernel refuses
// the candidate; without compare chains it is the same object (the region
// stays), which is not loaded again; the same cycle builds it without
// regions and installs that. A later cycle on the
// same snapshot asks the kernel nothing it refused (it cites the first
// cycle); new contents try regions again.
TEST(VerifierAcceptance, ARefusedRegionIsRebuiltWithoutItInTheSameCycleAndRemembered) {
  runtime::OptimizerOptions options = CorpusProgram::noShadow();
  options.faults.unboundedRegionColumns = true;
  CorpusProgram program("region_index.bpf.c", options);
  ASSERT_TRUE(program.ok());
  setClassRules(program);
  core::CycleReport first = program.cycle();
  ASSERT_TRUE(first.installed()) << first.describe();
  // The candidate without compare chains is the object refused (it had
  // none; the region stays): not loaded again.
  EXPECT_EQ(first.refusedByKernel, 1u) << "with the region, once";
  const core::SiteDecision *off = regionDecision(first);
  ASSERT_NE(off, nullptr);
  EXPECT_FALSE(off->applied);
  EXPECT_EQ(off->detail,
            "regions off: the kernel refused this snapshot's specialization with them (cycle 1)");
  expectRegionIndexAnswersAsTheOriginal(program, "without the region");

  for (unsigned repeat = 0; repeat < 3; ++repeat) {
    core::CycleReport later = program.opt().runCycle(/*force=*/true);
    EXPECT_EQ(later.outcome, core::CycleOutcome::Unchanged) << later.describe();
    EXPECT_EQ(later.refusedByKernel, 0u) << "the same snapshot: nothing refused is tried again";
  }

  program.opt().injectFaults({});
  program.set("class_rules", uint32_t(200), uint32_t(0x20));
  core::CycleReport changed = program.cycle();
  ASSERT_TRUE(changed.installed()) << changed.describe();
  EXPECT_EQ(changed.refusedByKernel, 0u);
  const core::SiteDecision *again = regionDecision(changed);
  ASSERT_NE(again, nullptr);
  EXPECT_TRUE(again->applied) << "new contents: the region again: " << again->detail;
  expectRegionIndexAnswersAsTheOriginal(program, "new contents");
}

TEST(VerifierAcceptance, InlineAsmCompilesInProcess) {
  CorpusProgram program("inline_asm.bpf.c");
  ASSERT_TRUE(program.ok());
  program.set("config", Zero, uint32_t(1));
  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  Bytes packet = buildPacket({});
  EXPECT_EQ(program.active(packet).verdict, uint32_t(XDP_DROP)) << "1 + 7 == 8";
  program.set("config", Zero, uint32_t(2));
  EXPECT_EQ(program.active(packet).verdict, uint32_t(XDP_PASS));
  EXPECT_EQ(program.active(packet), program.original(packet));
}

} // namespace
} // namespace morpheus::testing
