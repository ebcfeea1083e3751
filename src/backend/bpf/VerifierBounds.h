// Keeps, in specialized code, the bounds the kernel verifier needs.
#pragma once

#include <llvm/IR/Module.h>

namespace morpheus::bpf {

// Specialization turns divisors into constants; LLVM then knows that
// `x % C` is below C and deletes the program's own `& MASK` on the result.
// The verifier tracks no range through BPF_MOD, so the result becomes
// unbounded and an array index built from it is rejected. This puts an
// explicit, semantically neutral `& (2^k - 1)` (2^k >= C) behind every
// `urem` by a constant, behind an empty inline-asm barrier so neither LLVM
// nor instruction selection can prove it redundant. Run after the O2
// pipeline, right before code generation. Returns whether it changed
// anything.
bool restoreVerifierBounds(llvm::Module &module);

} // namespace morpheus::bpf
