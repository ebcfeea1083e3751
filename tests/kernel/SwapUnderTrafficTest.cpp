// Swapping program versions while traffic flows loses no packet: frames
// sent through a veth pair at full speed are all counted by some version of
// the program (every version shares the counters) while Morpheus keeps
// recompiling, swapping and taking control-plane updates.
#include "PolicyFwd.h"
#include "backend/bpf/ProgramLink.h"
#include "netns/VethPair.h"
#include "trafficgen/LiveFrames.h"

#include <linux/bpf.h>
#include <linux/in.h>

#include <atomic>
#include <thread>
#include <llvm/Testing/Support/Error.h>

namespace morpheus::testing {
namespace {

TEST(SwapUnderTraffic, NoPacketIsLost) {
  VethPair::sweepStale("swap");
  VethPair veth("swap");
  PolicyFwd fwd;
  ASSERT_TRUE(fwd.ok());
  fwd.setConfig(CFG_POLICY_ENABLED | CFG_TTL_CHECK, ACTION_DROP);
  std::vector<trafficgen::Flow> flows;
  for (uint32_t i = 0; i < 8; ++i) {
    flows.push_back({0x0a0000c8, 0x0a000001 + i, 1000, uint16_t(80 + i), IPPROTO_UDP});
    fwd.setPolicy(policyKey(0x0a000001 + i, 80 + i, IPPROTO_UDP),
                  policyValue(ACTION_DROP, i));
  }

  auto link = bpf::ProgramLink::attach(
      fwd.opt().originalFd(), bpf::AttachPoint{bpf::ProgramType::Xdp, veth.ifB(), veth.nsB()});
  ASSERT_THAT_EXPECTED(link, llvm::Succeeded());
  fwd.opt().install = [&](int fd) { return link->replace(fd); };

  trafficgen::LiveFramesOptions options = trafficgen::acrossVeth(veth, flows);
  trafficgen::LiveFramesGenerator generator = trafficgen::LiveFramesGenerator::create(options);

  const int rounds = 12;
  const uint64_t perRound = 200000;
  std::atomic<uint64_t> sent{0};
  std::atomic<bool> done{false};
  std::thread traffic([&] {
    for (int round = 0; round < rounds; ++round)
      sent += generator.send(perRound).packetsSent;
    done = true;
  });
  int swaps = 0;
  for (unsigned i = 0; !done; ++i) {
    // Alternate recompiles of unchanged contents with real changes, so the
    // guard trips mid-traffic too.
    if (i % 2)
      fwd.setPolicy(policyKey(0x0a000001 + i % 8, 80 + i % 8, IPPROTO_UDP),
                    policyValue(ACTION_DROP, i));
    core::CycleReport report = fwd.opt().runCycle(/*force=*/true);
    swaps += report.installed();
    EXPECT_NE(report.outcome, core::CycleOutcome::Failed) << report.describe();
  }
  traffic.join();
  std::printf("%d swaps while %llu packets flowed\n", swaps, (unsigned long long)sent.load());
  EXPECT_GE(swaps, 3) << "the test must swap while traffic flows";
  std::vector<uint64_t> stats = fwd.stats();
  uint64_t counted = 0;
  for (uint64_t value : stats)
    counted += value;
  EXPECT_EQ(sent.load(), uint64_t(rounds) * perRound);
  EXPECT_EQ(counted, sent.load()) << "packets lost across " << swaps << " swaps";
  EXPECT_EQ(stats[STAT_DROP], counted);
}

} // namespace
} // namespace morpheus::testing
