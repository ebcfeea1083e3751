// The code a BPF ELF object holds per function, as emitted: its
// instructions and what their relocations name (a map, a constant's
// section, a called function). `morpheus explain` compares a version's
// functions with the original's, so it never calls code specialized that
// emits exactly what the original does.
#pragma once

#include "support/Error.h"

#include <llvm/ADT/ArrayRef.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace morpheus::bpf {

struct FunctionCode {
  std::string instructions; // the function's bytes in its section
  // (offset in the function, relocation type, symbol named)
  std::vector<std::tuple<uint64_t, uint32_t, std::string>> relocations;
  bool operator==(const FunctionCode &) const = default;
};

// Every function symbol of `elf` (programs and BPF-to-BPF callees), by
// name. An object that is no ELF, or whose symbols cannot be read, is an
// error.
Expected<std::map<std::string, FunctionCode>> functionCode(llvm::ArrayRef<char> elf);

// The functions of the object `version` whose code is the same in the
// object `original` (a function `original` lacks is not).
Expected<std::set<std::string>> unchangedFunctions(llvm::ArrayRef<char> version,
                                                   llvm::ArrayRef<char> original);

} // namespace morpheus::bpf
