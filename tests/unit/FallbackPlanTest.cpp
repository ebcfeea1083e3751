// How each program's guard falls back (ProgramSpec::fallbackFor), from what
// the kernel said about the original: no kernel needed, the facts are given.
#include "backend/bpf/ProgramSpec.h"

#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>

namespace morpheus::bpf {
namespace {

std::string corpus(const std::string &file) {
  return std::string(MORPHEUS_SOURCE_DIR) + "/tests/programs/" + file;
}

// Specializes `file` with a one-word configuration array `table` (index 0
// holds 1) at guard version 5, and returns the log.
core::SpecializationLog plan(const std::string &file, const std::string &table,
                             std::map<std::string, ProgramFacts> facts) {
  auto spec = ProgramSpec::load(corpus(file), {});
  EXPECT_THAT_EXPECTED(spec, llvm::Succeeded());
  if (!spec)
    return {};
  core::TableSnapshot snapshot;
  snapshot[table].complete = true;
  snapshot[table].entries.push_back({{0, 0, 0, 0}, core::Bytes{1, 0, 0, 0}});
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

} // namespace
} // namespace morpheus::bpf
