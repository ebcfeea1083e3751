// How one step's three observations are compared
// (runtime::compareObservations): the specialized version against the
// original wherever the witness agreed with the original, byte for byte;
// what the witness did not reproduce is left uncompared in that step only,
// and the step is counted as nondeterministic, not as a difference. No
// kernel needed: the observations are given.
#include "runtime/VersionComparison.h"

#include <gtest/gtest.h>

namespace morpheus::runtime {
namespace {

using core::Bytes;

Observation seen(uint32_t verdict, Bytes output, Bytes context = {}) {
  Observation observation;
  observation.verdict = verdict;
  observation.output = std::move(output);
  observation.context = std::move(context);
  return observation;
}

StepOutcome step(Observation original, Observation witness, Observation specialized) {
  StepOutcome outcome;
  outcome.observed[size_t(Version::Original)] = std::move(original);
  outcome.observed[size_t(Version::Witness)] = std::move(witness);
  outcome.observed[size_t(Version::Specialized)] = std::move(specialized);
  return outcome;
}

Bytes sixteen(uint8_t at3, uint8_t at12) {
  Bytes bytes(16, 0);
  bytes[3] = at3;
  bytes[12] = at12;
  return bytes;
}

TEST(ComparisonPolicy, AgreeingWitnessLeavesEveryByteCompared) {
  MaskCounts counts;
  StepOutcome outcome = step(seen(2, sixteen(1, 1)), seen(2, sixteen(1, 1)), seen(2, sixteen(1, 2)));
  compareObservations(outcome, counts);
  ASSERT_TRUE(outcome.difference.has_value()) << "a byte the witness reproduced differs";
  EXPECT_NE(outcome.difference->find("byte 12"), std::string::npos) << *outcome.difference;
  EXPECT_FALSE(outcome.nondeterministic);
  EXPECT_EQ(counts.steps, 0u);
}

TEST(ComparisonPolicy, WhatTheWitnessDidNotReproduceIsNotComparedInThatStep) {
  MaskCounts counts;
  // The witness differs in byte 3 (word 0): the specialized version's byte
  // 3 is not compared; byte 12 (word 1) still is.
  StepOutcome masked = step(seen(2, sixteen(1, 1)), seen(2, sixteen(9, 1)), seen(2, sixteen(5, 1)));
  compareObservations(masked, counts);
  EXPECT_FALSE(masked.difference.has_value()) << *masked.difference;
  EXPECT_TRUE(masked.nondeterministic);
  EXPECT_EQ(counts.steps, 1u);
  EXPECT_EQ(counts.bytes, 8u); // one 8-byte word

  StepOutcome elsewhere =
      step(seen(2, sixteen(1, 1)), seen(2, sixteen(9, 1)), seen(2, sixteen(1, 7)));
  compareObservations(elsewhere, counts);
  ASSERT_TRUE(elsewhere.difference.has_value()) << "outside the word the witness changed";
  EXPECT_NE(elsewhere.difference->find("byte 12"), std::string::npos) << *elsewhere.difference;
  EXPECT_TRUE(elsewhere.nondeterministic);

  // The next step, with a witness that agrees: byte 3 is compared again
  // (masks are not kept).
  StepOutcome next = step(seen(2, sixteen(1, 1)), seen(2, sixteen(1, 1)), seen(2, sixteen(5, 1)));
  compareObservations(next, counts);
  ASSERT_TRUE(next.difference.has_value()) << "a mask of an earlier step must not hide it";
  EXPECT_NE(next.difference->find("byte 3"), std::string::npos) << *next.difference;
  EXPECT_FALSE(next.nondeterministic);
}

TEST(ComparisonPolicy, VerdictsAndContexts) {
  MaskCounts counts;
  StepOutcome verdict = step(seen(2, sixteen(1, 1)), seen(2, sixteen(1, 1)), seen(1, sixteen(1, 1)));
  compareObservations(verdict, counts);
  ASSERT_TRUE(verdict.difference.has_value());
  EXPECT_NE(verdict.difference->find("verdict: original 2, specialized 1"), std::string::npos);

  // A verdict the witness did not reproduce: neither it nor the output
  // (which may then differ in length) is compared.
  StepOutcome unsure = step(seen(2, sixteen(1, 1)), seen(1, Bytes(4, 0)), seen(3, Bytes(9, 9)));
  compareObservations(unsure, counts);
  EXPECT_FALSE(unsure.difference.has_value()) << *unsure.difference;
  EXPECT_TRUE(unsure.nondeterministic);
  EXPECT_EQ(counts.verdicts, 1u);

  // The context after the run (a mark the program set) is compared too.
  StepOutcome mark = step(seen(0, sixteen(1, 1), sixteen(0, 5)), seen(0, sixteen(1, 1), sixteen(0, 5)),
                          seen(0, sixteen(1, 1), sixteen(0, 6)));
  compareObservations(mark, counts);
  ASSERT_TRUE(mark.difference.has_value());
  EXPECT_NE(mark.difference->find("context after the run differs at byte 12"), std::string::npos)
      << *mark.difference;
}

TEST(ComparisonPolicy, MapsAreComparedWhereTheWitnessAgreed) {
  MaskCounts counts;
  auto withEntry = [](const Bytes &value) {
    Observation observation;
    observation.maps["flows"].entries[Bytes{1, 2, 3, 4}] = value;
    return observation;
  };
  StepOutcome agreed = step(withEntry(sixteen(0, 1)), withEntry(sixteen(0, 1)),
                            withEntry(sixteen(0, 2)));
  compareObservations(agreed, counts);
  ASSERT_TRUE(agreed.difference.has_value());
  EXPECT_NE(agreed.difference->find("map 'flows' key 01 02 03 04"), std::string::npos)
      << *agreed.difference;

  // A timestamp the witness wrote differently (word 1) is not compared;
  // the key is: a key the specialized version lacks is a difference.
  StepOutcome stamp = step(withEntry(sixteen(0, 1)), withEntry(sixteen(0, 9)),
                           withEntry(sixteen(0, 4)));
  compareObservations(stamp, counts);
  EXPECT_FALSE(stamp.difference.has_value()) << *stamp.difference;
  EXPECT_TRUE(stamp.nondeterministic);
  Observation lacking;
  lacking.maps["flows"];
  StepOutcome missing = step(withEntry(sixteen(0, 1)), withEntry(sixteen(0, 9)), lacking);
  compareObservations(missing, counts);
  ASSERT_TRUE(missing.difference.has_value());
  EXPECT_NE(missing.difference->find("absent after the specialized version"), std::string::npos);
}

} // namespace
} // namespace morpheus::runtime
