// The control plane of nat: reading its configuration file, applying it to
// the pinned maps in one transaction, and reading back the translations the
// data plane created.
#pragma once

#include "nf/common/ConfigFile.h"
#include "support/Error.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

extern "C" {
#include "nf/nat/nat.h"
}

namespace morpheus::nf::nat {

// Where `morpheus run nf/nat/nat.bpf.c` pins the maps.
inline constexpr const char *DefaultPinDir = "/sys/fs/bpf/morpheus/nat";

// A configuration file, parsed and checked. Addresses in host byte order.
struct NatSettings {
  std::vector<Ipv4Prefix> inside;
  std::vector<uint32_t> external;
  uint16_t portMin = 0, portMax = 0;
  uint32_t insideIfindex = 0, outsideIfindex = 0;
  Mac outsideMac{}, nextHopMac{};
};

// How a configuration's inside-port and outside-port values become the
// data plane's ports (NatSettings::insideIfindex, outsideIfindex), and the
// outside port's own MAC address when its line gives no mac=. Errors name
// the line.
struct PortResolver {
  std::function<Expected<uint32_t>(const ConfigLine &line, const std::string &value,
                                   const char *what)>
      port;
  std::function<Expected<Mac>(const ConfigLine &line, uint32_t port, const char *what)> mac;
};

// The XDP program's ports: interface names or indexes resolved in the
// caller's network namespace, MAC addresses read from the interface.
PortResolver kernelInterfaces();

// Parses and validates the whole file; the error names the first bad line.
// Ports are resolved by `ports`.
Expected<NatSettings> parseConfig(const std::string &path,
                                  const PortResolver &ports = kernelInterfaces());

// nat_config's value for `settings`.
nat_config configValue(const NatSettings &settings);

// Whether a translation (addresses and port in network order) fits
// `settings`: its inside address in an inside prefix, its external address
// in the pool, its port in the range. A configuration change removes the
// translations that do not.
bool allowsTranslation(const NatSettings &settings, uint32_t insideAddr, uint32_t externalAddr,
                       uint16_t externalPort);

// Makes `settings` the running configuration, in one all-or-nothing
// transaction that also removes the translations it no longer allows
// (inside address outside every inside prefix, external address no longer
// in the pool, external port out of the range).
Error applyConfig(const NatSettings &settings, const std::string &pinDir);

// parseConfig, then applyConfig: nothing is changed unless the whole file
// is valid.
Error loadConfig(const std::string &path, const std::string &pinDir);

// One translation as the two tables hold it. A flow's halves normally come
// and go together; either can be alone for a moment (LRU eviction, a racing
// new flow), and the data plane repairs that on the flow's next packet.
struct Translation {
  enum class Halves { Both, OutboundOnly, InboundOnly };
  uint8_t protocol = 0;
  uint32_t insideAddr = 0, externalAddr = 0, remoteAddr = 0; // host order
  uint16_t insidePort = 0, externalPort = 0, remotePort = 0; // ICMP: echo id, 0
  Halves halves = Halves::Both;
};

Expected<std::vector<Translation>> readTranslations(const std::string &pinDir);
// A table, one translation per line, sorted.
std::string formatTranslations(const std::vector<Translation> &translations);

// The data plane's counters summed over CPUs, with their names.
Expected<std::vector<std::pair<std::string, uint64_t>>> readStats(const std::string &pinDir);

} // namespace morpheus::nf::nat
