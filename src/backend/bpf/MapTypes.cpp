#include "backend/bpf/MapTypes.h"

#include <linux/bpf.h>

#include <iterator>

namespace morpheus::bpf {

namespace {

// Indexed by BPF_MAP_TYPE_*, as libbpf 1.1 names them.
const char *const TypeNames[] = {
    "unspec", "hash", "array", "prog_array", "perf_event_array", "percpu_hash", "percpu_array",
    "stack_trace", "cgroup_array", "lru_hash", "lru_percpu_hash", "lpm_trie", "array_of_maps",
    "hash_of_maps", "devmap", "sockmap", "cpumap", "xskmap", "sockhash", "cgroup_storage",
    "reuseport_sockarray", "percpu_cgroup_storage", "queue", "stack", "sk_storage",
    "devmap_hash", "struct_ops", "ringbuf", "inode_storage", "task_storage", "bloom_filter",
    "user_ringbuf", "cgrp_storage",
};

} // namespace

std::string mapTypeName(unsigned type) {
  if (type < std::size(TypeNames))
    return TypeNames[type];
  return "type " + std::to_string(type);
}

std::optional<unsigned> mapTypeNamed(std::string_view name) {
  for (unsigned type = 0; type < std::size(TypeNames); ++type)
    if (name == TypeNames[type])
      return type;
  return std::nullopt;
}

core::TableInfo tableInfoFor(const std::string &name, unsigned type,
                             uint32_t keySize, uint32_t valueSize,
                             uint32_t maxEntries) {
  core::TableInfo info;
  info.name = name;
  info.typeName = mapTypeName(type);
  info.keySize = keySize;
  info.valueSize = valueSize;
  info.maxEntries = maxEntries;
  switch (type) {
  case BPF_MAP_TYPE_HASH:
    info.match = core::TableMatch::Exact;
    break;
  case BPF_MAP_TYPE_PERCPU_HASH:
    info.match = core::TableMatch::Exact;
    info.perCpu = true;
    break;
  case BPF_MAP_TYPE_LRU_HASH:
  case BPF_MAP_TYPE_LRU_PERCPU_HASH:
    // A lookup sets the entry's reference bit, which decides what a later
    // insert evicts: removing the lookup would change the map's future.
    info.match = core::TableMatch::Exact;
    info.perCpu = type == BPF_MAP_TYPE_LRU_PERCPU_HASH;
    info.lookupHasSideEffects = true;
    break;
  case BPF_MAP_TYPE_ARRAY:
    info.match = core::TableMatch::Index;
    break;
  case BPF_MAP_TYPE_PERCPU_ARRAY:
    info.match = core::TableMatch::Index;
    info.perCpu = true;
    break;
  case BPF_MAP_TYPE_LPM_TRIE:
    info.match = core::TableMatch::LongestPrefix;
    break;
  case BPF_MAP_TYPE_DEVMAP:
  case BPF_MAP_TYPE_DEVMAP_HASH:
    // A lookup returns the entry's struct bpf_devmap_val (the ifindex, and
    // the id of the program attached to the entry), the bytes user space
    // reads back, which the kernel makes read-only to programs
    // (BPF_F_RDONLY_PROG). A devmap's key is an index below max_entries
    // whose slots may be empty, a devmap_hash's any u32: both answer the
    // keys they hold and miss the others, as a hash table does.
    info.match = core::TableMatch::Exact;
    info.entriesRemovedUnguarded =
        "the kernel removes a " + info.typeName + " entry when its device is unregistered";
    break;
  case BPF_MAP_TYPE_CPUMAP:
    info.match = core::TableMatch::Unsupported;
    info.lookupNotModelled =
        "the verifier refuses lookups in a cpumap (programs may only redirect through it)";
    break;
  case BPF_MAP_TYPE_XSKMAP:
    info.match = core::TableMatch::Unsupported;
    info.lookupNotModelled = "a lookup returns the AF_XDP socket bound to the slot (struct "
                             "bpf_xdp_sock), not bytes user space wrote";
    break;
  case BPF_MAP_TYPE_SOCKMAP:
  case BPF_MAP_TYPE_SOCKHASH:
    info.match = core::TableMatch::Unsupported;
    info.lookupNotModelled =
        "a lookup returns the socket the entry holds (struct bpf_sock), not bytes user space "
        "wrote";
    break;
  default:
    info.match = core::TableMatch::Unsupported;
  }
  return info;
}

} // namespace morpheus::bpf
