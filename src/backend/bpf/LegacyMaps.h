// Maps defined the way libbpf before 1.0 and iproute2 took them: a struct
// of 32-bit fields in section "maps" (`struct bpf_map_def SEC("maps")`,
// iproute2's `struct bpf_elf_map`). libbpf 1.x refuses such objects
// ("legacy map definitions in 'maps' section are not supported"), so
// programs written for it (Suricata's XDP filters, older tc programs)
// would not load at all.
#pragma once

#include "support/Error.h"

#include <llvm/IR/Module.h>

#include <string>

namespace morpheus::bpf {

// Rewrites every legacy map definition of `module` as the BTF-defined map
// libbpf 1.x takes: a global in ".maps" whose debug type has a member per
// field, each a pointer to an array of that many ints (what __uint()
// expands to), with the legacy global's name, linkage and every use. Both
// layouts start with the same five fields (type, key size, value size,
// max entries, flags), the only ones converted; a definition that sets a
// later one (an inner map index, iproute2's id or pinning) is refused,
// naming the map and the field, since the BTF form states those otherwise
// and guessing would change what the program's loader meant. Needs the
// module's debug info (clang -g): the BTF is generated from it.
Error convertLegacyMaps(llvm::Module &module, const std::string &path);

} // namespace morpheus::bpf
