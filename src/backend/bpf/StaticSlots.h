// Program-array slots an object fills by itself: a BTF-defined PROG_ARRAY
// may list programs in its initializer,
//
//   struct { __uint(type, BPF_MAP_TYPE_PROG_ARRAY); ...
//            __array(values, int (void *)); } stages SEC(".maps") =
//       { .values = { [0] = (void *)&stage2 } };
//
// and libbpf writes those slots at every load of the ELF, also into a map
// the load re-uses. Only the live original's load may do that (its slots
// then point at its own programs); every other object Morpheus loads is
// built from IR without these initializers, and Morpheus fills the program
// arrays of copies itself.
#pragma once

#include "backend/bpf/BpfObject.h"

#include <llvm/IR/Module.h>

namespace morpheus::bpf {

// The statically initialized slots of `module`'s program arrays.
ProgramSlots staticProgramSlots(const llvm::Module &module);

// Empties them (the maps keep their layout); true if there were any.
bool removeStaticProgramSlots(llvm::Module &module);

} // namespace morpheus::bpf
