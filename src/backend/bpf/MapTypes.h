// Kernel map types as the core and people see them, without libbpf: the
// names libbpf gives them (BPF_MAP_TYPE_LRU_HASH is "lru_hash"), and the
// core's view of a map of a given type (TableInfo). Part of morpheus_bpf_ir,
// the libbpf-free half of the backend that the pass driver (morpheus-opt)
// links.
#pragma once

#include "core/Tables.h"

#include <optional>
#include <string>
#include <string_view>

namespace morpheus::bpf {

// libbpf's name of a map type ("hash", "lpm_trie", ...), or "type N" for a
// type it has no name for; MapTypes.NamesAreLibbpfs checks them against
// libbpf_bpf_map_type_str.
std::string mapTypeName(unsigned type);
// The type whose name is `name`, if any.
std::optional<unsigned> mapTypeNamed(std::string_view name);

// The core's view of a kernel map type.
core::TableInfo tableInfoFor(const std::string &name, unsigned type,
                             uint32_t keySize, uint32_t valueSize,
                             uint32_t maxEntries);

} // namespace morpheus::bpf
