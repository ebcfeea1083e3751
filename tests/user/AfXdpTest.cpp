// AF_XDP I/O for the user-space backend, on veths (DPDK's net_af_xdp PMD,
// copy mode, queue 0): the specialized router receives frames a raw socket
// injects into a veth's peer, sends out of four AF_XDP ports and passes to
// a fifth, the exception port; what each port's peer receives must be,
// packet for packet and byte for byte, what the generic router gives for
// the same frames through the in-memory ring, and the verdicts' counts
// equal. The ports' side lives in namespace A (the test's thread enters it
// for DPDK's whole life: the PMD names the interface, attaches its XDP
// program and detaches it in the caller's namespace), the peers in B; both
// namespaces, and every veth in them, go when the test ends, failed or not.
// Its own binary: DPDK initialises its EAL once per process.
#include "UserRouter.h"
#include "backend/user/DpdkPorts.h"
#include "netns/VethPair.h"
#include "support/Netns.h"

#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>

#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <stdexcept>

namespace morpheus::user {
namespace {

using namespace testing;
using morpheus::testing::NetnsGuard;
using morpheus::testing::VethPair;

constexpr unsigned Ports = 4;                 // the router's; the exception port is after them
constexpr unsigned Chunk = 128;               // frames injected before the loop takes them
constexpr uint32_t IdlePolls = 50'000'000;    // the loop's end if frames went missing (no hang)
constexpr int ArrivalTimeoutMs = 5000;        // a capture's end if frames went missing (no hang)

// A raw socket on `iface` in the calling thread's namespace: it sends
// frames as they are, and receives what arrives (not what it or any
// socket on the interface sends).
int packetSocket(const std::string &iface) {
  int fd = ::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
  if (fd < 0)
    throw std::runtime_error("packet socket: " + std::string(std::strerror(errno)));
  int one = 1, buffer = 16 << 20;
  ::setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buffer, sizeof buffer);
  sockaddr_ll address{};
  address.sll_family = AF_PACKET;
  address.sll_protocol = htons(ETH_P_ALL);
  address.sll_ifindex = int(if_nametoindex(iface.c_str()));
  if (!address.sll_ifindex ||
      ::bind(fd, reinterpret_cast<sockaddr *>(&address), sizeof address) < 0)
    throw std::runtime_error("packet socket on " + iface + ": " + std::strerror(errno));
  return fd;
}

// The next `count` frames `fd` receives; fewer when none arrives for
// ArrivalTimeoutMs.
std::vector<Bytes> receive(int fd, size_t count) {
  std::vector<Bytes> frames;
  Bytes buffer(65536);
  while (frames.size() < count) {
    pollfd ready{fd, POLLIN, 0};
    if (::poll(&ready, 1, ArrivalTimeoutMs) <= 0)
      break;
    ssize_t length = ::recv(fd, buffer.data(), buffer.size(), 0);
    if (length < 0)
      break;
    frames.emplace_back(buffer.begin(), buffer.begin() + length);
  }
  return frames;
}

// Frames `fd` holds now, without waiting.
size_t pending(int fd) {
  size_t count = 0;
  Bytes buffer(65536);
  while (::recv(fd, buffer.data(), buffer.size(), MSG_DONTWAIT) >= 0)
    ++count;
  return count;
}

TEST(UserAfXdp, TheSpecializedRouterOverAfXdpSocketsOnVethsSendsAndPassesWhatTheGenericOneWould) {
  auto specialized = loadRouter(), reference = loadRouter();
  ASSERT_TRUE(specialized && reference);
  configure(specialized->tables());
  configure(reference->tables());
  auto cycle = specialized->specialize();
  ASSERT_THAT_EXPECTED(cycle, llvm::Succeeded());
  ASSERT_EQ(cycle->outcome, core::CycleOutcome::Installed);

  // Every frame of the router's samples (the 20-byte truncated one too:
  // a veth carries frames as they are).
  std::vector<Bytes> frames;
  for (unsigned round = 0; round < 50; ++round)
    for (const Bytes &frame : samplePackets())
      frames.push_back(frame);

  // Pair 0 is VethPair's; pairs 1-4 join the same namespaces (whose
  // IPv6 is off, so the peers send nothing of their own).
  VethPair veth("user_afxdp");
  std::vector<std::string> ifaces{veth.ifA()}, peers{veth.ifB()};
  for (unsigned port = 1; port <= Ports; ++port) {
    ifaces.push_back(veth.ifA() + std::to_string(port));
    peers.push_back(veth.ifB() + std::to_string(port));
    ASSERT_FALSE(bool(netns::runTool({"ip", "-n", veth.nsA(), "link", "add", ifaces.back(),
                                      "type", "veth", "peer", "name", peers.back(), "netns",
                                      veth.nsB()})));
    ASSERT_FALSE(bool(netns::runTool({"ip", "-n", veth.nsA(), "link", "set", ifaces.back(), "up"})));
    ASSERT_FALSE(bool(netns::runTool({"ip", "-n", veth.nsB(), "link", "set", peers.back(), "up"})));
  }
  // Sockets keep the namespace they were made in.
  std::array<int, Ports + 1> captures{};
  int injector = -1;
  morpheus::testing::runInNetns(veth.nsB(), [&] {
    for (unsigned port = 0; port <= Ports; ++port)
      captures[port] = packetSocket(peers[port]);
    injector = ::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0); // receives nothing
    if (injector < 0)
      throw std::runtime_error("injector socket: " + std::string(std::strerror(errno)));
  });
  sockaddr_ll toPeer0{};
  toPeer0.sll_family = AF_PACKET;
  morpheus::testing::runInNetns(veth.nsB(), [&] {
    toPeer0.sll_ifindex = int(if_nametoindex(peers[0].c_str()));
  });

