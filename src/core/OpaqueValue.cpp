#include "core/OpaqueValue.h"

#include <llvm/IR/InlineAsm.h>

using namespace llvm;

namespace morpheus::core {

Value *opaqueCopy(IRBuilderBase &builder, Value *value, const Twine &name) {
  Type *type = value->getType();
  InlineAsm *barrier = InlineAsm::get(FunctionType::get(type, {type}, false), "", "=r,0",
                                      /*hasSideEffects=*/false);
  CallInst *copy = builder.CreateCall(barrier, {value}, name);
  copy->setDoesNotAccessMemory();
  return copy;
}

} // namespace morpheus::core
