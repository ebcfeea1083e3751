// How a version records the keys its lookups see (instrument-table-sites,
// flow-fast-path): what the backend's runtime provides and how large its
// profile slots are.
#pragma once

#include <cstdint>
#include <set>
#include <string>

namespace morpheus::core {

// Sampled recording of lookup keys (instrument-table-sites): the runtime
// function that says where this packet's key goes, and which sites may be
// recorded.
struct ProfileOptions {
  // Runtime function `ptr (i32 site)`: a slot for the key, or null when this
  // packet is not sampled. Linked with the guard runtime.
  std::string slotFunction;
  uint32_t sites = 0;    // site ids below this have a profile slot
  uint32_t keyBytes = 0; // a slot's size: longer keys are not recorded
  std::set<std::string> excludedTables; // the operator's --no-profile
};

} // namespace morpheus::core
