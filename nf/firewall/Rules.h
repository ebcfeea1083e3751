// The firewall's rule files: one rule per line in the ClassBench key=value
// format, first match wins.
//
//   src=PREFIX dst=PREFIX l4proto=TCP|UDP|ICMP|GRE sport=LO:HI dport=LO:HI action=ACCEPT|DROP
//
// Every field but `action` may be left out and then matches anything; a
// port range other than 0:65535 only matches packets that carry ports (TCP
// and UDP, not non-first fragments).
#pragma once

#include "nf/common/ConfigFile.h"
#include "support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

extern "C" {
#include "firewall.h"
}

namespace morpheus::nf::firewall {

struct PortRange {
  uint16_t low = 0, high = 65535;

  bool any() const { return low == 0 && high == 65535; }
  bool contains(uint16_t port) const { return low <= port && port <= high; }
};

struct Rule {
  unsigned line = 0; // in the file, for messages
  Ipv4Prefix src, dst; // /0 when not given
  std::optional<uint8_t> protocol; // none: any protocol
  PortRange sport, dport;
  fw_action action = FW_DROP;
};

// "TCP" -> 6 for the protocols rules may name; none for anything else.
std::optional<uint8_t> protocolNumber(const std::string &name);
std::string protocolName(uint8_t number); // "TCP", or the number

// Every rule of `path`, in order; the first bad line is an error naming it.
Expected<std::vector<Rule>> parseRules(const std::string &path);

} // namespace morpheus::nf::firewall
