// LLVM IR a project compiled for its host (Katran: `clang -O2 -emit-llvm
// -c` without --target=bpf, then `llc -march=bpf`), retargeted to BPF as
// llc does when that changes nothing the program means.
//
// Why it is correct: llc -march=bpf keeps the IR as it is and only swaps
// the target: the triple's architecture, the data layout (BPF's), the
// functions' CPU and features (the host's are no BPF CPU: the generic one
// serves). The IR's meaning depends on the target in three places only:
// - the data layout: type sizes, alignments and field offsets decide every
//   load, store, GEP and alloca. Every type the module lays out (every
//   struct, every global's, alloca's, GEP's, load's and store's type) is
//   compared under both layouts; one that differs in size, alignment or a
//   field's offset (x86_fp80, a pointer in address space 270) refuses the
//   retarget, naming it. Layouts of different endianness are refused too;
// - inline assembly and target intrinsics (llvm.x86.*): host instructions,
//   which BPF cannot run; refused naming the function;
// - calling conventions other than C's and LLVM's own fastcc and coldcc
//   (those of a machine's ABI): refused.
// What the host's headers and ABI put into the IR (char's signedness,
// arguments split into registers) is the IR's meaning, which the BPF
// backend lowers as llc does: the program Morpheus runs is the one the
// project's own build loads.
#pragma once

#include "support/Error.h"

#include <llvm/IR/Module.h>

namespace morpheus::bpf {

// True when `module` was for another target and is now BPF's (bpfel);
// false when it already targeted BPF. An error, naming `path` and what is
// host-specific, when retargeting would change what the program does (the
// module is then left half-changed: the caller drops it).
Expected<bool> retargetHostModule(llvm::Module &module, const std::string &path);

} // namespace morpheus::bpf
