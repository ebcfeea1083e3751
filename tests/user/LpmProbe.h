// tests/user/handlers/lpm_probe.c as the user-space backend's tests use it:
// its keys, a packet asking for an address, and the answer the handler
// wrote into the packet (the table's value, or 0xffffffff for none).
#pragma once

#include "backend/user/EventLoop.h"
#include "backend/user/Handler.h"

#include <cstdint>
#include <memory>
#include <string>

namespace morpheus::user::testing {

extern const std::string LpmProbeSource;

// The probe handler (entry lpm_probe) loaded with `options`; a test
// failure when it cannot be.
std::unique_ptr<Handler> loadLpmProbe(HandlerOptions options);

// { prefixlen (host order), address (network order) }, as lpm_probe.c
// reads a key and the user-space LPM tables store one; `address` in host
// order.
Bytes lpmKey(uint32_t prefixLength, uint32_t address);

// A packet asking for `address` with key length `prefixLength`.
Bytes probeFor(uint32_t address, uint32_t prefixLength = 32);

// What the handler wrote into `result`'s packet: the value it looked up.
uint32_t answerIn(const PacketResult &result);

} // namespace morpheus::user::testing
