#include "backend/user/DpdkPorts.h"

#include "backend/user/Eal.h"

#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include <atomic>

namespace morpheus::user {

namespace {

std::atomic<uint32_t> nextPool{0}; // pool names are process-wide

Error startPort(uint16_t port, rte_mempool *pool) {
  rte_eth_conf conf{};
  int socket = rte_eth_dev_socket_id(port);
  if (int err = rte_eth_dev_configure(port, 1, 1, &conf); err < 0)
    return makeError("DPDK port {0}: configure: {1}", port, rte_strerror(-err));
  if (int err = rte_eth_rx_queue_setup(port, 0, 512, socket, nullptr, pool); err < 0)
    return makeError("DPDK port {0}: receive queue: {1}", port, rte_strerror(-err));
  if (int err = rte_eth_tx_queue_setup(port, 0, 512, socket, nullptr); err < 0)
    return makeError("DPDK port {0}: transmit queue: {1}", port, rte_strerror(-err));
  if (int err = rte_eth_dev_start(port); err < 0)
    return makeError("DPDK port {0}: start: {1}", port, rte_strerror(-err));
  return Error::success();
}

} // namespace

std::string afXdpVdev(unsigned instance, const std::string &iface) {
  return "net_af_xdp" + std::to_string(instance) + ",iface=" + iface +
         ",start_queue=0,queue_count=1";
}

Expected<std::unique_ptr<DpdkPorts>> DpdkPorts::open(const DpdkOptions &options) {
  if (Error err = initialiseEal(options.memoryMegabytes))
    return err;
  std::unique_ptr<DpdkPorts> ports(new DpdkPorts());
  std::vector<std::string> vdevs = options.vdevs;
  if (!options.exceptionVdev.empty())
    vdevs.push_back(options.exceptionVdev);
  std::vector<uint16_t> ids;
  for (const std::string &vdev : vdevs) {
    // "NAME,ARGS": the device's name is its port's.
    size_t comma = vdev.find(',');
    std::string name = vdev.substr(0, comma);
    std::string args = comma == std::string::npos ? "" : vdev.substr(comma + 1);
    if (int err = rte_eal_hotplug_add("vdev", name.c_str(), args.c_str()); err < 0)
      return makeError("DPDK: vdev {0}: {1}", vdev, rte_strerror(-err));
    ports->devices.push_back(name);
    uint16_t id;
    if (rte_eth_dev_get_port_by_name(name.c_str(), &id) != 0)
      return makeError("DPDK: vdev {0} made no port", vdev);
    ids.push_back(id);
  }
  ports->portIds.assign(ids.begin(), ids.begin() + options.vdevs.size());
  if (!options.exceptionVdev.empty())
    ports->exceptionPort = ids.back();
  ports->pool = rte_pktmbuf_pool_create(("morpheus_mbufs" + std::to_string(nextPool++)).c_str(),
                                        options.mbufs, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                        rte_socket_id());
  if (!ports->pool)
    return makeError("DPDK: packet buffer pool: {0}", rte_strerror(rte_errno));
  for (size_t i = 0; i < ids.size(); ++i)
    if (Error err = startPort(ids[i], ports->pool))
      return withContext(std::move(err), vdevs[i]);
  return ports;
}

DpdkPorts::~DpdkPorts() {
  std::vector<uint16_t> ids = portIds;
  if (exceptionPort)
    ids.push_back(*exceptionPort);
  for (uint16_t id : ids) {
    rte_eth_dev_stop(id);
    rte_eth_dev_close(id);
  }
  for (const std::string &device : devices)
    rte_eal_hotplug_remove("vdev", device.c_str());
  if (pool)
    rte_mempool_free(pool);
}

DpdkStats DpdkPorts::run(Trampoline &trampoline, uint32_t burstSize, uint64_t maxPackets,
                         uint32_t idlePolls, const std::function<void()> &betweenBursts) {
  DpdkStats stats;
  burstSize = std::max<uint32_t>(1, std::min<uint32_t>(burstSize, 512));
  std::vector<rte_mbuf *> received(burstSize);
  std::vector<mu_packet> packets(burstSize);
  // Per egress port, the packets to send after the burst; and the
  // exception port's.
  const uint16_t portCount = ports();
  std::vector<std::vector<rte_mbuf *>> outgoing(portCount);
  std::vector<rte_mbuf *> exceptions;
  auto start = std::chrono::steady_clock::now();
  double cpuStart = threadCpuSeconds();
  uint32_t idle = 0;
  while (stats.loop.packets < maxPackets && idle < idlePolls) {
    bool any = false;
    for (uint16_t port = 0; port < portCount && stats.loop.packets < maxPackets; ++port) {
      uint16_t count = rte_eth_rx_burst(
          portIds[port], 0, received.data(),
          uint16_t(std::min<uint64_t>(burstSize, maxPackets - stats.loop.packets)));
      if (!count)
        continue;
      any = true;
      Trampoline::Burst burst = trampoline.enter(); // one version per burst
      HandlerFunction handler = burst.handler();
      for (uint16_t i = 0; i < count; ++i) {
        rte_mbuf *mbuf = received[i];
        packets[i] = {rte_pktmbuf_mtod(mbuf, uint8_t *), rte_pktmbuf_data_len(mbuf), port};
        int verdict = handler(&packets[i]);
        stats.loop.countVerdict(verdict);
        if (verdict == MU_TX && packets[i].port < portCount) {
          outgoing[packets[i].port].push_back(mbuf);
        } else if (verdict == MU_PASS && exceptionPort) {
          exceptions.push_back(mbuf);
        } else {
          stats.unsent += verdict == MU_TX;
          stats.unpassed += verdict == MU_PASS;
          rte_pktmbuf_free(mbuf);
        }
      }
      // Sends `queue` out of `out`, freeing what it refuses; how many went.
      auto send = [](uint16_t out, std::vector<rte_mbuf *> &queue) -> uint64_t {
        uint16_t sent = rte_eth_tx_burst(out, 0, queue.data(), uint16_t(queue.size()));
        for (size_t i = sent; i < queue.size(); ++i)
          rte_pktmbuf_free(queue[i]);
        queue.clear();
        return sent;
      };
      for (uint16_t out = 0; out < portCount; ++out) {
        size_t queued = outgoing[out].size();
        if (!queued)
          continue;
        uint64_t sent = send(portIds[out], outgoing[out]);
        stats.sent += sent;
        stats.unsent += queued - sent;
      }
      if (!exceptions.empty()) {
        size_t queued = exceptions.size();
        uint64_t passed = send(*exceptionPort, exceptions);
        stats.passed += passed;
        stats.unpassed += queued - passed;
      }
      stats.loop.packets += count;
      ++stats.loop.bursts;
      if (betweenBursts)
        betweenBursts();
    }
    idle = any ? 0 : idle + 1;
  }
  stats.loop.seconds = threadCpuSeconds() - cpuStart;
  stats.loop.wallSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

} // namespace morpheus::user