  DpdkStats stats;
  {
    NetnsGuard inA(veth.nsA());
    DpdkOptions options;
    for (unsigned port = 0; port < Ports; ++port)
      options.vdevs.push_back(afXdpVdev(port, ifaces[port]));
    options.exceptionVdev = afXdpVdev(Ports, ifaces[Ports]);
    options.mbufs = (Ports + 1) * AfXdpFillBuffers + 4096;
    auto ports = DpdkPorts::open(options);
    ASSERT_THAT_EXPECTED(ports, llvm::Succeeded());
    // In chunks the receive ring holds, each taken whole before the next.
    for (size_t first = 0; first < frames.size(); first += Chunk) {
      size_t end = std::min(frames.size(), first + Chunk);
      for (size_t i = first; i < end; ++i)
        ASSERT_EQ(::sendto(injector, frames[i].data(), frames[i].size(), 0,
                           reinterpret_cast<sockaddr *>(&toPeer0), sizeof toPeer0),
                  ssize_t(frames[i].size()))
            << std::strerror(errno);
      DpdkStats chunk = (*ports)->run(specialized->trampoline(), 32, end - first, IdlePolls);
      ASSERT_EQ(chunk.loop.packets, end - first) << "frames injected but not received";
      stats.loop.packets += chunk.loop.packets;
      for (size_t verdict = 0; verdict < stats.loop.verdicts.size(); ++verdict)
        stats.loop.verdicts[verdict] += chunk.loop.verdicts[verdict];
      stats.sent += chunk.sent;
      stats.unsent += chunk.unsent;
      stats.passed += chunk.passed;
      stats.unpassed += chunk.unpassed;
    }
  } // the ports closed, their XDP programs detached

  std::vector<PacketResult> expected =
      EventLoop(reference->trampoline(), 32).collect(ringOf(frames, 1));
  std::vector<std::vector<Bytes>> expectedOut(Ports + 1); // the exception port's last
  LoopStats expectedStats;
  for (const PacketResult &result : expected) {
    expectedStats.countVerdict(result.verdict);
    if (result.verdict == MU_TX)
      expectedOut.at(result.port).push_back(result.bytes);
    if (result.verdict == MU_PASS)
      expectedOut[Ports].push_back(result.bytes);
  }
  EXPECT_EQ(stats.loop.packets, frames.size());
  EXPECT_EQ(stats.loop.verdicts, expectedStats.verdicts);
  EXPECT_EQ(stats.unsent, 0u);
  EXPECT_EQ(stats.unpassed, 0u);
  size_t sent = 0;
  for (unsigned port = 0; port <= Ports; ++port) {
    std::vector<Bytes> arrived = receive(captures[port], expectedOut[port].size());
    EXPECT_EQ(arrived, expectedOut[port]) << "port " << port;
    EXPECT_EQ(pending(captures[port]), 0u) << "port " << port << ": more than expected";
    if (port < Ports)
      sent += arrived.size();
    ::close(captures[port]);
  }
  ::close(injector);
  EXPECT_EQ(stats.sent, sent);
  EXPECT_GT(sent, 0u);
  EXPECT_EQ(stats.passed, expectedOut[Ports].size());
  EXPECT_GT(stats.passed, 0u);
}

} // namespace
} // namespace morpheus::user
