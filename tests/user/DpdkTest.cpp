// DPDK I/O for the user-space backend, on virtual devices (no NIC, no
// hugepages): the specialized router receives a pcap through net_pcap and
// sends to four pcap ports, and what it passes to the slow path to a fifth,
// the exception port; what each port wrote must be, packet for packet,
// what the generic router gives for the same frames through the in-memory
// ring. In the DPDK test binary: DPDK initialises its EAL once per
// process (backend/user/Eal.h), shared with the DPDK tables' tests.
#include "UserRouter.h"
#include "backend/user/DpdkPorts.h"

#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace morpheus::user {
namespace {

using namespace testing;

// Classic pcap, Ethernet, microsecond timestamps.
void writePcap(const std::string &path, const std::vector<Bytes> &frames) {
  std::ofstream out(path, std::ios::binary);
  const uint32_t header[] = {0xa1b2c3d4, 0x00040002, 0, 0, 65535, 1};
  out.write(reinterpret_cast<const char *>(header), sizeof header);
  for (const Bytes &frame : frames) {
    const uint32_t record[] = {0, 0, uint32_t(frame.size()), uint32_t(frame.size())};
    out.write(reinterpret_cast<const char *>(record), sizeof record);
    out.write(reinterpret_cast<const char *>(frame.data()), std::streamsize(frame.size()));
  }
}

std::vector<Bytes> readPcap(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<Bytes> frames;
  char header[24];
  if (!in.read(header, sizeof header))
    return frames;
  uint32_t record[4];
  while (in.read(reinterpret_cast<char *>(record), sizeof record)) {
    Bytes frame(record[2]);
    in.read(reinterpret_cast<char *>(frame.data()), std::streamsize(frame.size()));
    frames.push_back(std::move(frame));
  }
  return frames;
}

TEST(UserDpdk, TheSpecializedRouterOverPcapPortsSendsAndPassesWhatTheGenericOneWould) {
  auto specialized = loadRouter(), reference = loadRouter();
  ASSERT_TRUE(specialized && reference);
  configure(specialized->tables());
  configure(reference->tables());
  auto cycle = specialized->specialize();
  ASSERT_THAT_EXPECTED(cycle, llvm::Succeeded());
  ASSERT_EQ(cycle->outcome, core::CycleOutcome::Installed);

  std::vector<Bytes> frames;
  for (unsigned round = 0; round < 50; ++round)
    for (const Bytes &frame : samplePackets())
      if (frame.size() >= 60) // pcap ports carry Ethernet frames of at least 60 bytes
        frames.push_back(frame);
  std::string prefix = "/tmp/morpheus-dpdk-test-" + std::to_string(getpid());
  std::string input = prefix + "-in.pcap";
  writePcap(input, frames);
  std::vector<std::string> outputs, vdevs;
  for (int port = 0; port < 4; ++port) {
    outputs.push_back(prefix + "-out" + std::to_string(port) + ".pcap");
    vdevs.push_back("net_pcap" + std::to_string(port) +
                    (port == 0 ? ",rx_pcap=" + input + "," : ",") + "tx_pcap=" + outputs.back());
  }

  std::string passed = prefix + "-pass.pcap";
  DpdkStats stats;
  {
    DpdkOptions options;
    options.vdevs = vdevs;
    options.exceptionVdev = "net_pcap4,tx_pcap=" + passed;
    auto ports = DpdkPorts::open(options);
    ASSERT_THAT_EXPECTED(ports, llvm::Succeeded());
    stats = (*ports)->run(specialized->trampoline(), 32, frames.size(), 1000);
  } // closing the ports flushes the pcap files

  std::vector<PacketResult> expected =
      EventLoop(reference->trampoline(), 32).collect(ringOf(frames, 1));
  std::vector<std::vector<Bytes>> expectedOut(4);
  std::vector<Bytes> expectedPassed;
  LoopStats expectedStats;
  for (const PacketResult &result : expected) {
    expectedStats.countVerdict(result.verdict);
    if (result.verdict == MU_TX)
      expectedOut.at(result.port).push_back(result.bytes);
    if (result.verdict == MU_PASS)
      expectedPassed.push_back(result.bytes);
  }
  EXPECT_EQ(stats.loop.packets, frames.size());
  EXPECT_EQ(stats.loop.verdicts, expectedStats.verdicts);
  EXPECT_EQ(stats.unsent, 0u);
  size_t sent = 0;
  for (int port = 0; port < 4; ++port) {
    std::vector<Bytes> written = readPcap(outputs[port]);
    EXPECT_EQ(written, expectedOut[port]) << "port " << port;
    sent += written.size();
    std::remove(outputs[port].c_str());
  }
  std::vector<Bytes> writtenPassed = readPcap(passed);
  EXPECT_EQ(writtenPassed, expectedPassed);
  std::remove(passed.c_str());
  std::remove(input.c_str());
  EXPECT_EQ(stats.sent, sent);
  EXPECT_GT(sent, 0u);
  EXPECT_EQ(stats.passed, expectedPassed.size());
  EXPECT_GT(stats.passed, 0u);
  EXPECT_EQ(stats.unpassed, 0u);
}

} // namespace
} // namespace morpheus::user
