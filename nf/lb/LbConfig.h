// The lb configuration file: global settings, then VIPs each followed by
// its reals. The file describes the whole desired state; loading it makes
// the maps match (README.md has the format).
#pragma once

#include "nf/common/ConfigFile.h"
#include "support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace morpheus::nf::lb {

struct RealSpec {
  uint32_t address = 0; // host byte order
  uint32_t weight = 1;
  bool gue = false;
  ConfigLine line;
};

struct VipSpec {
  uint32_t address = 0; // host byte order
  uint16_t port = 0;
  uint8_t protocol = 0; // IPPROTO_TCP / IPPROTO_UDP
  bool quic = false;
  std::vector<RealSpec> reals;
  ConfigLine line;
};

struct LbSettings {
  uint32_t source = 0;     // host byte order
  uint32_t sourceMask = 0; // bits of the outer source taken from the client
  Mac gateway{};
  uint8_t ttl = 64;
  uint16_t guePort = 0; // 0: LB_GUE_DEFAULT_PORT
};

struct LbConfig {
  LbSettings settings;
  std::vector<VipSpec> vips;
};

// Parses and checks everything that does not depend on the running maps
// (syntax, duplicates, consistency); errors are "file:line: message".
Expected<LbConfig> parseLbConfig(const std::string &path);

// "10.0.0.1:80/tcp", for messages.
std::string describeVip(uint32_t address, uint16_t port, uint8_t protocol);
std::string formatIpv4(uint32_t address);

} // namespace morpheus::nf::lb
