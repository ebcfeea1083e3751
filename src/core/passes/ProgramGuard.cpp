//===- ProgramGuard.cpp - one version check at every program entry --------===//
//
// Every specialization of read-only tables assumes their contents as of the
// snapshot. Instead of a guard per table, one program-level guard protects
// them all: the control plane bumps a version word before it changes any
// table (through Morpheus), and the specialized program checks at entry that
// the word still holds the version it was compiled against. On mismatch the
// backend's guard function transfers the packet to the original program, so
// from the moment of the bump every packet sees the generic code, which reads
// the live tables. Versions only grow, so stale code can never become valid
// again.
//
//   define i32 @prog(ptr %ctx) {
//   entry:
//     %g = call i64 @guard(ptr %ctx, i64 VERSION, i32 SLOT)
//     %ok = icmp slt i64 %g, 0
//     br i1 %ok, label %specialized, label %fallback
//   fallback:
//     %verdict = trunc i64 %g to i32
//     ret i32 %verdict
//   specialized:                              ; the original entry block
//===----------------------------------------------------------------------===//

#include "core/passes/ProgramGuard.h"

#include <llvm/IR/DebugInfoMetadata.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

using namespace llvm;

namespace morpheus::core {

PreservedAnalyses ProgramGuardPass::run(Module &module, ModuleAnalysisManager &) {
  Function *guard = module.getFunction(options.guardFunction);
  if (!guard)
    return PreservedAnalyses::all();
  bool changed = false;
  for (size_t slot = 0; slot < options.entries.size(); ++slot) {
    Function *entry = module.getFunction(options.entries[slot]);
    if (!entry || entry->isDeclaration() || entry->arg_empty() ||
        !entry->getReturnType()->isIntegerTy())
      continue;
    LLVMContext &context = module.getContext();
    BasicBlock *body = &entry->getEntryBlock();
    // Allocas stay in the entry block so they remain static stack slots.
    BasicBlock *check = BasicBlock::Create(context, "morpheus.guard", entry, body);
    BasicBlock *fallback =
        BasicBlock::Create(context, "morpheus.fallback", entry, body);
    while (!body->empty() && isa<AllocaInst>(body->front()))
      body->front().moveBefore(*check, check->end());
    IRBuilder<> builder(check);
    // The guard is inlined; calls to inlinable functions need a location
    // when the caller has debug info.
    if (DISubprogram *subprogram = entry->getSubprogram())
      builder.SetCurrentDebugLocation(
          DILocation::get(context, subprogram->getLine(), 0, subprogram));
    Value *verdict = builder.CreateCall(
        guard, {entry->getArg(0), builder.getInt64(options.version),
                builder.getInt32(slot)});
    builder.CreateCondBr(builder.CreateICmpSLT(verdict, builder.getInt64(0)),
                         body, fallback);
    builder.SetInsertPoint(fallback);
    builder.CreateRet(builder.CreateTrunc(verdict, entry->getReturnType()));
    changed = true;
  }
  return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
}

} // namespace morpheus::core
