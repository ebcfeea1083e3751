// Maps the kernel tests create themselves (bpf::createMap).
#pragma once

#include "backend/bpf/BpfObject.h"

#include <cstdint>

namespace morpheus::testing {

inline bpf::MapLayout mapLayout(const char *name, uint32_t type, uint32_t keySize,
                                uint32_t valueSize, uint32_t maxEntries) {
  bpf::MapLayout made;
  made.name = name;
  made.type = type;
  made.keySize = keySize;
  made.valueSize = valueSize;
  made.maxEntries = maxEntries;
  return made;
}

} // namespace morpheus::testing
