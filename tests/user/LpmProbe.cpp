#include "LpmProbe.h"

#include <gtest/gtest.h>

#include <cstring>

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

uint32_t answerIn(const PacketResult &result) {
  uint32_t answer;
  std::memcpy(&answer, result.bytes.data() + 8, 4);
  return answer;
}

} // namespace morpheus::user::testing
