// The target machine's arithmetic, made explicit in the IR before anything
// is folded (DefinedArithmetic.cpp argues why).
#pragma once

#include <llvm/IR/PassManager.h>

namespace morpheus::core {

// What the machine a program runs on computes where LLVM IR leaves the
// result undefined or poison.
struct MachineArithmetic {
  // Integers narrower than this are computed in a register of this width
  // (zero- or sign-extended, as LLVM's type legalization promotes them);
  // wider ones, up to 64 bits, in 64. eBPF with ALU32 (-mcpu=v3 and later)
  // and x86-64: 32; eBPF without ALU32: 64. Shift counts are masked to the
  // register's width: a 32-bit shift by 40 shifts by 8 with ALU32, and
  // shifts every bit out without.
  unsigned narrowRegisterBits = 64;
  // Division and remainder always have a result (eBPF: x / 0 = 0,
  // x % 0 = x, MIN / -1 = MIN, MIN % -1 = 0), rather than trapping (x86,
  // where the original program would crash and there is nothing to keep).
  bool definedDivision = true;

  bool operator==(const MachineArithmetic &) const = default;
};

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
