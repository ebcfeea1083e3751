// Fast paths over a table the handler writes, in user space, with the real
// JIT: tests/user/handlers/learning.c learns flows into a hash table and
// looks them up; every version of the handler, the generic one included,
// counts its writes per key (core's guard-table-writes into
// backend/user/WriteCounters), and heavy-hitter-fast-path answers a hot
// flow only while no write of it was counted since its answer was read.
// What could go wrong, and is checked: a hot flow changed or forgotten by
// the handler itself answered from the stale fast path, in the same burst
// or after the generic version (which the caller may install between
// specialized ones) wrote it.
#include "backend/user/EventLoop.h"
#include "backend/user/Handler.h"

#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>

#include <cstring>
#include <random>

namespace morpheus::user {
namespace {

const std::string LearningSource =
    std::string(MORPHEUS_SOURCE_DIR) + "/tests/user/handlers/learning.c";

constexpr uint32_t Learn = 1, Forget = 2, Look = 3;
constexpr uint32_t NoAnswer = 0xffffffffu;

// learning.c's command {op, addr, port, verdict}, then 4 bytes for the answer.
Bytes command(uint32_t op, uint32_t flow, uint32_t verdict = 0) {
  uint32_t words[5] = {op, 0x0a000000u + flow, 1000 + flow, verdict, 0};
  Bytes bytes(sizeof words);
  std::memcpy(bytes.data(), words, sizeof words);
  return bytes;
}

uint32_t answerIn(const PacketResult &result) {
  uint32_t answer;
  std::memcpy(&answer, result.bytes.data() + 16, sizeof answer);
  return answer;
}

ReplayRing ringOf(const std::vector<Bytes> &packets) {
  ReplayRing ring;
  for (const Bytes &packet : packets) {
    ring.sequence.push_back(uint32_t(ring.frames.size()));
    ring.frames.push_back(packet);
  }
  return ring;
}

std::unique_ptr<Handler> loadLearning(bool followTraffic) {
  HandlerOptions options;
  options.entry = "learning";
  if (followTraffic) {
    core::TrafficProfileOptions traffic;
    traffic.initialPeriod = 4;
    options.traffic = traffic;
  }
  auto handler = Handler::load(LearningSource, options);
  EXPECT_THAT_EXPECTED(handler, llvm::Succeeded());
  return handler ? std::move(*handler) : nullptr;
}

const core::SiteDecision *applied(const core::SpecializationLog &log, const std::string &pass) {
  for (const core::SiteDecision &decision : log.decisions)
    if (decision.table == "flows" && decision.pass == pass && decision.applied)
      return &decision;
  return nullptr;
}

// The same packets through both handlers, one burst of `burst`: the same
// verdicts, bytes and tables.
void expectAlike(Handler &probe, Handler &generic, const std::vector<Bytes> &packets,
                 uint32_t burst) {
  ReplayRing ring = ringOf(packets);
  auto expected = EventLoop(generic.trampoline(), burst).collect(ring);
  auto actual = EventLoop(probe.trampoline(), burst).collect(ring);
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i)
    ASSERT_EQ(actual[i], expected[i]) << "packet " << i;
  EXPECT_EQ(probe.tables().dump(), generic.tables().dump());
}

TEST(UserWriteGuards, HotFlowsOfALearnedTableGetAFastPathThatTheHandlersWritesTakeAway) {
  auto probe = loadLearning(true), generic = loadLearning(false);
  ASSERT_TRUE(probe && generic);
  std::vector<Bytes> learn;
  for (uint32_t flow = 0; flow < 64; ++flow)
    learn.push_back(command(Learn, flow, 10 + flow % 3));
  expectAlike(*probe, *generic, learn, 32);

  // The first version counts the writes and samples the lookups.
  auto first = probe->specialize();
  ASSERT_THAT_EXPECTED(first, llvm::Succeeded());
  ASSERT_EQ(first->outcome, core::CycleOutcome::Installed);
  EXPECT_TRUE(applied(first->log, "guard-table-writes"));
  ASSERT_EQ(first->log.profiled.size(), 1u); // the look-up, not the learning lookup
  unsigned site = first->log.profiled.begin()->first;

  // Lookups, 90 % of them of flows 5, 17 and 42.
  std::mt19937 random(3);
  std::vector<Bytes> looks;
  const uint32_t hot[] = {5, 17, 42};
  for (int i = 0; i < 3000; ++i)
    looks.push_back(command(Look, random() % 10 < 9 ? hot[random() % 3] : random() % 80));
  EventLoop(probe->trampoline(), 32).run(ringOf(looks), 2);

  auto second = probe->specialize();
  ASSERT_THAT_EXPECTED(second, llvm::Succeeded());
  ASSERT_EQ(second->outcome, core::CycleOutcome::Installed);
  ASSERT_TRUE(second->traffic.count(site));
  EXPECT_EQ(second->traffic.at(site).hotKeys.size(), 3u) << second->traffic.at(site).why;
  const core::SiteDecision *fastPath = applied(second->log, "heavy-hitter-fast-path");
  ASSERT_TRUE(fastPath) << "no fast path over the learned table";
  EXPECT_EQ(second->writeCounts.size(), 3u); // one bucket per hot flow read
  VersionHandle withFastPath = probe->trampoline().installed();

  // Hot and cold lookups, and new flows learned (other buckets): alike.
  std::vector<Bytes> mixed(looks.begin(), looks.begin() + 200);
  for (uint32_t flow = 100; flow < 120; ++flow)
    mixed.push_back(command(Learn, flow, 7));
  mixed.insert(mixed.end(), looks.begin() + 200, looks.begin() + 400);
  expectAlike(*probe, *generic, mixed, 32);

  // A hot flow's verdict changed by the handler, then looked up in the same
  // burst: the new verdict. A hot flow forgotten: unknown from then on.
  std::vector<Bytes> writes = {command(Look, 17),   command(Learn, 17, 99), command(Look, 17),
                               command(Look, 42),   command(Forget, 42),    command(Look, 42),
                               command(Look, 5)};
  auto results = EventLoop(probe->trampoline(), 32).collect(ringOf(writes));
  ASSERT_EQ(results.size(), writes.size());
  EXPECT_EQ(answerIn(results[0]), 10u + 17 % 3);
  EXPECT_EQ(answerIn(results[2]), 99u);
  EXPECT_EQ(answerIn(results[3]), 10u + 42 % 3);
  EXPECT_EQ(results[5].verdict, MU_PASS);
  EXPECT_EQ(answerIn(results[5]), NoAnswer);
  EXPECT_EQ(answerIn(results[6]), 10u + 5 % 3);
  EventLoop(generic->trampoline(), 32).collect(ringOf(writes));
  EXPECT_EQ(probe->tables().dump(), generic->tables().dump());

  // The generic version counts too: flow 5 changed while it runs, then the
  // fast-path version installed again answers with the change.
  probe->trampoline().install(probe->genericVersion());
  EventLoop(probe->trampoline(), 1).collect(ringOf({command(Learn, 5, 55)}));
  probe->trampoline().install(withFastPath);
  EXPECT_EQ(answerIn(EventLoop(probe->trampoline(), 1).collect(ringOf({command(Look, 5)}))[0]),
            55u);

  // The next cycle builds on the written entries and still agrees.
  EventLoop(generic->trampoline(), 1).collect(ringOf({command(Learn, 5, 55)}));
  auto third = probe->specialize();
  ASSERT_THAT_EXPECTED(third, llvm::Succeeded());
  expectAlike(*probe, *generic, mixed, 32);
}

// Without following the traffic nothing counts writes: the generic
// handler stays as compiled.
TEST(UserWriteGuards, WithoutTrafficTheHandlerCountsNothing) {
  auto handler = loadLearning(false);
  ASSERT_TRUE(handler);
  auto cycle = handler->specialize();
  ASSERT_THAT_EXPECTED(cycle, llvm::Succeeded());
  EXPECT_FALSE(applied(cycle->log, "guard-table-writes"));
  EXPECT_TRUE(cycle->writeCounts.empty());
}

} // namespace
} // namespace morpheus::user
