#include "backend/bpf/VerifierBounds.h"

#include "core/OpaqueValue.h"

#include <llvm/Analysis/LazyValueInfo.h>
#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/ConstantRange.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/Passes/PassBuilder.h>

using namespace llvm;

namespace morpheus::bpf {

namespace {

// Whether LLVM's range of `division` holds on the eBPF machine: its
// divisor is never zero (nor, signed, -1), known from the divisor alone.
bool rangeHoldsOnTheMachine(const Instruction &division, const DataLayout &layout) {
  const Value *divisor = division.getOperand(1);
  if (division.getOpcode() == Instruction::UDiv || division.getOpcode() == Instruction::URem)
    return isKnownNonZero(divisor, SimplifyQuery(layout));
  auto *constant = dyn_cast<ConstantInt>(divisor);
  return constant && !constant->isZero() && !constant->isMinusOne();
}

// Instructions whose result the verifier cannot bound (it marks the
// result unknown), and whether their range is best read as signed.
std::optional<bool> untrackedBySigned(const Instruction &inst, const DataLayout &layout,
                                      bool assumeNonZeroDivisors) {
  if (!inst.getType()->isIntegerTy() || inst.getType()->getIntegerBitWidth() > 64)
    return std::nullopt;
  switch (inst.getOpcode()) {
  case Instruction::UDiv:
  case Instruction::URem:
  case Instruction::SDiv:
  case Instruction::SRem:
    if (!assumeNonZeroDivisors && !rangeHoldsOnTheMachine(inst, layout))
      return std::nullopt;
    return inst.getOpcode() == Instruction::SDiv || inst.getOpcode() == Instruction::SRem;
  default:
    break;
  }
  if (auto *intrinsic = dyn_cast<IntrinsicInst>(&inst);
      intrinsic && intrinsic->getIntrinsicID() == Intrinsic::bswap)
    return false;
  return std::nullopt;
}

struct Bound {
  Instruction *value;
  bool isSigned;
  ConstantRange range;
};

Value *clamp(IRBuilderBase &builder, Value *value, const Bound &bound) {
  if (!bound.isSigned) {
    APInt low = bound.range.getUnsignedMin(), high = bound.range.getUnsignedMax();
    if (low.isZero() && (high + 1).isPowerOf2())
      return builder.CreateAnd(value, ConstantInt::get(value->getType(), high));
    Value *bounded = builder.CreateBinaryIntrinsic(
        Intrinsic::umin, value, ConstantInt::get(value->getType(), high));
    if (!low.isZero())
      bounded = builder.CreateBinaryIntrinsic(Intrinsic::umax, bounded,
                                              ConstantInt::get(value->getType(), low));
    return bounded;
  }
  APInt low = bound.range.getSignedMin(), high = bound.range.getSignedMax();
  Value *bounded = value;
  if (!high.isMaxSignedValue())
    bounded = builder.CreateBinaryIntrinsic(Intrinsic::smin, bounded,
                                            ConstantInt::get(value->getType(), high));
  if (!low.isMinSignedValue())
    bounded = builder.CreateBinaryIntrinsic(Intrinsic::smax, bounded,
                                            ConstantInt::get(value->getType(), low));
  return bounded;
}

} // namespace

bool restoreVerifierBounds(Module &module, bool assumeNonZeroDivisors) {
  LoopAnalysisManager lam;
  FunctionAnalysisManager fam;
  CGSCCAnalysisManager cgam;
  ModuleAnalysisManager mam;
  PassBuilder builder;
  builder.registerModuleAnalyses(mam);
  builder.registerCGSCCAnalyses(cgam);
  builder.registerFunctionAnalyses(fam);
  builder.registerLoopAnalyses(lam);
  builder.crossRegisterProxies(lam, fam, cgam, mam);
  const DataLayout &dl = module.getDataLayout();

  // Ranges first, while the analyses see the code LLVM optimized.
  std::vector<Bound> bounds;
  for (Function &function : module) {
    if (function.isDeclaration())
      continue;
    LazyValueInfo *lvi = nullptr;
    for (Instruction &inst : instructions(function)) {
      std::optional<bool> isSigned = untrackedBySigned(inst, dl, assumeNonZeroDivisors);
      if (!isSigned)
        continue;
      if (!lvi)
        lvi = &fam.getResult<LazyValueAnalysis>(function);
      ConstantRange range =
          ConstantRange::fromKnownBits(computeKnownBits(&inst, dl), *isSigned)
              .intersectWith(computeConstantRange(&inst, *isSigned))
              .intersectWith(lvi->getConstantRange(&inst, inst.getNextNode(),
                                                   /*UndefAllowed=*/false));
      bool full = *isSigned ? range.getSignedMin().isMinSignedValue() &&
                                  range.getSignedMax().isMaxSignedValue()
                            : range.getUnsignedMin().isZero() &&
                                  range.getUnsignedMax().isAllOnes();
      if (!full && !range.isEmptySet())
        bounds.push_back({&inst, *isSigned, range});
    }
  }
  for (const Bound &bound : bounds) {
    IRBuilder<> builder(bound.value->getNextNode());
    builder.SetCurrentDebugLocation(bound.value->getDebugLoc());
    Value *opaque = core::opaqueCopy(builder, bound.value);
    Value *bounded = clamp(builder, opaque, bound);
    bound.value->replaceUsesWithIf(bounded, [&](Use &use) { return use.getUser() != opaque; });
  }
  return !bounds.empty();
}

} // namespace morpheus::bpf
