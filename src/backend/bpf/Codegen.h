// IR -> BPF ELF object in memory, with the LLVM BPF backend in-process.
#pragma once

#include "support/Error.h"

#include <llvm/IR/Module.h>
#include <llvm/Target/TargetMachine.h>

#include <memory>
#include <vector>

namespace morpheus::bpf {

// A target machine for `module`'s triple and the CPU/features its functions
// were compiled for (so -mcpu=v3 given to clang carries through).
Expected<std::unique_ptr<llvm::TargetMachine>>
createTargetMachine(const llvm::Module &module);

// Emits `module` as a BPF ELF object (with BTF from its debug info).
Expected<std::vector<char>> emitObject(llvm::Module &module,
                                       llvm::TargetMachine &machine);

} // namespace morpheus::bpf
