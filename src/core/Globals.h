// The program's writable globals (`.data`, `.bss`, custom `.data.*`
// sections) as one-slot tables: which bytes of each the program writes,
// which loads read bytes it never writes, and the checks that keep folding
// those loads correct against writers no version guard sees.
//
// A control plane writes such globals through mmap of the section's map
// (libbpf's skeletons do), which bypasses Morpheus: the program-level guard
// cannot be bumped before such a write. So a folded global is protected by
// its own check instead: every guarded root compares the folded bytes with
// the live ones before anything else (GlobalCheck, placed by
// ProgramGuardPass) and runs the generic code when they differ. A packet
// that starts after the write is visible runs the generic code; one that
// passed the check keeps the values it checked, as if the write came after
// it. The optimizer polls the same bytes each cycle and recompiles when
// they changed.
#pragma once

#include "core/Tables.h"

#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/Module.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace morpheus::core {

// Where a global lives in its section's table (the backend's map), from
// the object's own layout (BTF DATASEC in the eBPF backend).
struct GlobalSlice {
  std::string global;       // the global's name in the IR
  std::string sectionTable; // the table holding the section, one slot
  uint64_t offset = 0;
  uint64_t size = 0;
};

// The live bytes of each global, by name.
using GlobalValues = std::map<std::string, Bytes>;

// Bytes of a global a specialization folded: what the check at every
// guarded root compares, and what the optimizer polls.
struct GlobalCheck {
  std::string global;
  uint64_t offset = 0;
  Bytes bytes;
  bool operator==(const GlobalCheck &) const = default;
  auto operator<=>(const GlobalCheck &) const = default;
};

// A load of a global at a known offset (simple: not volatile, not atomic).
struct GlobalLoad {
  llvm::LoadInst *load = nullptr;
  uint64_t offset = 0;
};

// A copy (memcpy, memmove) out of a global at a known offset, of a known
// length, not volatile: `struct cfg c = cfg;` when the copy survives SROA
// (the local's address is taken, an index into it varies).
struct GlobalCopy {
  llvm::MemTransferInst *copy = nullptr;
  uint64_t offset = 0;
  uint64_t size = 0;
};

// The largest copy fold-read-only-globals folds: each 8 bytes more is one
// more check on every packet.
constexpr uint64_t MaxFoldedGlobalCopy = 64;

struct GlobalAccess {
  llvm::GlobalVariable *global = nullptr;
  std::string section;
  // Bytes the program writes at known offsets: [offset, offset + size).
  std::vector<std::pair<uint64_t, uint64_t>> writes;
  // Set when the program may write any byte (a store at an unknown offset,
  // the address escaping): why, with where.
  std::optional<std::string> writtenAnywhere;
  std::string firstWrite; // where, for reports
  std::vector<GlobalLoad> loads;
  std::vector<GlobalCopy> copies;

  bool writtenAt(uint64_t offset, uint64_t size) const;
};

// The section of a writable global of the program (".data", ".bss" or the
// custom `.data.*` it is placed in), or nullopt for anything else: constants
// (.rodata, frozen at load), maps, externs, LLVM's and Morpheus's own.
std::optional<std::string> writableDataSection(const llvm::GlobalVariable &global);

// The section of a read-only global of the program (".rodata" or the
// `.rodata.*` it is placed in: the loader may set it before load, then the
// kernel freezes it), or nullopt for anything else, by the same filter.
std::optional<std::string> readOnlyDataSection(const llvm::GlobalVariable &global);

// Every writable global of `module` with what the program does with it.
std::vector<GlobalAccess> analyzeGlobals(llvm::Module &module);

// Whether `values` still hold every byte `checks` folded (a global missing
// from `values` does not).
bool checksHold(const std::vector<GlobalCheck> &checks, const GlobalValues &values);

} // namespace morpheus::core
