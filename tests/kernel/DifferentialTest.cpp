// The differential fuzzer (runtime/Differential) on the real kernel: it
// finds nothing on correct specializations, it does find a deliberately
// broken pass, and the network functions survive it.
#include "KernelSupport.h"
#include "bench/Bench.h"
#include "runtime/Differential.h"

#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <unistd.h>

using namespace morpheus;

namespace {

// At least `minStates` map states of 24 packets each, whatever the load.
runtime::FuzzReport fuzz(const std::string &relative, double seconds, uint64_t minStates,
                         const std::string &reproducer = "",
                         runtime::MapContents configured = {}, const std::string &program = "",
                         core::FaultInjection faults = {}) {
  runtime::FuzzOptions options;
  options.program = program;
  options.faults = faults;
  options.seconds = seconds;
  options.minStates = minStates;
  options.configured = std::move(configured);
  options.seed = 7;
  options.reproducerPath = reproducer;
  auto report = runtime::fuzzProgram(morpheus::testing::sourcePath(relative), options);
  EXPECT_THAT_EXPECTED(report, llvm::Succeeded());
  return report ? *report : runtime::FuzzReport();
}

// Half of the map states come from the function's own configuration (its
// `morpheus bench` preset, loaded through its control plane), the other
// half are random states built from the maps' BTF layouts.
void expectNoDifference(const std::string &relative, const std::string &preset) {
  auto configured = bench::readPreset(preset);
  ASSERT_THAT_EXPECTED(configured, llvm::Succeeded());
  auto contents = bench::configuredContents(*configured, 4096);
  ASSERT_THAT_EXPECTED(contents, llvm::Succeeded());
  size_t entries = 0;
  for (const auto &[map, rows] : *contents)
    entries += rows.size();
  EXPECT_GT(entries, 0u) << "the preset configured nothing";
  runtime::FuzzReport report = fuzz(relative, 8, 5, "", std::move(*contents));
  EXPECT_EQ(report.differed, 0u) << report.reproducer;
  EXPECT_GT(report.cases, 100u);
  EXPECT_GT(report.configuredStates, 0u);
  EXPECT_LT(report.configuredStates, report.states) << "random states too";
}

} // namespace

TEST(Differential, PolicyFwdSpecializationsBehaveLikeTheOriginal) {
  runtime::FuzzReport report = fuzz("examples/policy_fwd.bpf.c", 5, 22);
  EXPECT_EQ(report.differed, 0u) << report.reproducer;
  EXPECT_GT(report.cases, 500u);
  EXPECT_GT(report.states, 10u);
}

TEST(Differential, CatchesABrokenKeyCompareChain) {
  std::string reproducer = "/tmp/morpheus-differential-test-" +
                           std::to_string(getpid()) + ".json";
  core::FaultInjection broken;
  broken.breakKeyCompare = true;
  // The fuzzer stops at its first difference, which seed 7 meets at its
  // 829th map state: the run is bounded by map states, not by time, so a
  // loaded machine makes it slower, never a failure (120 s were not enough
  // with the suite's cases running side by side).
  runtime::FuzzReport report = fuzz("examples/policy_fwd.bpf.c", 0, 3000, reproducer, {}, "", broken);
  EXPECT_GE(report.differed, 1u);
  ASSERT_FALSE(report.reproducer.empty());
  std::ifstream written(reproducer);
  ASSERT_TRUE(bool(written));
  std::string text((std::istreambuf_iterator<char>(written)), {});
  EXPECT_NE(text.find("\"packet\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"policy\""), std::string::npos) << text;
  unlink(reproducer.c_str());
}

// The fuzzer's specialized version tail-calls its own stages (as a live
// version does), not the original's: a broken compare chain in a stage the
// entry reaches (tests/programs/staged_policy.bpf.c, the UDP stage) is a
// difference, and without the fault there is none.
TEST(Differential, SpecializedStagesAreTheOnesCompared) {
  runtime::FuzzOptions options;
  options.program = "staged_entry";
  options.seconds = 0; // bounded by map states, and stops at the first difference
  options.minStates = 500;
  options.seed = 7;
  options.faults.breakKeyCompare = true;
  std::string path = morpheus::testing::sourcePath("tests/programs/staged_policy.bpf.c");
  auto broken = runtime::fuzzProgram(path, options);
  ASSERT_THAT_EXPECTED(broken, llvm::Succeeded());
  EXPECT_GE(broken->differed, 1u);
  options.seconds = 3;
  options.minStates = 3;
  options.faults = {};
  auto mended = runtime::fuzzProgram(path, options);
  ASSERT_THAT_EXPECTED(mended, llvm::Succeeded());
  EXPECT_EQ(mended->differed, 0u) << mended->reproducer;
  EXPECT_GT(mended->cases, 50u);
}

