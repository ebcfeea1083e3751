// What a version of a program compiled by clang at -O2 needs after the
// table passes and the guard: LLVM's scalar clean-up run once, not its
// whole O2 pipeline again (CleanupPipeline.cpp says which passes and why).
#pragma once

#include <llvm/IR/PassManager.h>

namespace llvm {
class PassBuilder;
}

namespace morpheus::core {

// The clean-up pipeline, with the target's passes that O2 runs at its early
// simplification (the builder's callbacks: BPF's adjustments that keep
// InstCombine from forms the kernel's verifier rejects).
llvm::ModulePassManager buildCleanupPipeline(llvm::PassBuilder &builder);

} // namespace morpheus::core
