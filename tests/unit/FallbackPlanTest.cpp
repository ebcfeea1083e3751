// How each program's guard falls back (ProgramSpec::fallbackFor), from what
// the kernel said about the original: no kernel needed, the facts are given.
#include "backend/bpf/BpfObject.h"
#include "backend/bpf/ProgramSpec.h"

#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>

namespace morpheus::bpf {
namespace {

std::string corpus(const std::string &file) {
  return std::string(MORPHEUS_SOURCE_DIR) + "/tests/programs/" + file;
}

// Specializes `file` with a configuration array `table` whose index 0
// holds `value` (one word: 1) at guard version 5, and returns the log.
core::SpecializationLog plan(const std::string &file, const std::string &table,
                             std::map<std::string, ProgramFacts> facts,
                             core::Bytes value = {1, 0, 0, 0}) {
  auto spec = ProgramSpec::load(corpus(file), {});
  EXPECT_THAT_EXPECTED(spec, llvm::Succeeded());
  if (!spec)
    return {};
  core::TableSnapshot snapshot;
  snapshot[table].complete = true;
  snapshot[table].entries.push_back({{0, 0, 0, 0}, std::move(value)});
  SpecializeRequest request;
  request.guardVersion = 5;
  request.programs = std::move(facts);
  auto object = (*spec)->specialize(snapshot, request);
  EXPECT_THAT_EXPECTED(object, llvm::Succeeded());
  return object ? object->log : core::SpecializationLog();
}

const core::GuardDecision *guardOf(const core::SpecializationLog &log, const std::string &name) {
  for (const core::GuardDecision &guard : log.guards)
    if (guard.function == name)
      return &guard;
  return nullptr;
}

TEST(FallbackPlan, InProgramWhenBothVersionsFitTheVerifier) {
  core::SpecializationLog log = plan("tail_call_chain.bpf.c", "step",
                                     {{"chain_entry", {1000, 0}}, {"chain_stage", {1000, 1}}});
  const core::GuardDecision *entry = guardOf(log, "chain_entry");
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->fallback, core::Fallback::InProgram) << entry->detail;
  EXPECT_NE(entry->detail.find("verified in 1000 instructions"), std::string::npos);
}

// Too costly to verify twice, and a tail call would cost the chain a hop:
// not specialized, and every site says why.
TEST(FallbackPlan, DeclinedWhenNeitherFallbackWorks) {
  core::SpecializationLog log = plan("tail_call_chain.bpf.c", "step",
                                     {{"chain_entry", {500000, 0}}, {"chain_stage", {500000, 1}}});
  const core::GuardDecision *entry = guardOf(log, "chain_entry");
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->fallback, core::Fallback::None);
  EXPECT_NE(entry->detail.find("the object makes tail calls"), std::string::npos)
      << entry->detail;
  ASSERT_FALSE(log.decisions.empty());
  for (const core::SiteDecision &decision : log.decisions) {
    EXPECT_FALSE(decision.applied) << decision.detail;
    if (decision.table == "step") {
      EXPECT_NE(decision.detail.find("which has no guard"), std::string::npos) << decision.detail;
    }
  }
}

// Where a tail call works, the version carries no generic copy, even when
// both would fit: half the code to optimize, generate and verify.
TEST(FallbackPlan, TailCallWhereItWorksEvenWhenBothVersionsFit) {
  core::SpecializationLog log = plan("partial_array.bpf.c", "levels", {{"array_prog", {1000, 0}}});
  const core::GuardDecision *entry = guardOf(log, "array_prog");
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->fallback, core::Fallback::TailCall) << entry->detail;
  EXPECT_NE(entry->detail.find("no generic copy"), std::string::npos) << entry->detail;
}

TEST(FallbackPlan, TailCallWhenOnlyThatFits) {
  core::SpecializationLog log =
      plan("partial_array.bpf.c", "levels", {{"array_prog", {500000, 0}}});
  const core::GuardDecision *entry = guardOf(log, "array_prog");
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->fallback, core::Fallback::TailCall) << entry->detail;
  EXPECT_EQ(entry->slot, 0u);
}

TEST(FallbackPlan, NoContextMeansNoTailCall) {
  core::SpecializationLog log =
      plan("entry_without_ctx.bpf.c", "verdict", {{"no_ctx", {500000, 0}}});
  const core::GuardDecision *entry = guardOf(log, "no_ctx");
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->fallback, core::Fallback::None);
  EXPECT_NE(entry->detail.find("no ctx to tail-call with"), std::string::npos) << entry->detail;
  // Offline (nothing known of the kernel): what always works without one.
  log = plan("entry_without_ctx.bpf.c", "verdict", {});
  entry = guardOf(log, "no_ctx");
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->fallback, core::Fallback::InProgram) << entry->detail;
}

// The timer callback runs long after the packet: it guards itself, in the
// program, whenever its program falls back in the program; an entry that
// registers one keeps its generic copy where both fit, though a tail call
// would work.
TEST(FallbackPlan, CallbacksFollowTheirProgram) {
  core::SpecializationLog log =
      plan("timer_callback.bpf.c", "config", {{"timer_prog", {1000, 0}}});
  const core::GuardDecision *callback = guardOf(log, "on_timer");
  ASSERT_NE(callback, nullptr);
  EXPECT_TRUE(callback->callback);
  EXPECT_EQ(callback->fallback, core::Fallback::InProgram) << callback->detail;

  log = plan("timer_callback.bpf.c", "config", {{"timer_prog", {500000, 0}}});
  callback = guardOf(log, "on_timer");
  ASSERT_NE(callback, nullptr);
  EXPECT_EQ(callback->fallback, core::Fallback::None);
  EXPECT_NE(callback->detail.find("callback of program 'timer_prog', whose fallback is tail call"),
            std::string::npos)
      << callback->detail;
}

