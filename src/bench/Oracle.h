// Hand-specialized versions of a network function ("oracles"): what an
// expert would write for one configuration and one trace, so Morpheus's
// results also read as a fraction of the best achievable. They share the
// running program's maps and must treat every packet as it does; the bench
// checks that before timing them.
#pragma once

#include "Bench.h"
#include "backend/bpf/BpfObject.h"

#include <vector>

namespace morpheus::bench {

struct OracleProgram {
  std::string name; // the variant's name in results ("oracle-hot10")
  bpf::LoadedObject object;
  std::string entry;
  // Skips lookups the function must make (an LRU's, whose reference bits
  // steer evictions): headroom, not a bound an equivalent version can reach.
  bool skipsLookups = false;
  int fd() const { return object.programFd(entry); }
};

// The oracles of `preset.oracle` for this trace (its frames arriving on
// `ingress`) and the maps as configured; none when the preset names no
// oracle.
Expected<std::vector<OracleProgram>> loadOracles(const Preset &preset,
                                                 const runtime::Optimizer &optimizer,
                                                 const Trace &trace, uint32_t ingress);

} // namespace morpheus::bench
