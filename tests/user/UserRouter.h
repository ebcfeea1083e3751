// The router handler (nf/router/user/router_user.c) as the user-space
// backend's tests use it: loaded, configured with a small routing table
// (nested prefixes, a local route, a port without a neighbour), and
// packets for every outcome.
#pragma once

#include "backend/user/EventLoop.h"
#include "backend/user/Handler.h"
#include "support/packet/Packet.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

extern "C" {
#include "../../nf/router/router.h"
}

namespace morpheus::user::testing {

extern const std::string RouterSource;
extern const packet::Mac GatewayMac, PortMac, OtherMac;

template <typename T> Bytes bytesOfValue(const T &value) {
  Bytes bytes(sizeof value);
  std::memcpy(bytes.data(), &value, sizeof value);
  return bytes;
}

// The router handler's options: compiled with `cflags`, with the prefetch
// function `prefetch` asks for.
HandlerOptions
routerOptions(const std::vector<std::string> &cflags = {}, const core::FaultInjection &faults = {},
              HandlerOptions::Prefetch prefetch = HandlerOptions::Prefetch::OwnElseDerived);
// The router handler loaded with `options`; a test failure when it cannot.
std::unique_ptr<Handler> loadRouter(const HandlerOptions &options);
std::unique_ptr<Handler>
loadRouter(const std::vector<std::string> &cflags = {}, const core::FaultInjection &faults = {},
           HandlerOptions::Prefetch prefetch = HandlerOptions::Prefetch::OwnElseDerived);

route_key routeKey(const char *prefix, uint32_t length);

// Four bound ports, the gateway 192.168.1.1 behind ports 0-2, and routes: a
// default route, 10.1.0.0/16 and 10.1.2.0/24 (nested) to the gateway on
// ports 1 and 2, 10.9.9.9/32 local, 172.16.0.0/12 on port 3 with no
// neighbour behind it.
void configure(TableSet &tables);

// An Ethernet/IPv4/UDP packet from 198.18.0.1 to `destination`.
Bytes udpTo(const char *destination, uint8_t ttl = 64);

// Every outcome of the router at least once.
std::vector<Bytes> samplePackets();

// `frames` in order, `repeats` times.
ReplayRing ringOf(const std::vector<Bytes> &frames, unsigned repeats);

} // namespace morpheus::user::testing
