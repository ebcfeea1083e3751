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

} // namespace morpheus::core
