// DPDK I/O for the user-space data plane (built when libdpdk is found):
// ports opened as DPDK virtual devices, so it runs on machines without NICs
// or hugepages (`net_pcap` reads and writes pcap files, `net_null` makes
// and swallows packets, `net_af_xdp` receives and sends through an AF_XDP
// socket on a kernel interface, e.g. a veth; the process's one EAL,
// Eal.h), and an
// event loop that receives bursts from them: each burst handed to the
// handler the trampoline holds at the burst's start (as EventLoop does for
// the in-memory ring), MU_TX packets sent out of packet->port, MU_PASS
// packets out of the exception port when there is one (the slow path: a
// `net_tap` vdev hands them to the host stack on its interface), the
// others freed.
#pragma once

#include "backend/user/EventLoop.h"
#include "support/Error.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

struct rte_mempool;

namespace morpheus::user {

struct DpdkOptions {
  // --vdev arguments, one port each, in port order
  // ("net_pcap0,rx_pcap=IN.pcap,tx_pcap=OUT.pcap", "net_null0").
  std::vector<std::string> vdevs;
  // The exception path's vdev ("net_tap0,iface=mu_pass0": the host stack
  // receives the packets on that interface; "net_pcap9,tx_pcap=F.pcap"):
  // MU_PASS packets go out of it. It is not one of the handler's ports
  // (packet->port never names it) and what it receives is not read. Empty:
  // MU_PASS packets are freed.
  std::string exceptionVdev;
  // EAL memory without hugepages the pool needs (the EAL takes at least
  // DefaultEalMegabytes; initialise it first with more: Eal.h).
  uint32_t memoryMegabytes = 256;
  uint32_t mbufs = 8191; // packet buffers in the pool
};

// The vdev of an AF_XDP port on kernel interface `iface` (DPDK's
// net_af_xdp PMD, instance `instance`: one queue, queue 0, which it binds
// in copy mode where the driver has no zero-copy, as veths). Opening it
// attaches the PMD's XDP program to `iface`, redirecting queue 0's
// packets to the socket; closing detaches it. The interface is named,
// and the program attached, in the namespace of the thread that opens
// the ports.
std::string afXdpVdev(unsigned instance, const std::string &iface);
// The packet buffers each net_af_xdp port holds in its fill ring from the
// moment it starts (DPDK 22.11's ETH_AF_XDP_DFLT_NUM_DESCS): the pool needs
// that many per such port besides the packets in flight, or the next
// port's receive queue fails to set up ("Invalid argument").
constexpr uint32_t AfXdpFillBuffers = 2048;

struct DpdkStats {
  LoopStats loop;
  uint64_t sent = 0;     // MU_TX packets the port took
  uint64_t unsent = 0;   // MU_TX packets to no such port, or refused by it
  uint64_t passed = 0;   // MU_PASS packets the exception port took
  uint64_t unpassed = 0; // MU_PASS packets it refused (or with no exception port)
};

class DpdkPorts {
public:
  // Initialises DPDK's EAL if nothing did (Eal.h), adds one port per vdev
  // and starts it with one receive and one transmit queue. Ports of
  // another open still open must have other vdev names.
  static Expected<std::unique_ptr<DpdkPorts>> open(const DpdkOptions &options);
  // Stops, closes and removes the ports (net_pcap flushes its files); the
  // EAL stays.
  ~DpdkPorts();

  uint16_t ports() const { return uint16_t(portIds.size()); } // the handler's, without the exception port

  // Polls every port in turn until `maxPackets` were received or
  // `idlePolls` polls in a row brought nothing (a pcap port is drained);
  // `betweenBursts` runs after each non-empty burst.
  DpdkStats run(Trampoline &trampoline, uint32_t burstSize, uint64_t maxPackets,
                uint32_t idlePolls, const std::function<void()> &betweenBursts = {});

private:
  DpdkPorts() = default;
  rte_mempool *pool = nullptr;
  std::vector<std::string> devices;      // the vdev names added, to remove
  std::vector<uint16_t> portIds;         // DPDK's port of the handler's port i
  std::optional<uint16_t> exceptionPort; // DPDK's port
};

} // namespace morpheus::user
