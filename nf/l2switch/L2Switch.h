// The l2switch control plane as a library: config loaders (ports, static
// MACs), FDB aging and listing. `morpheus nf l2switch` (Control.cpp) and the
// tests call these. Interface names and ifindexes are resolved, and devmap
// entries written, in the calling thread's network namespace.
#pragma once

#include "nf/common/ConfigFile.h"
#include "support/Error.h"

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "l2switch.h"

inline bool operator<(const l2sw_fdb_key &a, const l2sw_fdb_key &b) {
  return std::memcmp(&a, &b, sizeof(a)) < 0;
}
inline bool operator==(const l2sw_fdb_key &a, const l2sw_fdb_key &b) {
  return !std::memcmp(&a, &b, sizeof(a));
}

namespace morpheus::nf::l2switch {

static_assert(sizeof(l2sw_port) == 8 + 8 * L2SW_VLAN_WORDS && sizeof(l2sw_vlan) == 12 &&
              sizeof(l2sw_fdb_key) == 8 && sizeof(l2sw_fdb_entry) == 16);

inline const char *const DefaultPinDir = "/sys/fs/bpf/morpheus/l2switch";

struct PortSpec {
  ConfigLine line;
  uint32_t ifindex = 0;
  l2sw_port config = {};
};

// Every line `PORT access VLAN` or `PORT trunk VLANS [native=VLAN]` of
// `path`, validated; PORT is an interface name or ifindex.
Expected<std::vector<PortSpec>> parsePorts(const std::string &path);

// Makes the switch's ports exactly `ports`: port table, unicast egress
// devmap, per-VLAN flood groups and counts, and drops learned FDB entries
// that point at a port no longer carrying their VLAN. All or nothing.
Error applyPorts(const std::string &pinDir, const std::vector<PortSpec> &ports);
Error loadPorts(const std::string &pinDir, const std::string &path);

struct StaticSpec {
  ConfigLine line;
  l2sw_fdb_key key = {};
  uint32_t ifindex = 0;
};

// Every line `MAC VLAN PORT` of `path`, validated on its own.
Expected<std::vector<StaticSpec>> parseStatic(const std::string &path);

// Makes the static FDB entries exactly `entries` (each port must be
// configured and carry the VLAN). All or nothing.
Error applyStatic(const std::string &pinDir, const std::vector<StaticSpec> &entries);
Error loadStatic(const std::string &pinDir, const std::string &path);

// Now on the clock the data plane stamps entries with.
uint64_t monotonicNowNs();

struct AgingReport {
  size_t entries = 0; // in the FDB before aging
  size_t removed = 0;
};

// Removes learned entries last seen more than `maxAgeNs` before `nowNs`.
Expected<AgingReport> ageFdb(const std::string &pinDir, uint64_t maxAgeNs, uint64_t nowNs);

struct FdbRow {
  l2sw_fdb_key key;
  l2sw_fdb_entry entry;
};
Expected<std::vector<FdbRow>> readFdb(const std::string &pinDir);

} // namespace morpheus::nf::l2switch
