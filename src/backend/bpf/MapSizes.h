// Maps sized as the program's own loader sizes them: a loader may call
// bpf_map__set_max_entries before load (a NAT64 gateway declares
// `max_entries 1` and sizes its table from its configuration). Morpheus
// compiles from source, so `--max-entries MAP=N` writes N into the map's
// BTF definition in the module itself: the catalog, the original, every
// specialized version and every scratch copy are then built for the size
// the kernel creates, and nothing is specialized for the declared one (a
// one-entry array inlined whole would answer every other key wrongly).
#pragma once

#include "support/Error.h"

#include <llvm/IR/Module.h>

#include <cstdint>
#include <map>
#include <string>

namespace llvm {
class DIBasicType;
class DIBuilder;
class DIType;
} // namespace llvm

namespace morpheus::bpf {

// The debug type libbpf's __uint(name, value) gives a BTF map definition's
// member, which libbpf reads `value` from: a pointer to an array of
// `value` ints (also how legacy definitions are converted).
llvm::DIType *uintMember(llvm::DIBuilder &builder, llvm::DIBasicType *intType, uint32_t value);

// Sets the max_entries of each map named in `sizes` (BTF-defined, in
// section .maps: legacy definitions are converted before) to its value.
// A name that is no such map, a definition without max_entries, or a size
// of 0 is an error naming `path` and the map.
Error resizeMaps(llvm::Module &module, const std::map<std::string, uint32_t> &sizes,
                 const std::string &path);

} // namespace morpheus::bpf
