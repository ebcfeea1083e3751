// The target machine's arithmetic, made explicit in the IR before anything
// is folded (DefinedArithmetic.cpp argues why).
#pragma once

#include "core/MachineArithmetic.h"

#include <llvm/IR/PassManager.h>

namespace morpheus::core {

// Rewrites every division, remainder and shift whose divisor or count is
// not known to be safe into an explicit form with the machine's result, and
// drops the no-wrap and exact flags C's rules put on arithmetic, so that
// folding a value that was a run-time input into a constant never lets
// LLVM exploit undefined behaviour the running program does not have.
class DefinedArithmeticPass : public llvm::PassInfoMixin<DefinedArithmeticPass> {
public:
  explicit DefinedArithmeticPass(MachineArithmetic machine) : machine(machine) {}
  llvm::PreservedAnalyses run(llvm::Module &module, llvm::ModuleAnalysisManager &);

private:
  MachineArithmetic machine;
};

} // namespace morpheus::core
