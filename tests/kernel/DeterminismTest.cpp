// The checks that compare versions (shadow validation, `morpheus fuzz`)
// compare like with like (runtime/VersionComparison): copies of a program
// that draws random numbers or reads clocks draw and read the same ones,
// hash maps are iterated in the same order in every copy, and the context
// of a sample packet holds values the program tests, so paths gated on it
// run. Each class with a program of its own (tests/programs), and each
// shown able to fail: with the determinism taken away
// (core::FaultInjection) the fuzzer reports a difference on an unchanged
// program, or misses a wrong specialization on the gated path.
#include "Corpus.h"
#include "runtime/Differential.h"
#include "support/Netns.h"

#include <linux/bpf.h>

#include <arpa/inet.h>

#include <array>
#include <map>

namespace morpheus::testing {
namespace {

// A run that must find a difference stops at the first: it is bounded by
// map states, not by time, so a loaded machine makes it slower, never a
// failure (each program here differs within a few hundred states).
constexpr uint64_t FirstDifferenceWithin = 5000;

runtime::FuzzReport fuzz(const std::string &file, double seconds, uint64_t minStates,
                         core::FaultInjection faults = {}) {
  runtime::FuzzOptions options;
  options.faults = faults;
  options.seconds = seconds;
  options.minStates = minStates;
  options.seed = 7;
  auto report = runtime::fuzzProgram(corpusPath(file), options);
  EXPECT_THAT_EXPECTED(report, llvm::Succeeded());
  return report ? *report : runtime::FuzzReport();
}

// The copies agree with each other byte for byte: nothing differed and the
// witness never disagreed with the original.
void expectDeterministic(const runtime::FuzzReport &report, uint64_t minCases) {
  EXPECT_EQ(report.differed, 0u) << report.reproducer;
  EXPECT_EQ(report.nondeterministic, 0u) << "the witness disagreed with the original";
  EXPECT_EQ(report.maskedVerdicts + report.maskedBytes + report.maskedKeySets, 0u);
  EXPECT_GT(report.cases, minCases);
}

// random_sampling.bpf.c's `struct sampling_config`.
struct SamplingConfig {
  uint32_t percent, action;
};

void configureSampling(CorpusProgram &program, uint32_t percent) {
  program.set("sampling_config", uint32_t(0), SamplingConfig{percent, XDP_DROP});
  for (uint32_t i = 0; i < 8; ++i)
    program.set("destinations", htonl(0x0a000001 + i), uint32_t(i % 2 ? XDP_TX : XDP_PASS));
}

// A program that samples with bpf_get_prandom_u32 is validated and
// installed at every cycle (shadow validation on), each cycle after a
// change of its configuration; with the Specialized copy drawing another
// stream than the originals, as every copy did before the copies replayed
// one stream, the same cycles are refused.
TEST(Determinism, SamplingWithRandomNumbersIsValidatedAndInstalled) {
  for (bool unequal : {false, true}) {
    runtime::OptimizerOptions options;
    options.faults.unequalRandomStreams = unequal;
    CorpusProgram sampling("random_sampling.bpf.c", options);
    ASSERT_TRUE(sampling.ok());
    unsigned installed = 0, refused = 0;
    for (uint32_t percent : {50u, 30u, 70u, 40u, 60u}) {
      configureSampling(sampling, percent);
      core::CycleReport report = sampling.cycle();
      installed += report.installed();
      refused += report.outcome == core::CycleOutcome::Refused;
      if (!unequal) {
        EXPECT_TRUE(report.installed()) << "percent " << percent << ": " << report.describe();
        EXPECT_EQ(report.validation.nondeterministic, 0u) << "percent " << percent;
      }
    }
    if (unequal)
      EXPECT_EQ(refused, 5u) << "unequal streams: every cycle must see the difference";
    else
      EXPECT_EQ(installed, 5u);
  }
}

TEST(Determinism, FuzzDrawsOneRandomStreamInEveryCopy) {
  expectDeterministic(fuzz("random_sampling.bpf.c", 2, 8), 300);
  core::FaultInjection unequal;
  unequal.unequalRandomStreams = true;
  runtime::FuzzReport broken = fuzz("random_sampling.bpf.c", 0, FirstDifferenceWithin, unequal);
  EXPECT_GE(broken.differed, 1u) << "the fuzzer must see unequal random streams";
}

// The clocks: every copy reads the step's readings (latched by the first
// copy to run), so a verdict that depends on the microsecond and the
// timestamps a program stores agree between copies. With every copy reading
// the clocks itself, the witness disagrees with the original (or a
// difference shows that does not reproduce).
TEST(Determinism, ClocksReadTheSameInEveryCopy) {
  expectDeterministic(fuzz("clock_slices.bpf.c", 2, 8), 300);
  core::FaultInjection unlatched;
  unlatched.unlatchedClocks = true;
  runtime::FuzzReport broken = fuzz("clock_slices.bpf.c", 4, 8, unlatched);
  EXPECT_GE(broken.nondeterministic + broken.differed, 1u)
      << "copies reading their own clocks must disagree somewhere";
  runtime::OptimizerOptions options;
  CorpusProgram slices("clock_slices.bpf.c", options);
  ASSERT_TRUE(slices.ok());
  for (uint32_t shift : {10u, 11u, 12u}) {
    slices.set("slice_config", uint32_t(0), std::array<uint32_t, 2>{shift, XDP_DROP});
    for (uint32_t i = 0; i < 6; ++i)
      slices.set("slice_destinations", htonl(0x0a000001 + i), uint32_t(XDP_TX));
    core::CycleReport report = slices.cycle();
    EXPECT_TRUE(report.installed()) << "shift " << shift << ": " << report.describe();
    EXPECT_EQ(report.validation.nondeterministic, 0u) << "shift " << shift;
  }
}

// bpf_for_each_map_elem over a hash map answers with the first entry it
// visits: on the unchanged program no difference and no disagreement of
// the witness (the scratch hash maps have one fixed seed); with random
// seeds, the copies visit in different orders and the fuzzer reports a
// difference on a program Morpheus did not get wrong, while the steps on
// which the witness disagreed are counted as nondeterministic.
TEST(Determinism, HashMapsAreIteratedInTheSameOrderInEveryCopy) {
  expectDeterministic(fuzz("hash_iteration.bpf.c", 2, 10), 300);
  core::FaultInjection seeded;
  seeded.randomHashSeeds = true;
  runtime::FuzzReport broken = fuzz("hash_iteration.bpf.c", 0, FirstDifferenceWithin, seeded);
  EXPECT_GE(broken.differed, 1u) << "random hash seeds must show as a difference";
}

// tc_health_check answers only packets that carry the health mark, from a
// table Morpheus makes a compare chain: a chain broken on purpose
// (breakKeyCompare) is found by the fuzzer only when the context holds the
// mark the program tests; with the context zeroed (as every sample's was
// before) the gated path never runs and nothing is found.
TEST(Determinism, FuzzReachesTcCodeGatedOnTheMark) {
  expectDeterministic(fuzz("tc_health_check.bpf.c", 2, 8), 300);
  core::FaultInjection brokenChain;
  brokenChain.breakKeyCompare = true;
  core::FaultInjection brokenChainZeroedContext = brokenChain;
  brokenChainZeroedContext.zeroedContext = true;
  runtime::FuzzReport zeroed = fuzz("tc_health_check.bpf.c", 3, 40, brokenChainZeroedContext);
  EXPECT_EQ(zeroed.differed, 0u) << "a zeroed context must not reach the gated path: "
                                 << zeroed.reproducer;
  EXPECT_GT(zeroed.cases, 1000u);
  runtime::FuzzReport drawn = fuzz("tc_health_check.bpf.c", 0, FirstDifferenceWithin, brokenChain);
  EXPECT_GE(drawn.differed, 1u) << "the broken chain behind the mark must be found";
  EXPECT_NE(drawn.reproducer.find("\"mark\": 18499"), std::string::npos) << drawn.reproducer;
}

// Shadow validation draws the same contexts: the broken chain behind the
// mark is refused before it is installed.
TEST(Determinism, ShadowValidationRefusesAWrongChainGatedOnTheMark) {
  for (bool zeroed : {true, false}) {
    runtime::OptimizerOptions options;
    options.faults.breakKeyCompare = true;
    options.faults.zeroedContext = zeroed;
    CorpusProgram health("tc_health_check.bpf.c", options);
    ASSERT_TRUE(health.ok());
    for (uint32_t i = 0; i < 6; ++i)
      health.set("probe_sources", htonl(0x0a000064 + i), uint32_t(i % 2));
    core::CycleReport report = health.cycle();
    if (zeroed)
      EXPECT_TRUE(report.installed()) << "zeroed context, the wrong chain is not seen: "
                                      << report.describe();
    else
      EXPECT_EQ(report.outcome, core::CycleOutcome::Refused) << report.describe();
  }
}

// xdp_queue_gate works only on receive queue 2 of a device: in a namespace
// whose veth has four receive queues, the fuzzer draws the device and the
// queue and finds the broken chain behind the gate; with the context
// zeroed it never gets there. The namespace also has a veth made without
// numrxqueues, which allocates a queue per CPU but uses one: a queue drawn
// beyond the one in use would make the kernel refuse the run.
TEST(Determinism, FuzzReachesXdpCodeGatedOnTheReceiveQueue) {
  auto scratch = netns::ScratchNamespace::create("determinism");
  ASSERT_THAT_EXPECTED(scratch, llvm::Succeeded());
  const std::string &name = (*scratch)->name();
  ASSERT_THAT_ERROR(netns::runTool({"ip", "-n", name, "link", "add", "queues0", "numrxqueues",
                                    "4", "type", "veth", "peer", "name", "queues1"}),
                    llvm::Succeeded());
  ASSERT_THAT_ERROR(netns::runTool({"ip", "-n", name, "link", "add", "plain0", "type", "veth",
                                    "peer", "name", "plain1"}),
                    llvm::Succeeded());
  std::map<std::string, uint32_t> queues;
  ASSERT_THAT_ERROR(netns::runInNetns(name,
                                      [&]() -> llvm::Error {
                                        auto devices = netns::interfaces();
                                        if (!devices)
                                          return devices.takeError();
                                        for (const netns::Interface &device : *devices)
                                          queues[device.name] = device.receiveQueues;
                                        return llvm::Error::success();
                                      }),
                    llvm::Succeeded());
  // (queues1, the peer, uses as many as it allocates: one per CPU.)
  EXPECT_EQ(queues["lo"], 1u);
  EXPECT_EQ(queues["queues0"], 4u);
  EXPECT_EQ(queues["plain0"], 1u);
  EXPECT_EQ(queues["plain1"], 1u);
  core::FaultInjection brokenChain;
  brokenChain.breakKeyCompare = true;
  core::FaultInjection brokenChainZeroedContext = brokenChain;
  brokenChainZeroedContext.zeroedContext = true;
  runtime::FuzzReport mended, zeroed, drawn;
  ASSERT_THAT_ERROR(netns::runInNetns(name,
                                      [&]() -> llvm::Error {
                                        mended = fuzz("xdp_queue_gate.bpf.c", 2, 8);
                                        zeroed = fuzz("xdp_queue_gate.bpf.c", 3, 40,
                                                      brokenChainZeroedContext);
                                        drawn = fuzz("xdp_queue_gate.bpf.c", 0,
                                                     FirstDifferenceWithin, brokenChain);
                                        return llvm::Error::success();
                                      }),
                    llvm::Succeeded());
  expectDeterministic(mended, 300);
  EXPECT_EQ(zeroed.differed, 0u) << "a zeroed context must not reach queue 2: "
                                 << zeroed.reproducer;
  EXPECT_GT(zeroed.cases, 1000u);
  EXPECT_GE(drawn.differed, 1u) << "the broken chain behind queue 2 must be found";
  EXPECT_NE(drawn.reproducer.find("\"rx_queue_index\": 2"), std::string::npos)
      << drawn.reproducer;
}

} // namespace
} // namespace morpheus::testing
