#include "LpmProbe.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace morpheus::user::testing {

const std::string LpmProbeSource = MORPHEUS_SOURCE_DIR "/tests/user/handlers/lpm_probe.c";

std::unique_ptr<Handler> loadLpmProbe(HandlerOptions options) {
  options.entry = "lpm_probe";
  auto handler = Handler::load(LpmProbeSource, options);
  if (!handler) {
    ADD_FAILURE() << toString(handler.takeError());
    return nullptr;
  }
  return std::move(*handler);
}

std::vector<std::string> lpmKinds() {
#ifdef MORPHEUS_WITH_DPDK
  return {"MU_LPM_DIR24", "MU_LPM_LINEAR", "MU_LPM_RTE"};
#else
  return {"MU_LPM_DIR24", "MU_LPM_LINEAR"};
#endif
}

std::string lpmKindTestName(const std::string &kind) {
  return kind == "MU_LPM_DIR24" ? "Dir24" : kind == "MU_LPM_LINEAR" ? "Linear" : "Rte";
}

Bytes lpmKey(uint32_t prefixLength, uint32_t address) {
  Bytes key(8);
  std::memcpy(key.data(), &prefixLength, 4);
  for (int i = 0; i < 4; ++i)
    key[4 + i] = uint8_t(address >> (24 - 8 * i));
  return key;
}

Bytes probeFor(uint32_t address, uint32_t prefixLength) {
  Bytes frame = lpmKey(prefixLength, address);
  frame.resize(16, 0);
  return frame;
}

std::optional<uint32_t> longestMatch(const std::vector<Route> &routes, uint32_t address) {
  const Route *best = nullptr;
  for (const Route &route : routes)
    if (route.first() <= address && address <= route.last() &&
        (!best || route.length > best->length))
      best = &route;
  return best ? std::optional(best->value) : std::nullopt;
}

std::vector<Route> nestedRoutes() {
  std::vector<Route> routes;
  for (uint32_t length = 0; length <= 32; ++length)
    routes.push_back({length, 0x0a0b0c0du, 1000 + length});
  routes.push_back({16, 0xc0a80000u, 2000});
  routes.push_back({24, 0xc0a84d00u, 2001});
  routes.push_back({12, 0xac100000u, 2002});
  routes.push_back({31, 0xac1f0002u, 2003});
  return routes;
}

std::vector<uint32_t> addressesAround(const std::vector<Route> &routes) {
  std::vector<uint32_t> addresses = {0, 0xffffffffu};
  for (const Route &route : routes)
    for (uint32_t address : {route.first(), route.last(), route.first() - 1, route.last() + 1})
      addresses.push_back(address);
  std::mt19937 random(13);
  for (int i = 0; i < 200; ++i)
    addresses.push_back(i % 2 ? uint32_t(random()) : 0x0a0b0c0du ^ (1u << (random() % 32)));
  return addresses;
}

const core::SiteDecision *decisionOn(const core::SpecializationLog &log, const std::string &table) {
  for (const core::SiteDecision &decision : log.decisions)
    if (decision.table == table)
      return &decision;
  return nullptr;
}

uint32_t answerIn(const PacketResult &result) {
  uint32_t answer;
  std::memcpy(&answer, result.bytes.data() + 8, 4);
  return answer;
}

} // namespace morpheus::user::testing
