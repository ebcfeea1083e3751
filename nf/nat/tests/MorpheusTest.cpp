// nat under Morpheus: configured through the control plane, specialized by
// one cycle, the specialized program must treat every packet of the corpus
// exactly as the original does: verdict, output bytes, and what each packet
// leaves in the flow tables and counters.
#include "NatTesting.h"

#include "runtime/Optimizer.h"

#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <llvm/Testing/Support/Error.h>

namespace morpheus::nf::nat::testing {
namespace {

struct Observed {
  RunResult result;
  std::vector<std::pair<nat_flow_key, nat_binding>> out;
  std::vector<std::pair<nat_flow_key, nat_origin>> in;
  std::vector<uint64_t> stats;
};

uint32_t xlatedInstructions(int program) {
  bpf_prog_info info = {};
  uint32_t length = sizeof(info);
  EXPECT_EQ(bpf_obj_get_info_by_fd(program, &info, &length), 0);
  return info.xlated_prog_len / sizeof(bpf_insn);
}

// Runs the corpus on `program` from empty tables and zero counters.
std::vector<Observed> runCorpus(runtime::Optimizer &optimizer, int program,
                                const std::vector<Step> &steps) {
  int outFd = optimizer.mapFd("nat_out"), inFd = optimizer.mapFd("nat_in"),
      statsFd = optimizer.mapFd("nat_stats");
  resetState(outFd, inFd, statsFd);
  std::vector<Observed> observed;
  std::vector<RunResult> results;
  for (const Step &step : steps) {
    RunResult result = morpheus::testing::runOnce(program, packetOf(step, results), step.ifindex);
    results.push_back(result);
    observed.push_back({result, outEntries(outFd), inEntries(inFd), stats(statsFd)});
  }
  return observed;
}

void expectSame(const std::vector<Step> &steps, const std::vector<Observed> &expected,
                const std::vector<Observed> &actual) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    SCOPED_TRACE("step " + std::to_string(i) + ": " + steps[i].name);
    EXPECT_EQ(actual[i].result.verdict, expected[i].result.verdict);
    EXPECT_EQ(actual[i].result.output, expected[i].result.output)
        << morpheus::hexDump(actual[i].result.output);
    EXPECT_EQ(actual[i].out, expected[i].out);
    EXPECT_EQ(actual[i].in, expected[i].in);
    EXPECT_EQ(actual[i].stats, expected[i].stats);
  }
}

TEST(Morpheus, SpecializedProgramMatchesTheOriginalOnTheCorpus) {
  morpheus::testing::NetnsGuard inNamespace(Topology::netns());
  morpheus::testing::PinDir pins("nat_morpheus");
  runtime::OptimizerOptions options;
  options.pinDir = pins.path() + "/nat";
  auto created =
      runtime::Optimizer::create(morpheus::testing::sourcePath("nf/nat/nat.bpf.c"), options);
  ASSERT_THAT_EXPECTED(created, llvm::Succeeded());
  runtime::Optimizer &optimizer = **created;

  TempFile config(standardConfig());
  Error err = loadConfig(config.path(), options.pinDir);
  ASSERT_THAT_ERROR(std::move(err), llvm::Succeeded());
  core::CycleReport report = optimizer.runCycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  for (const core::SiteDecision &decision : report.log.decisions)
    std::printf("  site %u %-11s %-22s %s: %s\n", decision.site, decision.table.c_str(),
                decision.pass.c_str(), decision.applied ? "applied" : "not applied",
                decision.detail.c_str());
  int original = optimizer.originalFd(), specialized = optimizer.activeFd();
  ASSERT_NE(original, specialized);
  std::printf("  %zu instructions specialized, %u original\n", report.instructions,
              xlatedInstructions(original));

  std::vector<Step> steps = corpus(Topology::outsideMac());
  std::vector<Observed> expected = runCorpus(optimizer, original, steps);
  // The corpus exercises translation both ways, not only the stack paths.
  EXPECT_EQ(expected[0].result.verdict, XDP_REDIRECT);
  EXPECT_EQ(expected[1].result.verdict, XDP_REDIRECT);
  expectSame(steps, expected, runCorpus(optimizer, specialized, steps));

  // A control-plane change trips the guard: the specialized program then
  // hands every packet to the original, which must still be the same.
  optimizer.guard().bump();
  expectSame(steps, expected, runCorpus(optimizer, specialized, steps));
}

} // namespace
} // namespace morpheus::nf::nat::testing
