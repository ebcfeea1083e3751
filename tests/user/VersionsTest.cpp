// Versions as handles: a JIT-compiled version is freed (its JITDylib
// removed from the execution session) when the last handle goes, and the
// trampoline lets go of what it replaced only once no burst can still be
// inside it. On the router handler, JIT-compiled for real; the session's
// own account of its JITDylibs is what is counted.
#include "UserRouter.h"

#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>

#include <arpa/inet.h>
#include <atomic>
#include <thread>

namespace morpheus::user {
namespace {

using namespace testing;

// The gateway behind port 2 moves to OtherMac or back: every cycle after it
// builds a version with other constants.
void moveGateway(Handler &handler, bool moved) {
  neighbor_key key{htonl(packet::parseIpv4("192.168.1.1")), 2};
  neighbor value{};
  std::memcpy(value.dst_mac, (moved ? OtherMac : GatewayMac).data(), 6);
  std::memcpy(value.src_mac, PortMac.data(), 6);
  ASSERT_THAT_ERROR(handler.tables().update("neighbors", bytesOfValue(key), bytesOfValue(value)),
                    llvm::Succeeded());
}

TEST(UserVersions, CyclesLeaveABoundedNumberOfLiveVersionsAndAKeptOneStillAnswers) {
  auto router = loadRouter(), twin = loadRouter();
  ASSERT_TRUE(router && twin);
  configure(router->tables());
  configure(twin->tables());
  EXPECT_EQ(router->liveVersions(), 1u); // the generic one
  auto first = router->specialize();
  ASSERT_THAT_EXPECTED(first, llvm::Succeeded());
  ASSERT_EQ(first->outcome, core::CycleOutcome::Installed);
  VersionHandle kept = router->trampoline().installed();
  ASSERT_TRUE(kept);
  EXPECT_EQ(router->liveVersions(), 2u);

  // A change and a cycle at each of the first 20 burst boundaries: 20
  // versions built and installed, each replacing the last.
  const unsigned cycles = 20, burst = 4;
  ReplayRing ring = ringOf(samplePackets(), 12);
  ASSERT_GT(ring.sequence.size(), size_t(cycles * burst));
  unsigned bursts = 0;
  size_t mostLive = 0;
  std::vector<PacketResult> results = EventLoop(router->trampoline(), burst).collect(ring, [&] {
    if (++bursts > cycles)
      return;
    moveGateway(*router, bursts % 2);
    auto cycle = router->specialize();
    ASSERT_THAT_EXPECTED(cycle, llvm::Succeeded());
    EXPECT_EQ(cycle->outcome, core::CycleOutcome::Installed);
    // No burst is under way between bursts: what it replaced is gone.
    EXPECT_EQ(router->trampoline().retiredVersions(), 0u);
    mostLive = std::max(mostLive, router->liveVersions());
  });
  unsigned twinBursts = 0;
  std::vector<PacketResult> expected = EventLoop(twin->trampoline(), burst).collect(ring, [&] {
    if (++twinBursts <= cycles)
      moveGateway(*twin, twinBursts % 2);
  });
  ASSERT_EQ(results.size(), expected.size());
  for (size_t i = 0; i < results.size(); ++i)
    EXPECT_EQ(results[i], expected[i]) << "packet " << i;
  // The generic version, the kept one, the installed one: 22 were built.
  EXPECT_EQ(mostLive, 3u);
  EXPECT_EQ(router->liveVersions(), 3u);

  // The kept version, built before 20 changes, installed again: its guard
  // fails and the generic code behind it answers as the twin.
  router->trampoline().install(kept);
  EXPECT_EQ(router->liveVersions(), 2u); // the one it replaced is gone
  ReplayRing check = ringOf(samplePackets(), 1);
  std::vector<PacketResult> again = EventLoop(router->trampoline(), burst).collect(check);
  std::vector<PacketResult> twinAgain = EventLoop(twin->trampoline(), burst).collect(check);
  ASSERT_EQ(again.size(), twinAgain.size());
  for (size_t i = 0; i < again.size(); ++i)
    EXPECT_EQ(again[i], twinAgain[i]) << "packet " << i;
  EXPECT_EQ(router->tables().dump(), twin->tables().dump());

  // The caller lets go of it: the trampoline still holds it while
  // installed, and the next cycle's install frees it.
  HandlerFunction keptEntry = kept->entry();
  kept.reset();
  EXPECT_EQ(router->trampoline().current(), keptEntry);
  EXPECT_EQ(router->liveVersions(), 2u);
  ASSERT_THAT_EXPECTED(router->specialize(), llvm::Succeeded());
  EXPECT_EQ(router->liveVersions(), 2u); // generic and the new one
}

TEST(UserVersions, AVersionReplacedDuringABurstIsFreedWhenTheBurstEnds) {
  auto router = loadRouter();
  ASSERT_TRUE(router);
  configure(router->tables());
  ASSERT_THAT_EXPECTED(router->specialize(), llvm::Succeeded());
  Bytes packet = udpTo("10.1.2.3");
  PacketResult generic = runPacket(router->generic(), packet, 0);
  {
    Trampoline::Burst burst = router->trampoline().enter();
    HandlerFunction running = burst.handler();
    auto next = router->specialize(); // installed while the burst is under way
    ASSERT_THAT_EXPECTED(next, llvm::Succeeded());
    ASSERT_EQ(next->outcome, core::CycleOutcome::Installed);
    EXPECT_NE(router->trampoline().current(), running);
    EXPECT_EQ(router->trampoline().retiredVersions(), 1u);
    EXPECT_EQ(router->liveVersions(), 3u);
    // The burst goes on in the version it entered, still there.
    EXPECT_EQ(runPacket(running, packet, 0), generic);
  }
  EXPECT_EQ(router->trampoline().retiredVersions(), 0u);
  EXPECT_EQ(router->liveVersions(), 2u);
}

// A loop on one thread, cycles on another: every packet answered as the
// generic version does, and the versions replaced are freed as bursts end.
TEST(UserVersions, CyclesOnAnotherThreadFreeVersionsUnderARunningLoop) {
  auto router = loadRouter();
  ASSERT_TRUE(router);
  configure(router->tables());
  ReplayRing ring = ringOf(samplePackets(), 1);
  std::vector<PacketResult> expected;
  for (uint32_t index : ring.sequence)
    expected.push_back(runPacket(router->generic(), ring.frames[index], ring.ingressPort));

  std::atomic<bool> done{false};
  std::atomic<uint64_t> wrong{0}, rounds{0};
  std::thread loop([&] {
    while (!done.load()) {
      std::vector<PacketResult> results = EventLoop(router->trampoline(), 2).collect(ring);
      for (size_t i = 0; i < results.size(); ++i)
        wrong += !(results[i] == expected[i]);
      ++rounds;
    }
  });
  for (unsigned cycle = 0; cycle < 10; ++cycle) {
    auto built = router->specialize();
    ASSERT_THAT_EXPECTED(built, llvm::Succeeded());
  }
  uint64_t seen = rounds.load();
  while (rounds.load() < seen + 2) // bursts after the last install
    std::this_thread::yield();
  done = true;
  loop.join();
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_EQ(router->trampoline().retiredVersions(), 0u);
  EXPECT_EQ(router->liveVersions(), 2u); // of 11 built
}


} // namespace
} // namespace morpheus::user
