// The user-space firewall (nf/firewall/user/firewall_user.c) from the
// control plane's side: its tables filled from a rule list (the bit-vector
// tables of nf/firewall/Classifier.h, which the kernel version is loaded
// with too), and what a rule list means for one packet, rule by rule (the
// reference that tests and `morpheus user-run --nf firewall --oracle`
// check the bit-vector search against). The tables are written through
// support/TableWrites.h, which the user-space backend's implement.
#pragma once

#include "nf/firewall/Rules.h"
#include "support/TableWrites.h"

#include <compare>
#include <optional>
#include <vector>

namespace morpheus::nf::firewall {

// What firewall_user.c classifies a packet by. Addresses and ports in host
// order; without ports (not TCP/UDP, or a non-first fragment) the ports
// are zero.
struct PacketFields {
  uint32_t saddr = 0, daddr = 0;
  uint8_t protocol = 0;
  bool hasPorts = false;
  uint16_t sport = 0, dport = 0;
  auto operator<=>(const PacketFields &) const = default;
};

// The fields of an Ethernet frame as firewall_user.c parses it (up to two
// VLAN tags), or none for the frames it does not classify by rules
// (not IPv4, malformed).
std::optional<PacketFields> packetFields(const std::vector<uint8_t> &frame);

// The index of the first of `rules` that matches `fields`, or none: a rule
// with a port range other than 0:65535 matches only packets with ports.
std::optional<size_t> firstMatch(const std::vector<Rule> &rules, const PacketFields &fields);

// Makes `rules` (at most FW_MAX_RULES) and `defaultAction` the firewall's
// configuration in one change of `tables` (a firewall_user.c handler's): the next burst classifies by the new rules only. Prefixes of
// an earlier rule list are removed, every array slot is rewritten; the hit
// counters are left as they are.
Error loadUserRules(TableWrites &tables, const std::vector<Rule> &rules,
                    fw_action defaultAction);

} // namespace morpheus::nf::firewall
