#include "core/OpaqueValue.h"

#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/Instructions.h>

using namespace llvm;

namespace morpheus::core {

namespace {
constexpr const char *CopyConstraints = "=r,0";
}

Value *opaqueCopy(IRBuilderBase &builder, Value *value, const Twine &name) {
  Type *type = value->getType();
  InlineAsm *barrier = InlineAsm::get(FunctionType::get(type, {type}, false), "",
                                      CopyConstraints, /*hasSideEffects=*/false);
  CallInst *copy = builder.CreateCall(barrier, {value}, name);
  copy->setDoesNotAccessMemory();
  return copy;
}

bool isOpaqueCopy(const Value &value) {
  auto *call = dyn_cast<CallInst>(&value);
  if (!call || call->arg_size() != 1 || call->getType() != call->getArgOperand(0)->getType() ||
      !call->doesNotAccessMemory())
    return false;
  auto *barrier = dyn_cast<InlineAsm>(call->getCalledOperand());
  return barrier && barrier->getAsmString().empty() && !barrier->hasSideEffects() &&
         barrier->getConstraintString() == CopyConstraints;
}

bool isEmptyAsmCopy(const CallBase &call) {
  auto *barrier = dyn_cast<InlineAsm>(call.getCalledOperand());
  return barrier && barrier->getAsmString().empty() &&
         barrier->getConstraintString() == CopyConstraints && call.arg_size() == 1 &&
         call.getType() == call.getArgOperand(0)->getType();
}

Value *boundedCopy(IRBuilderBase &builder, Value *value, const ConstantRange &range,
                   bool isSigned, const Twine &name) {
  Value *copy = opaqueCopy(builder, value, name);
  Type *type = value->getType();
  if (!isSigned) {
    APInt low = range.getUnsignedMin(), high = range.getUnsignedMax();
    if (low.isZero() && (high + 1).isPowerOf2())
      return builder.CreateAnd(copy, ConstantInt::get(type, high));
    Value *bounded = builder.CreateBinaryIntrinsic(Intrinsic::umin, copy,
                                                   ConstantInt::get(type, high));
    if (!low.isZero())
      bounded = builder.CreateBinaryIntrinsic(Intrinsic::umax, bounded,
                                              ConstantInt::get(type, low));
    return bounded;
  }
  APInt low = range.getSignedMin(), high = range.getSignedMax();
  Value *bounded = copy;
  if (!high.isMaxSignedValue())
    bounded = builder.CreateBinaryIntrinsic(Intrinsic::smin, bounded, ConstantInt::get(type, high));
  if (!low.isMinSignedValue())
    bounded = builder.CreateBinaryIntrinsic(Intrinsic::smax, bounded, ConstantInt::get(type, low));
  return bounded;
}

} // namespace morpheus::core
