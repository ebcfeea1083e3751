// tests/user/handlers/lpm_probe.c as the user-space backend's tests use it:
// its keys, a packet asking for an address, and the answer the handler
// wrote into the packet (the table's value, or 0xffffffff for none).
#pragma once

#include "backend/user/EventLoop.h"
#include "backend/user/Handler.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace morpheus::user::testing {

extern const std::string LpmProbeSource;

// The probe handler (entry lpm_probe) loaded with `options`; a test
// failure when it cannot be.
std::unique_ptr<Handler> loadLpmProbe(HandlerOptions options);

// { prefixlen (host order), address (network order) }, as lpm_probe.c
// reads a key and the user-space LPM tables store one; `address` in host
// order.
Bytes lpmKey(uint32_t prefixLength, uint32_t address);

// The LPM kinds of this build, as LPM_KIND values (MU_LPM_DIR24,
// MU_LPM_LINEAR, and MU_LPM_RTE with DPDK), for tests over every kind; and
// a test name for each (Dir24, Linear, Rte).
std::vector<std::string> lpmKinds();
std::string lpmKindTestName(const std::string &kind);

// A packet asking for `address` with key length `prefixLength`.
Bytes probeFor(uint32_t address, uint32_t prefixLength = 32);

// What the handler wrote into `result`'s packet: the value it looked up.
uint32_t answerIn(const PacketResult &result);

// A route of the probe's table: `address` (host order) / `length` -> `value`.
struct Route {
  uint32_t length, address, value;
  uint32_t first() const { return length ? address & ~((uint64_t(1) << (32 - length)) - 1) : 0; }
  uint32_t last() const { return uint32_t(first() + ((uint64_t(1) << (32 - length)) - 1)); }
};

// The longest route containing `address`, brute force.
std::optional<uint32_t> longestMatch(const std::vector<Route> &routes, uint32_t address);

// Prefixes of every length 0..32 nested around 10.11.12.13 (values 1000 +
// length), beside a few disjoint ones (2000..2003).
std::vector<Route> nestedRoutes();

// Every interval bound of `routes` (each route's first and last address and
// their neighbours), 0 and the last address, and 200 random addresses half
// of them near 10.11.12.13 (seeded: the same every run).
std::vector<uint32_t> addressesAround(const std::vector<Route> &routes);

// The log's decision on `table`'s site (the first), or null.
const core::SiteDecision *decisionOn(const core::SpecializationLog &log, const std::string &table);

} // namespace morpheus::user::testing