TEST(Differential, RouterSmoke) { expectNoDifference("nf/router/router.bpf.c", "router"); }
TEST(Differential, L2SwitchSmoke) {
  expectNoDifference("nf/l2switch/l2switch.bpf.c", "l2switch");
}
TEST(Differential, FirewallSmoke) {
  expectNoDifference("nf/firewall/firewall.bpf.c", "firewall");
}
TEST(Differential, LoadBalancerSmoke) { expectNoDifference("nf/lb/lb.bpf.c", "lb"); }
// The fuzzer found a real bug here: with a constant nat_config.external_count
// that is not a power of two, O2 dropped the program's `& 7` after
// `% external_count` and the verifier rejected the specialized program.
// backend/bpf/VerifierBounds restores such bounds.
TEST(Differential, NatSmoke) { expectNoDifference("nf/nat/nat.bpf.c", "nat"); }

// The programs of tests/programs, one kind of map each and all of them:
// their copies (rings, queues, maps of maps, program arrays, devices,
// storage, data sections, pins by name) compare alike.
class DifferentialOfOneKind : public ::testing::TestWithParam<const char *> {};
TEST_P(DifferentialOfOneKind, Smoke) {
  runtime::FuzzReport report =
      fuzz(std::string("tests/programs/") + GetParam() + ".bpf.c", 1.5, 5, "", {}, "entry");
  EXPECT_EQ(report.differed, 0u) << report.reproducer;
  EXPECT_GT(report.cases, 100u);
}
INSTANTIATE_TEST_SUITE_P(Differential, DifferentialOfOneKind,
                         ::testing::Values("maps_all", "maps_hash", "maps_array", "maps_percpu",
                                           "maps_lru", "maps_lpm", "maps_ringbuf", "maps_perf",
                                           "maps_queue_stack", "maps_in_map", "maps_devmap",
                                           "maps_storage", "maps_globals", "maps_pinned",
                                           "maps_prog_array"),
                         [](const auto &info) { return std::string(info.param); });

// Every program of the corpus (tests/programs/, one corner of C or of the
// kernel each) through the fuzzer, briefly: no difference, and enough
// cases to mean something.
struct CorpusCase {
  const char *file;
  const char *cflag; // -mcpu (programs that need v3/v4), -I (a generated header)
  std::optional<bpf::ProgramType> programType = std::nullopt; // --prog-type
  // The fuzzer's budget includes compiling: a program including a whole
  // vmlinux.h takes about 3 s to compile here.
  double seconds = 2;
};

class CorpusSmoke : public ::testing::TestWithParam<CorpusCase> {};

TEST_P(CorpusSmoke, NoDifference) {
  runtime::FuzzOptions options;
  options.seconds = GetParam().seconds;
  options.minStates = 3;
  options.seed = 7;
  options.shrinkSeconds = 2;
  if (GetParam().cflag)
    options.frontend.cflags = {GetParam().cflag};
  options.frontend.programType = GetParam().programType;
  auto report = runtime::fuzzProgram(
      morpheus::testing::sourcePath(std::string("tests/programs/") + GetParam().file), options);
  ASSERT_THAT_EXPECTED(report, llvm::Succeeded());
  EXPECT_EQ(report->differed, 0u) << report->reproducer;
  EXPECT_GT(report->cases, 50u);
}

// An object whose first program is a tracepoint (BPF_PROG_TEST_RUN cannot
// run it: the kernel answers 524): fuzz takes the first program it can
// run, says which, and finds no difference in it.
TEST(Differential, FuzzTakesTheFirstProgramItCanRun) {
  runtime::FuzzReport report = fuzz("tests/programs/tracepoint_feeds_xdp.bpf.c", 1, 2);
  EXPECT_EQ(report.program, "gate") << "the XDP program, not the tracepoint before it";
  EXPECT_EQ(report.type, bpf::ProgramType::Xdp);
  EXPECT_EQ(report.programs, 2u);
  EXPECT_EQ(report.differed, 0u) << report.reproducer;
  EXPECT_GT(report.cases, 0u) << "the gate ran";
}

