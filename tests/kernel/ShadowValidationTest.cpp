// Pre-swap shadow validation (runtime/ShadowValidation) in the optimizer
// cycle: a correct candidate is validated and installed, a wrong one (the
// test-only broken key compare) is refused with a reproducer while
// the running program goes on, and the time it takes is reported; after a
// change in one tail-called stage's table, that stage is validated with
// its own specialized code and an unchanged stage is left out.
#include "Corpus.h"
#include "PolicyFwd.h"

#include <linux/bpf.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <set>

namespace morpheus::testing {
namespace {

void configure(PolicyFwd &fwd) {
  fwd.setConfig(CFG_POLICY_ENABLED, ACTION_PASS);
  for (uint32_t i = 0; i < 12; ++i) // a table small enough to become a compare chain
    fwd.setPolicy(policyKey(0x0a000100 + i, 80, IPPROTO_UDP),
                  policyValue(i % 2 ? ACTION_DROP : ACTION_PASS));
}

TEST(ShadowValidation, CorrectCandidateIsValidatedAndInstalled) {
  PolicyFwd fwd;
  ASSERT_TRUE(fwd.ok());
  configure(fwd);
  core::CycleReport report = fwd.specialize();
  EXPECT_GT(report.times.validationMs, 0);
  EXPECT_TRUE(report.reproducer.empty());
  std::printf("shadow validation of policy_fwd: %.1f ms (t2 %.1f ms)\n",
              report.times.validationMs, report.times.codegenMs);
}

// Startup, validation and injection are broken down as t2 is (PhaseClock):
// consecutive phases inside their total, each step that ran named once.
void expectNamed(const std::vector<core::BuildPhase> &phases,
                 std::initializer_list<std::string> names, const std::string &what) {
  for (const std::string &name : names)
    EXPECT_EQ(std::count_if(phases.begin(), phases.end(),
                            [&](const core::BuildPhase &phase) { return phase.phase == name; }),
              1)
        << what << ": " << name;
}

void expectWithin(const std::vector<core::BuildPhase> &phases, double totalMs,
                  const std::string &what) {
  double sum = 0;
  for (const core::BuildPhase &phase : phases) {
    EXPECT_GE(phase.ms, 0) << what << ": " << phase.phase;
    sum += phase.ms;
  }
  EXPECT_LE(sum, totalMs + 0.01) << what << ": the phases ran inside the total";
  EXPECT_GT(sum, 0) << what;
}

TEST(ShadowValidation, StartupValidationAndInjectionAreBrokenDownByPhase) {
  PolicyFwd fwd;
  ASSERT_TRUE(fwd.ok());
  const runtime::Optimizer &opt = fwd.opt();
  expectNamed(opt.startupPhases(),
              {"frontend (source to IR)", "code generation of the original", "analysis",
               "load and verify the original", "pins"},
              "startup");
  expectWithin(opt.startupPhases(), opt.startupMs(), "startup");

  configure(fwd);
  core::CycleReport report = fwd.specialize();
  ASSERT_TRUE(report.installed()) << report.describe();
  expectNamed(report.times.validationPhases,
              {"what changed (validation scope)", "the live program arrays read",
               "the snapshot's keys and entries gathered", "the scratch guard",
               "map image (live entries read)",
               "scratch maps created and filled", "load and verify the original copy",
               "the specialized copy's fallback and profile maps",
               "load and verify the specialized copy", "packets run through the three copies",
               "map comparison", "copies released"},
              "validation");
  expectWithin(report.times.validationPhases, report.times.validationMs, "validation");
  expectNamed(report.times.injectionPhases,
              {"load and verify the version", "stage arrays filled", "install"}, "injection");
  expectWithin(report.times.injectionPhases, report.times.injectionMs, "injection");
  // t2's planning by step, then the passes, the clean-up and code generation.
  expectNamed(report.log.phases,
              {"clone", "planning: guard plan (generic copies)", "planning: verifier budgets",
               "clean-up", "code generation"},
              "t2");
}

TEST(ShadowValidation, WrongCandidateIsRefusedAndTheRunningProgramStays) {
  PolicyFwd fwd;
  ASSERT_TRUE(fwd.ok());
  configure(fwd);
  fwd.specialize();
  int running = fwd.opt().activeFd();
  uint64_t version = fwd.opt().installedVersion();

  fwd.setPolicy(policyKey(0x0a000200, 80, IPPROTO_UDP), policyValue(ACTION_DROP));
  fwd.opt().injectFaults({.breakKeyCompare = true});
  core::CycleReport refused = fwd.opt().runCycle();
  fwd.opt().injectFaults({});

  EXPECT_EQ(refused.outcome, core::CycleOutcome::Refused) << refused.describe();
  EXPECT_TRUE(refused.detail.starts_with("shadow validation: packet ")) << refused.detail;
  EXPECT_EQ(fwd.opt().activeFd(), running);
  EXPECT_EQ(fwd.opt().installedVersion(), version);
  // The stale program hands packets to the original, which sees the update.
  Bytes packet = buildPacket(PacketSpec{.daddr = 0x0a000200, .dport = 80});
  EXPECT_EQ(runOnce(running, packet).verdict, uint32_t(XDP_DROP));

  ASSERT_FALSE(refused.reproducer.empty());
  nlohmann::json reproducer = nlohmann::json::parse(refused.reproducer);
  EXPECT_EQ(reproducer["difference"], refused.differenceKey);
  EXPECT_TRUE(reproducer["packet"].is_number()) << reproducer.dump();
  EXPECT_EQ(reproducer["check"], "shadow validation");
  EXPECT_EQ(reproducer["packet"].get<size_t>(), reproducer["packets"].size());
  const nlohmann::json &last = reproducer["packets"].back();
  EXPECT_NE(last["original"], last["specialized"]);

  // With the pass mended the next cycle validates and installs.
  core::CycleReport mended = fwd.opt().runCycle();
  EXPECT_TRUE(mended.installed()) << mended.describe();
  EXPECT_EQ(runOnce(fwd.opt().activeFd(), packet).verdict, uint32_t(XDP_DROP));
}


struct TcpRule {
  uint16_t blockedPort, pad;
  uint32_t verdict;
};

std::set<std::string> asSet(const std::vector<std::string> &names) {
  return {names.begin(), names.end()};
}

// tests/programs/staged_policy.bpf.c: the entry tail-calls a UDP stage (a
// hash of destinations, a compare chain once specialized) or a TCP stage
// (one folded configuration slot). After a change in one stage's table,
// validation loads that stage and the entry, running the candidate's own
// stages (a wrong compare chain planted in the UDP stage is refused: the
// copies used to tail-call the original's stages, and passed it), and
// leaves the other stage out, saying so.
TEST(ShadowValidation, AChangedStageIsValidatedAndAnUnchangedStageIsSkipped) {
  runtime::OptimizerOptions options; // shadow validation on
  options.program = "staged_entry";
  CorpusProgram program("staged_policy.bpf.c", options);
  ASSERT_TRUE(program.ok());
  for (uint32_t i = 0; i < 6; ++i)
    program.set("udp_policy", htonl(0x0a000100 + i), uint32_t(i % 2 ? XDP_DROP : XDP_TX));
  program.set("tcp_config", uint32_t(0), TcpRule{22, 0, XDP_DROP});
  core::CycleReport first = program.cycle();
  ASSERT_TRUE(first.installed()) << first.describe();
  EXPECT_TRUE(first.validation.skipped.empty());
  EXPECT_EQ(first.validation.whyWhole, "no version installed yet");
  const core::SiteDecision *chain = CorpusProgram::decision(first, "udp_policy", true);
  ASSERT_NE(chain, nullptr) << first.log.toText();

  program.set("udp_policy", htonl(0x0a000200), uint32_t(XDP_DROP));
  program.opt().injectFaults({.breakKeyCompare = true});
  core::CycleReport refused = program.cycle();
  program.opt().injectFaults({});
  EXPECT_EQ(refused.outcome, core::CycleOutcome::Refused) << refused.describe();
  EXPECT_EQ(asSet(refused.validation.validated), asSet({"staged_entry", "udp_stage"}));
  EXPECT_EQ(refused.validation.skipped, std::vector<std::string>{"tcp_stage"})
      << refused.validation.whyWhole;

  core::CycleReport mended = program.cycle();
  ASSERT_TRUE(mended.installed()) << mended.describe();
  EXPECT_EQ(asSet(mended.validation.validated), asSet({"staged_entry", "udp_stage"}));
  EXPECT_EQ(mended.validation.skipped, std::vector<std::string>{"tcp_stage"});

  program.set("tcp_config", uint32_t(0), TcpRule{23, 0, XDP_DROP});
  core::CycleReport tcp = program.cycle();
  ASSERT_TRUE(tcp.installed()) << tcp.describe();
  EXPECT_EQ(asSet(tcp.validation.validated), asSet({"staged_entry", "tcp_stage"}));
  EXPECT_EQ(tcp.validation.skipped, std::vector<std::string>{"udp_stage"});

  for (PacketSpec spec : {PacketSpec{.daddr = 0x0a000200}, PacketSpec{.daddr = 0x0a000101},
                          PacketSpec{.daddr = 0x0a000102}, PacketSpec{.daddr = 0x0a000300},
                          PacketSpec{.protocol = 6, .dport = 23},
                          PacketSpec{.protocol = 6, .dport = 22}}) {
    Bytes packet = buildPacket(spec);
    EXPECT_EQ(program.active(packet), program.original(packet))
        << std::hex << spec.daddr << " " << std::dec << spec.dport;
  }
}

} // namespace
} // namespace morpheus::testing
