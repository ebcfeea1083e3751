// Every path that can run specialized code is guarded: entries without a
// ctx, callbacks the kernel calls later (bpf_timer) or from a helper
// (bpf_loop), and programs that chain tail calls, whose fallback must not
// cost a hop. Programs: tests/programs/.
#include "Corpus.h"

#include "backend/bpf/BpfObject.h"

#include <bpf/bpf.h>
#include <linux/bpf.h>

#include <chrono>
#include <thread>
#include <llvm/Testing/Support/Error.h>

namespace morpheus::testing {
namespace {

const uint32_t Zero = 0;

TEST(GuardCoverage, EntryWithoutContextSeesAnUpdateOnTheNextPacket) {
  CorpusProgram program("entry_without_ctx.bpf.c");
  ASSERT_TRUE(program.ok());
  program.set("verdict", Zero, uint32_t(XDP_DROP));
  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  Bytes packet = buildPacket({});
  EXPECT_EQ(program.active(packet).verdict, uint32_t(XDP_DROP)) << "specialized for DROP";

  program.set("verdict", Zero, uint32_t(XDP_PASS));
  EXPECT_EQ(program.active(packet).verdict, uint32_t(XDP_PASS))
      << "the packet right after an update through Morpheus must see it";
  EXPECT_EQ(program.original(packet).verdict, uint32_t(XDP_PASS));
  ASSERT_TRUE(program.cycle().installed());
  EXPECT_EQ(program.active(packet).verdict, uint32_t(XDP_PASS)) << "re-specialized";
}

// Waits (up to 5 s: the callback runs in a softirq soon after the packet)
// for the timer callback to write `seen`, and returns what it wrote.
uint64_t awaitCallback(CorpusProgram &program) {
  uint64_t seen = 0;
  for (int i = 0; i < 5000 && !seen; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(bpf_map_lookup_elem(program.opt().mapFd("seen"), &Zero, &seen), 0);
  }
  return seen;
}

TEST(GuardCoverage, TimerCallbackSeesAnUpdateMadeBeforeItRuns) {
  CorpusProgram program("timer_callback.bpf.c");
  ASSERT_TRUE(program.ok());
  program.set("config", Zero, uint32_t(111));
  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  ASSERT_NE(CorpusProgram::decision(report, "config", true), nullptr)
      << "the callback's lookup is specialized (guarded by the callback itself)";
  Bytes packet = buildPacket({});
  // The first packet arms the timer with the running (specialized)
  // version's callback; later packets only restart it.
  EXPECT_EQ(program.active(packet).verdict, uint32_t(XDP_PASS));
  EXPECT_EQ(awaitCallback(program), 111u);

  program.set("config", Zero, uint32_t(222));
  uint64_t cleared = 0;
  ASSERT_EQ(bpf_map_update_elem(program.opt().mapFd("seen"), &Zero, &cleared, BPF_ANY), 0);
  EXPECT_EQ(program.active(packet).verdict, uint32_t(XDP_PASS));
  EXPECT_EQ(awaitCallback(program), 222u)
      << "the callback set by the now stale version must read the live table";
}

TEST(GuardCoverage, LoopCallbackSeesAnUpdateOnTheNextPacket) {
  CorpusProgram program("loop_callback.bpf.c");
  ASSERT_TRUE(program.ok());
  for (uint32_t index = 0; index < 8; ++index)
    program.set("weights", index, uint32_t(10));
  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  for (uint8_t tos = 0; tos < 8; ++tos) {
    Bytes packet = buildPacket({.tos = tos});
    EXPECT_EQ(program.active(packet), program.original(packet)) << "tos " << int(tos);
  }
  Bytes eight = buildPacket({.tos = 7}); // sums all eight weights: 80
  EXPECT_EQ(program.active(eight).verdict, uint32_t(XDP_PASS));
  program.set("weights", Zero, uint32_t(50)); // 120 > 100
  EXPECT_EQ(program.original(eight).verdict, uint32_t(XDP_DROP));
  EXPECT_EQ(program.active(eight).verdict, uint32_t(XDP_DROP))
      << "the packet right after an update through Morpheus must see it";
}

// Hop counter: the payload byte every hop increments (tail_call_chain.bpf.c).
const size_t CounterOffset = 14 + 20 + 8;

TEST(GuardCoverage, FallbackCostsNoTailCall) {
  CorpusProgram program("tail_call_chain.bpf.c");
  ASSERT_TRUE(program.ok());
  program.set("step", Zero, uint32_t(1));
  // The chain's next stage: the original stage program on the live maps.
  bpf::LoadOptions live;
  live.maps = {{"step", program.opt().mapFd("step")}, {"jumps", program.opt().mapFd("jumps")}};
  auto stages = bpf::LoadedObject::load(program.opt().spec().originalElf(),
                                        program.opt().spec().objectName(), live);
  ASSERT_THAT_EXPECTED(stages, llvm::Succeeded());
  int stage = stages->programFd("chain_stage");
  ASSERT_EQ(bpf_map_update_elem(program.opt().mapFd("jumps"), &Zero, &stage, BPF_ANY), 0);

  Bytes packet = buildPacket({});
  RunResult original = program.original(packet);
  ASSERT_EQ(original.verdict, uint32_t(XDP_TX));
  EXPECT_EQ(original.output[CounterOffset] - packet[CounterOffset], 34)
      << "1 + 33 tail calls, the kernel's limit";
  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  EXPECT_EQ(program.active(packet), original);

  program.set("step", Zero, uint32_t(1)); // a change through Morpheus: the guard trips
  RunResult fallback = program.active(packet);
  EXPECT_EQ(fallback.output[CounterOffset] - packet[CounterOffset], 34)
      << "the fallback must not cost a hop";
  EXPECT_EQ(fallback, original);
}

} // namespace
} // namespace morpheus::testing