// An object the kernel's libbpf cannot load: the error names the file once
// and says why (its kernel function), as `morpheus fuzz` prints it.
TEST(Differential, FuzzOfAnObjectThatCannotLoadNamesTheFileOnceAndTheCause) {
  std::string path = morpheus::testing::sourcePath("tests/kernel/missing_kfunc.bpf.c");
  runtime::FuzzOptions options;
  options.seconds = 1;
  auto refused = runtime::fuzzProgram(path, options);
  ASSERT_FALSE(bool(refused));
  std::string message = llvm::toString(refused.takeError());
  EXPECT_EQ(message.rfind(path + ": object 'missing_kfunc': load failed: extern (func ksym) "
                                 "'morpheus_no_such_kfunc': not found",
                          0),
            0u)
      << message;
  EXPECT_EQ(message.find(path, 1), std::string::npos) << message;
}

// Named explicitly, a program fuzz cannot run is refused before anything
// is loaded, the message naming it, its section and its type.
TEST(Differential, FuzzRefusesATracepointNamedExplicitly) {
  runtime::FuzzOptions options;
  options.program = "count_test_runs";
  options.seconds = 1;
  auto refused = runtime::fuzzProgram(
      morpheus::testing::sourcePath("tests/programs/tracepoint_feeds_xdp.bpf.c"), options);
  ASSERT_FALSE(bool(refused)) << "a tracepoint program cannot be fuzzed";
  std::string message = llvm::toString(refused.takeError());
  EXPECT_NE(message.find("program 'count_test_runs' is a tracepoint program (section "
                         "'tracepoint/bpf_test_run/bpf_test_finish')"),
            std::string::npos)
      << message;
  options.program = "no_such_program";
  auto unknown = runtime::fuzzProgram(
      morpheus::testing::sourcePath("tests/programs/tracepoint_feeds_xdp.bpf.c"), options);
  ASSERT_FALSE(bool(unknown));
  message = llvm::toString(unknown.takeError());
  EXPECT_NE(message.find("no program named 'no_such_program' (it has count_test_runs, gate)"),
            std::string::npos)
      << message;
}

// Random tries over an inline limit of 2: the IPv4 ones become derived
// tables (lpm-as-array; LpmAsArray.* shows it fires on this program), the
// IPv6 ones keep their lookup; no difference in verdicts, bytes or maps.
TEST(Differential, LpmTriesAsDerivedTables) {
  runtime::FuzzOptions options;
  options.seconds = 3;
  options.minStates = 3;
  options.seed = 11;
  options.shrinkSeconds = 2;
  options.inlineLimit = 2;
  auto report = runtime::fuzzProgram(
      morpheus::testing::sourcePath("tests/programs/lpm_nested.bpf.c"), options);
  ASSERT_THAT_EXPECTED(report, llvm::Succeeded());
  EXPECT_EQ(report->differed, 0u) << report->reproducer;
  EXPECT_GT(report->cases, 50u);
}