// In an object that makes tail calls, a stage that makes none falls back
// by tail call when the tail calls that may come before it leave one
// within the kernel's 33, and keeps its generic copy otherwise or when
// nothing is known of them.
TEST(FallbackPlan, AStageThatMakesNoTailCallsFallsBackByOneWhereTheLimitLeavesIt) {
  // many_programs.bpf.c (10 programs): many_entry tail-calls stage_K, which
  // scans rules_K; stage_1's first rule drops UDP port 53.
  core::Bytes dropDns = {17, 2, 53, 0, 53, 0, 0, 0};
  auto stageOne = [&](std::optional<uint32_t> before) {
    ProgramFacts stage{1000, 1, before};
    core::SpecializationLog log = plan("many_programs.bpf.c", "rules_1",
                                       {{"many_entry", {1000, 0}}, {"stage_1", stage}}, dropDns);
    const core::GuardDecision *guard = guardOf(log, "stage_1");
    EXPECT_NE(guard, nullptr);
    return guard ? *guard : core::GuardDecision{};
  };
  core::GuardDecision guard = stageOne(1);
  EXPECT_EQ(guard.fallback, core::Fallback::TailCall) << guard.detail;
  EXPECT_EQ(guard.slot, 1u);
  EXPECT_NE(guard.detail.find("tail calls before it: at most 1"), std::string::npos)
      << guard.detail;
  guard = stageOne(32); // the fallback is the 33rd: allowed
  EXPECT_EQ(guard.fallback, core::Fallback::TailCall) << guard.detail;
  guard = stageOne(33);
  EXPECT_EQ(guard.fallback, core::Fallback::InProgram) << guard.detail;
  EXPECT_NE(guard.detail.find("one past the kernel's 33"), std::string::npos) << guard.detail;
  guard = stageOne(std::nullopt);
  EXPECT_EQ(guard.fallback, core::Fallback::InProgram) << guard.detail;
  EXPECT_NE(guard.detail.find("the object makes tail calls"), std::string::npos)
      << guard.detail;
}

LoadedObject::Code tailCalling(std::set<std::string> arrays, std::optional<unsigned> most) {
  LoadedObject::Code code;
  code.maps = std::move(arrays);
  code.mostTailCalls = most;
  return code;
}

LoadedObject::Code leaf(std::set<std::string> maps = {}) {
  LoadedObject::Code code;
  code.maps = std::move(maps);
  return code;
}

TEST(TailCallsBefore, AStageCountsTheMostAttemptsOfEveryChainToIt) {
  // entry (2 attempts) -> {mid, a}; mid (1) -> b; a and b make none.
  std::map<std::string, LoadedObject::Code> code = {
      {"entry", tailCalling({"first", "config"}, 2)},
      {"mid", tailCalling({"second"}, 1)},
      {"a", leaf({"config"})},
      {"b", leaf()},
      {"unreached", leaf()}};
  ProgramSlots stages = {{"first", {{0, "mid"}, {1, "a"}, {2, "b"}}}, {"second", {{0, "b"}}}};
  std::map<std::string, uint32_t> expected = {{"a", 2}, {"b", 3}};
  EXPECT_EQ(tailCallsBefore("entry", 0, code, stages), expected);
  expected = {{"a", 3}, {"b", 4}};
  EXPECT_EQ(tailCallsBefore("entry", 1, code, stages), expected) << "behind a trampoline";
  // An entry that makes no tail calls starts after what came before it.
  expected = {{"a", 1}};
  EXPECT_EQ(tailCallsBefore("a", 1, code, stages), expected);
}

TEST(TailCallsBefore, CyclesLoopsAndArraysOfOthersLeaveNoBound) {
  std::map<std::string, LoadedObject::Code> code = {{"entry", tailCalling({"first"}, 1)},
                                                    {"loop", tailCalling({"first"}, 1)},
                                                    {"a", leaf()},
                                                    {"b", leaf()}};
  // entry -> {loop, a}; loop -> loop (through its own array) and b.
  ProgramSlots stages = {{"first", {{0, "loop"}, {1, "a"}, {2, "b"}}}};
  EXPECT_TRUE(tailCallsBefore("entry", 0, code, stages).empty())
      << "a and b are reached from loop, which reaches itself";
  // A program that may attempt any number (a tail call in a loop).
  code = {{"entry", tailCalling({"first"}, std::nullopt)}, {"a", leaf()}};
  stages = {{"first", {{1, "a"}}}};
  EXPECT_TRUE(tailCallsBefore("entry", 0, code, stages).empty());
  // An array a version does not own (it holds another object's programs)
  // reaches none of the version's.
  code = {{"entry", tailCalling({"shared"}, 1)}, {"a", leaf()}};
  stages = {{"first", {{1, "a"}}}};
  EXPECT_TRUE(tailCallsBefore("entry", 0, code, stages).empty()) << "a is not reached";
}

} // namespace
} // namespace morpheus::bpf
