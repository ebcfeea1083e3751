#include "backend/bpf/VerifierBounds.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/Instructions.h>
#include <llvm/Support/MathExtras.h>

using namespace llvm;

namespace morpheus::bpf {

bool restoreVerifierBounds(Module &module) {
  std::vector<BinaryOperator *> remainders;
  for (Function &function : module)
    for (Instruction &inst : instructions(function))
      if (auto *rem = dyn_cast<BinaryOperator>(&inst);
          rem && rem->getOpcode() == Instruction::URem &&
          isa<ConstantInt>(rem->getOperand(1)) && !rem->getType()->isVectorTy())
        remainders.push_back(rem);
  for (BinaryOperator *rem : remainders) {
    uint64_t divisor = cast<ConstantInt>(rem->getOperand(1))->getZExtValue();
    if (divisor == 0 || isPowerOf2_64(divisor))
      continue; // x % 2^k is already an AND, which the verifier tracks
    IRBuilder<> builder(rem->getNextNode());
    Type *type = rem->getType();
    // "=r,0": the value goes through a register the compiler knows nothing
    // about, so the mask below survives every later simplification.
    InlineAsm *barrier = InlineAsm::get(FunctionType::get(type, {type}, false), "",
                                        "=r,0", /*hasSideEffects=*/false);
    Value *opaque = builder.CreateCall(barrier, {rem});
    uint64_t mask = NextPowerOf2(divisor - 1) - 1;
    Value *bounded = builder.CreateAnd(opaque, ConstantInt::get(type, mask));
    rem->replaceUsesWithIf(bounded, [&](Use &use) { return use.getUser() != opaque; });
  }
  return !remainders.empty();
}

} // namespace morpheus::bpf
