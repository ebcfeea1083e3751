// Applying an lb configuration to the running function's pinned maps, and
// what the runtime commands read and change there.
#pragma once

#include "LbConfig.h"
#include "support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace morpheus::nf::lb {

// Where `morpheus run nf/lb/lb.bpf.c` pins the maps.
inline constexpr const char *DefaultPinDir = "/sys/fs/bpf/morpheus/lb";

struct LoadReport {
  size_t vips = 0, reals = 0; // configured now
  size_t changes = 0;         // map updates and deletes committed
  size_t ringSlots = 0;       // of those, ring slots rewritten
  double commitSeconds = 0;
};

// Makes the maps in `pinDir` describe exactly `config`, in one
// client::Transaction: VIPs and reals not in it are removed, and only entries
// that differ are written. Reals and VIPs already present keep their
// indexes, so the flow table stays valid and unchanged rings are not
// rewritten. Capacity errors name the config line that does not fit; on
// any error nothing has changed.
Expected<LoadReport> applyConfig(const LbConfig &config, const std::string &pinDir);

// parseLbConfig + applyConfig.
Expected<LoadReport> loadConfigFile(const std::string &path, const std::string &pinDir);

struct VipStatus {
  std::string vip; // "10.0.0.1:80/tcp"
  uint32_t index = 0;
  bool quic = false;
  uint64_t packets = 0, bytes = 0; // summed over CPUs
};

// Every configured VIP with its counters, ordered by index.
Expected<std::vector<VipStatus>> readVipStatus(const std::string &pinDir);
// The `events` counters summed over CPUs, indexed by enum lb_event.
Expected<std::vector<uint64_t>> readEvents(const std::string &pinDir);
const char *eventName(unsigned event);

// Removes the flows idle for longer than `idleNs` (by their last-seen time)
// so they are balanced afresh; returns how many were removed.
Expected<size_t> expireFlows(const std::string &pinDir, uint64_t idleNs);

} // namespace morpheus::nf::lb