// Tries of a few prefix lengths become derived hashes, one per length
// (lpm-as-hash; LpmAsHash.* shows it fires on this program): half of the
// states are the bench preset's (1,000 IPv4 /24s; routes6 and tagged of
// two lengths each), the random ones with an inline limit of 0 so that
// their small tries (IPv4, IPv6 or tagged) are hashed too; no difference
// in verdicts, bytes or maps.
TEST(Differential, LpmTriesOfOneLengthAsDerivedHashes) {
  auto preset = bench::readPreset("lpm_single_length");
  ASSERT_THAT_EXPECTED(preset, llvm::Succeeded());
  auto contents = bench::configuredContents(*preset, 4096);
  ASSERT_THAT_EXPECTED(contents, llvm::Succeeded());
  runtime::FuzzOptions options;
  options.seconds = 4;
  options.minStates = 4;
  options.seed = 13;
  options.shrinkSeconds = 2;
  options.inlineLimit = 0;
  options.configured = std::move(*contents);
  auto report = runtime::fuzzProgram(
      morpheus::testing::sourcePath("tests/programs/lpm_single_length.bpf.c"), options);
  ASSERT_THAT_EXPECTED(report, llvm::Succeeded());
  EXPECT_EQ(report->differed, 0u) << report->reproducer;
  EXPECT_GT(report->cases, 50u);
  EXPECT_GT(report->configuredStates, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Programs, CorpusSmoke,
    ::testing::Values(CorpusCase{"entry_without_ctx.bpf.c", nullptr},
                      CorpusCase{"timer_callback.bpf.c", nullptr},
                      CorpusCase{"loop_callback.bpf.c", nullptr},
                      CorpusCase{"pointer_compare.bpf.c", nullptr},
                      CorpusCase{"padded_key.bpf.c", nullptr},
                      CorpusCase{"partial_array.bpf.c", nullptr},
                      CorpusCase{"field_counter.bpf.c", nullptr},
                      CorpusCase{"sparse_array.bpf.c", nullptr},
                      CorpusCase{"large_array.bpf.c", nullptr},
                      CorpusCase{"inner_config.bpf.c", nullptr},
                      CorpusCase{"conn_fallback.bpf.c", nullptr},
                      CorpusCase{"out_param.bpf.c", nullptr},
                      CorpusCase{"for_each_sweep.bpf.c", nullptr},
                      CorpusCase{"devmap_ports.bpf.c", nullptr},
                      CorpusCase{"copied_key.bpf.c", nullptr},
                      CorpusCase{"legacy_maps.bpf.c", nullptr},
                      CorpusCase{"iproute2_tail_calls.bpf.c", nullptr},
                      CorpusCase{"tc_store_bytes.bpf.c", nullptr},
                      CorpusCase{"rule_hits.bpf.c", nullptr},
                      CorpusCase{"percpu_config.bpf.c", nullptr},
                      CorpusCase{"globals_config.bpf.c", nullptr},
                      CorpusCase{"globals_copy.bpf.c", nullptr},
                      CorpusCase{"composite_l4lb.bpf.c", nullptr},
                      CorpusCase{"composite_filter.bpf.c", nullptr},
                      CorpusCase{"deep_stack_clock.bpf.c", nullptr},
                      CorpusCase{"classic_loads_clock.bpf.c", nullptr},
                      CorpusCase{"build_mcpu.bpf.c", "-mcpu=v3"},
                      CorpusCase{"build_core_vmlinux.bpf.c", "-I" MORPHEUS_VMLINUX_DIR,
                                 std::nullopt, 6},
                      CorpusCase{"integer_lookup.bpf.c", nullptr},
                      CorpusCase{"udiv_bound.bpf.c", "-mcpu=v2"},
                      CorpusCase{"urem_bound.bpf.c", "-mcpu=v2"},
                      CorpusCase{"sdiv_bound.bpf.c", "-mcpu=v4"},
                      CorpusCase{"srem_bound.bpf.c", "-mcpu=v4"},
                      CorpusCase{"long_body.bpf.c", "-mcpu=v2"},
                      CorpusCase{"filled_by_packets.bpf.c", nullptr},
                      CorpusCase{"global_function_value.bpf.c", nullptr},
                      CorpusCase{"many_chains.bpf.c", nullptr},
                      CorpusCase{"inline_asm.bpf.c", nullptr},
                      CorpusCase{"tail_call_chain.bpf.c", nullptr},
                      CorpusCase{"tc_classifier.bpf.c", nullptr},
                      CorpusCase{"lpm_nested.bpf.c", nullptr},
                      CorpusCase{"lpm_leading.bpf.c", nullptr},
                      CorpusCase{"lpm_single_length.bpf.c", nullptr},
                      CorpusCase{"small_key_domain.bpf.c", nullptr},
                      CorpusCase{"constant_field.bpf.c", nullptr},
                      CorpusCase{"value_range.bpf.c", nullptr},
                      CorpusCase{"acl_protocols.bpf.c", nullptr},
                      CorpusCase{"rule_sets.bpf.c", nullptr},
                      CorpusCase{"region_index.bpf.c", nullptr},
                      CorpusCase{"snapshot_parity.bpf.c", nullptr},
                      CorpusCase{"build_legacy_section.bpf.c", nullptr, bpf::ProgramType::Xdp}),
    [](const auto &info) {
      std::string name = info.param.file;
      name = name.substr(0, name.find('.'));
      name.erase(std::remove(name.begin(), name.end(), '_'), name.end());
      return name;
    });
