// The access signatures of the IR the core tests write by hand: a call to
// the constant address 1 (`call ptr inttoptr (i64 1 to ptr)(ptr @table,
// ptr %key)`) is a lookup, tables are globals in ".maps", entries are
// functions in a section of their own. It is the smallest backend the core
// needs, so its tests link the core alone; the eBPF backend's own table
// (backend/bpf/BpfSignatures) is tested with the backend.
#pragma once

#include "core/AccessSignatures.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/Instructions.h>

namespace morpheus::core::testing {

class TestSignatures : public AccessSignatureTable {
public:
  std::optional<AccessSignature> match(const llvm::CallBase &call) const override {
    if (!isLookup(call))
      return std::nullopt;
    return AccessSignature{"lookup", AccessKind::Lookup, 0, 1, std::nullopt};
  }

  bool onlyReadsArgument(const llvm::CallBase &call, unsigned argNo) const override {
    return isLookup(call) && argNo == 1;
  }

  bool isTable(const llvm::GlobalVariable &global) const override {
    return global.hasSection() && global.getSection() == ".maps";
  }

  bool isProgramEntry(const llvm::Function &function) const override {
    return !function.isDeclaration() && !function.hasLocalLinkage() &&
           function.hasSection() && !function.getSection().starts_with(".text");
  }

  bool requiresWritableArguments(const llvm::Function &callee) const override {
    return !callee.hasLocalLinkage() && !isProgramEntry(callee);
  }

private:
  static bool isLookup(const llvm::CallBase &call) {
    auto *callee = llvm::dyn_cast<llvm::ConstantExpr>(call.getCalledOperand());
    if (!callee || callee->getOpcode() != llvm::Instruction::IntToPtr)
      return false;
    auto *address = llvm::dyn_cast<llvm::ConstantInt>(callee->getOperand(0));
    return address && address->getZExtValue() == 1;
  }
};

} // namespace morpheus::core::testing
