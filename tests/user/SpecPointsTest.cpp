// Specialization points (morpheus_spec.h, core/SpecializationPoints.h, the
// specialization-points pass) on a real handler compiled by clang-19 and
// JIT-compiled by ORC: the space the handler declares, configurations
// checked against it, assumed points that agree with the generic handler
// packet by packet whether their guard holds or not, and a point a write
// precedes declined with its reason.
#include "backend/user/EventLoop.h"
#include "backend/user/Handler.h"

#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>

#include <random>

namespace morpheus::user {
namespace {

const std::string SpecPointsSource =
    std::string(MORPHEUS_SOURCE_DIR) + "/tests/user/handlers/spec_points.c";

std::unique_ptr<Handler> loadSpecPoints() {
  HandlerOptions options;
  options.entry = "spec_points";
  auto handler = Handler::load(SpecPointsSource, options);
  if (!handler) {
    ADD_FAILURE() << toString(handler.takeError());
    return nullptr;
  }
  return std::move(*handler);
}

// A packet of `length` bytes whose byte 14 selects `rounds`, with random
// payload bytes.
Bytes packetWith(uint8_t roundsByte, size_t length, std::mt19937 &random) {
  Bytes bytes(length);
  for (uint8_t &byte : bytes)
    byte = uint8_t(random());
  bytes[14] = roundsByte;
  return bytes;
}

const core::PointDecision *decisionFor(const core::SpecializationLog &log,
                                       const std::string &label) {
  for (const core::PointDecision &decision : log.points)
    if (decision.label == label)
      return &decision;
  return nullptr;
}

TEST(SpecPoints, TheSpaceListsEveryPointWithItsCandidates) {
  auto handler = loadSpecPoints();
  ASSERT_TRUE(handler);
  const auto &space = handler->specializationSpace();
  ASSERT_EQ(space.size(), 3u);
  EXPECT_EQ(space[0].label, "rounds");
  EXPECT_EQ(space[0].kind, core::PointKind::Enum);
  EXPECT_EQ(space[0].candidates, (std::vector<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(space[1].label, "short");
  EXPECT_EQ(space[1].kind, core::PointKind::Assume);
  EXPECT_EQ(space[2].label, "late");
  EXPECT_EQ(space[2].kind, core::PointKind::Generic);
  EXPECT_TRUE(space[2].candidates.empty());
}

TEST(SpecPoints, AConfigurationOutsideTheSpaceIsRefusedNamingThePoint) {
  auto handler = loadSpecPoints();
  ASSERT_TRUE(handler);
  llvm::Error unknown = handler->configure({{"blocks", 4}});
  ASSERT_THAT_ERROR(std::move(unknown), llvm::Failed());
  std::string message = toString(handler->configure({{"rounds", 3}}));
  EXPECT_NE(message.find("'rounds'"), std::string::npos) << message;
  EXPECT_NE(message.find("3"), std::string::npos) << message;
  EXPECT_TRUE(handler->configuration().empty());
  ASSERT_THAT_ERROR(handler->configure({{"rounds", 8}, {"late", 200}}), llvm::Succeeded());
}

// Twin handlers on their own tables: one generic, one specialized for
// `configuration`; packets hitting and missing every assumed value go
// through both; verdicts, ports, bytes and counters must agree.
void expectAgreement(const core::PointConfiguration &configuration,
                     core::SpecializationLog *log = nullptr) {
  auto generic = loadSpecPoints(), specialized = loadSpecPoints();
  ASSERT_TRUE(generic && specialized);
  auto cycle = specialized->specialize(configuration);
  ASSERT_THAT_EXPECTED(cycle, llvm::Succeeded());
  ASSERT_EQ(cycle->outcome, core::CycleOutcome::Installed);
  ASSERT_NE(specialized->trampoline().current(), specialized->generic());
  if (log)
    *log = cycle->log;

  std::mt19937 random(13);
  ReplayRing ring;
  for (uint8_t rounds : {1, 2, 3, 4, 8, 15, 0x24, 0x44})
    for (size_t length : {33, 34, 64, 128, 129, 300})
      ring.frames.push_back(packetWith(rounds, length, random));
  for (uint32_t i = 0; i < ring.frames.size() * 3; ++i)
    ring.sequence.push_back(uint32_t(random() % ring.frames.size()));
  std::vector<PacketResult> expected = EventLoop(generic->trampoline(), 8).collect(ring);
  std::vector<PacketResult> actual = EventLoop(specialized->trampoline(), 8).collect(ring);
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(actual[i], expected[i]) << "packet " << i;
  EXPECT_EQ(specialized->tables().dump(), generic->tables().dump());
}

TEST(SpecPoints, AssumedPointsAgreeWithTheGenericHandlerOnHitsAndMisses) {
  core::SpecializationLog log;
  expectAgreement({{"rounds", 4}, {"short", 1}}, &log);
  const core::PointDecision *rounds = decisionFor(log, "rounds");
  const core::PointDecision *assumption = decisionFor(log, "short");
  ASSERT_TRUE(rounds && assumption);
  EXPECT_TRUE(rounds->applied) << rounds->detail;
  EXPECT_EQ(rounds->value, 4);
  EXPECT_TRUE(assumption->applied) << assumption->detail;
  expectAgreement({{"rounds", 1}});
  expectAgreement({{"rounds", 8}, {"short", 1}, {"late", 3}});
}

TEST(SpecPoints, APointAWriteMayPrecedeIsDeclinedWithItsReason) {
  core::SpecializationLog log;
  expectAgreement({{"late", 3}}, &log);
  const core::PointDecision *late = decisionFor(log, "late");
  ASSERT_TRUE(late);
  EXPECT_FALSE(late->applied);
  EXPECT_NE(late->detail.find("may write memory before the point"), std::string::npos)
      << late->detail;
  const core::PointDecision *rounds = decisionFor(log, "rounds");
  ASSERT_TRUE(rounds);
  EXPECT_FALSE(rounds->applied);
  EXPECT_EQ(rounds->detail, "not assumed by this configuration");
}

// No marker reaches the JIT (it has no definition), and the assumed point
// is a test of its input against the value (SpecializationPoints.ll checks
// the shape of the code).
TEST(SpecPoints, NoMarkerIsLeftAndTheAssumedValueIsTested) {
  auto handler = loadSpecPoints();
  ASSERT_TRUE(handler);
  ASSERT_THAT_ERROR(handler->configure({{"rounds", 4}}), llvm::Succeeded());
  auto ir = handler->specializedIR();
  ASSERT_THAT_EXPECTED(ir, llvm::Succeeded());
  EXPECT_EQ(ir->find("mu_spec_"), std::string::npos) << *ir;
  EXPECT_NE(ir->find("icmp eq i64"), std::string::npos) << *ir;
}

} // namespace
} // namespace morpheus::user
