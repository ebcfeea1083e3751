// The firewall's control plane on its pinned maps: installing a rule list
// (whole, and atomically for the data plane), reading the counters, and
// listing or expiring connection-tracking entries.
#pragma once

#include "Rules.h"

#include <array>
#include <string>
#include <vector>

namespace morpheus::nf::firewall {

// Where `morpheus run nf/firewall/firewall.bpf.c` pins the maps.
inline const std::string DefaultPinDir = "/sys/fs/bpf/morpheus/firewall";

struct LoadOptions {
  fw_action defaultAction = FW_DROP; // when no rule matches
  bool conntrack = false;            // accept replies of rule-accepted TCP/UDP flows
  bool ipv6Accept = false;           // IPv6 is not classified: accept all or drop all
};

// Writes the tables for `rules` into the generation that is not live (only
// the entries that differ from what it holds), zeroes its hit counters, and
// then makes it live with one write of fw_config. All through one
// client::Transaction: on a kernel error nothing changed.
Error loadRules(const std::string &pinDir, const std::vector<Rule> &rules,
                const LoadOptions &options);

struct Status {
  fw_config config = {};
  std::array<uint64_t, FW_STAT_MAX> stats{}; // summed over CPUs
  std::vector<uint64_t> ruleHits;            // live rules in order, then the default
};
Expected<Status> readStatus(const std::string &pinDir);

struct Flow {
  fw_flow key; // as the expected replies carry it
  uint64_t lastSeenNs = 0; // CLOCK_MONOTONIC, like bpf_ktime_get_ns()
};
Expected<std::vector<Flow>> readFlows(const std::string &pinDir);
// Removes the flows idle for longer than `idleNs`; returns how many.
Expected<size_t> expireFlows(const std::string &pinDir, uint64_t idleNs);

} // namespace morpheus::nf::firewall
