#include "UserRouter.h"

#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>

#include <arpa/inet.h>

namespace morpheus::user::testing {

const std::string RouterSource = MORPHEUS_SOURCE_DIR "/nf/router/user/router_user.c";
const packet::Mac GatewayMac{0x02, 0, 0, 0, 0x01, 0};
const packet::Mac PortMac{0x02, 0x0a, 0, 0, 0, 0};
const packet::Mac OtherMac{0x02, 0xbb, 0, 0, 0, 7};

HandlerOptions routerOptions(const std::vector<std::string> &cflags,
                             const core::FaultInjection &faults,
                             HandlerOptions::Prefetch prefetch) {
  HandlerOptions options;
  options.prefetch = prefetch;
  options.entry = "router";
  options.cflags = cflags;
  options.inlineLimit = 64;
  options.faults = faults;
  return options;
}

std::unique_ptr<Handler> loadRouter(const HandlerOptions &options) {
  auto handler = Handler::load(RouterSource, options);
  if (!handler) {
    ADD_FAILURE() << toString(handler.takeError());
    return nullptr;
  }
  return std::move(*handler);
}

std::unique_ptr<Handler> loadRouter(const std::vector<std::string> &cflags,
                                    const core::FaultInjection &faults,
                                    HandlerOptions::Prefetch prefetch) {
  return loadRouter(routerOptions(cflags, faults, prefetch));
}

route_key routeKey(const char *prefix, uint32_t length) {
  return {length, htonl(packet::parseIpv4(prefix))};
}

void configure(TableSet &tables) {
  Guard::Update change(tables.guard());
  for (uint32_t port = 0; port < 4; ++port) {
    uint32_t bound = 1;
    ASSERT_THAT_ERROR(tables.updateUnguarded("ports", bytesOfValue(port), bytesOfValue(bound)),
                      llvm::Succeeded());
    if (port == 3)
      continue;
    neighbor_key key{htonl(packet::parseIpv4("192.168.1.1")), port};
    neighbor value{};
    std::memcpy(value.dst_mac, GatewayMac.data(), 6);
    std::memcpy(value.src_mac, PortMac.data(), 6);
    value.src_mac[5] = uint8_t(port);
    ASSERT_THAT_ERROR(tables.updateUnguarded("neighbors", bytesOfValue(key), bytesOfValue(value)),
                      llvm::Succeeded());
  }
  uint32_t gateway = htonl(packet::parseIpv4("192.168.1.1"));
  const std::pair<route_key, route> routes[] = {
      {routeKey("0.0.0.0", 0), {gateway, 0, ROUTE_FORWARD}},
      {routeKey("10.1.0.0", 16), {gateway, 1, ROUTE_FORWARD}},
      {routeKey("10.1.2.0", 24), {gateway, 2, ROUTE_FORWARD}},
      {routeKey("10.9.9.9", 32), {0, 0, ROUTE_LOCAL}},
      {routeKey("172.16.0.0", 12), {gateway, 3, ROUTE_FORWARD}},
  };
  for (const auto &[key, value] : routes)
    ASSERT_THAT_ERROR(tables.updateUnguarded("routes", bytesOfValue(key), bytesOfValue(value)),
                      llvm::Succeeded());
}

Bytes udpTo(const char *destination, uint8_t ttl) {
  packet::Ipv4Options ip;
  ip.saddr = packet::parseIpv4("198.18.0.1");
  ip.daddr = packet::parseIpv4(destination);
  ip.ttl = ttl;
  return packet::PacketBuilder()
      .ethernet(OtherMac, PortMac)
      .ipv4(ip)
      .udp(1234, 53)
      .payload(18)
      .build();
}

std::vector<Bytes> samplePackets() {
  std::vector<Bytes> packets = {udpTo("10.1.2.3"),  udpTo("10.1.7.7"),   udpTo("8.8.8.8"),
                                udpTo("10.9.9.9"),  udpTo("172.20.0.1"), udpTo("10.1.2.3", 1),
                                udpTo("224.0.0.5"), udpTo("10.1.2.200")};
  Bytes broken = udpTo("10.1.2.3");
  broken[14 + 10] ^= 0xff; // the IPv4 checksum
  packets.push_back(broken);
  Bytes arp = udpTo("10.1.2.3");
  arp[12] = 0x08, arp[13] = 0x06;
  packets.push_back(arp);
  Bytes truncated = udpTo("10.1.2.3");
  truncated.resize(20);
  packets.push_back(truncated);
  return packets;
}

ReplayRing ringOf(const std::vector<Bytes> &frames, unsigned repeats) {
  ReplayRing ring;
  ring.frames = frames;
  for (unsigned round = 0; round < repeats; ++round)
    for (uint32_t i = 0; i < frames.size(); ++i)
      ring.sequence.push_back(i);
  return ring;
}

} // namespace morpheus::user::testing
