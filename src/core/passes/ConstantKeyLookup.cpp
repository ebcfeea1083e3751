//===- ConstantKeyLookup.cpp - lookups with a constant key -> the value ---===//
//
// When every byte of a lookup's key is a compile-time constant (proved by
// TableAccessAnalysis with MemorySSA) the lookup always returns the same
// entry, so it is replaced by a pointer to a constant copy of that entry's
// value, or by null when the snapshot shows the key absent. This is what
// turns configuration arrays (`config[0]`) into constants that the O2
// pipeline folds into every branch that tests them, however large the table.
//
// Correctness: the table is read-only from the data plane, so only the
// control plane can change the entry, and every change through Morpheus
// bumps the program-level guard before it is applied. Per-CPU tables are
// rewritten only when all CPUs hold the same value for the key.
//
//   store i32 0, ptr %zero
//   %cfg = call ptr inttoptr (i64 1 to ptr)(ptr @config, ptr %zero)
// becomes
//   %cfg = @__morpheus.config.0   ; private constant [8 x i8] c"..."
//===----------------------------------------------------------------------===//

#include "core/passes/TablePasses.h"

#include <llvm/IR/Constants.h>

using namespace llvm;

namespace morpheus::core {

PreservedAnalyses ConstantKeyLookupPass::run(Module &module,
                                             ModuleAnalysisManager &mam) {
  bool changed = rewriteEligibleLookups(
      module, mam, context,
      [&](const AccessSite &site, const TableInfo &, const TableContents &contents,
          LookupRewriter &rewriter) {
        if (!site.key.constantKey)
          return false;
        std::optional<const TableEntry *> entry =
            contents.known(*site.key.constantKey);
        if (!entry)
          return false; // the snapshot did not read this key
        Value *result;
        std::string detail;
        if (!*entry) {
          result = ConstantPointerNull::get(cast<PointerType>(site.call->getType()));
          detail = "constant key absent: lookup always misses";
          if (context.log)
            context.log->inlined[site.table].push_back(
                {*site.key.constantKey, std::nullopt});
        } else if (!(*entry)->value) {
          if (context.log)
            context.log->record(site, "constant-key-lookup", false,
                                "per-CPU values differ for the constant key");
          return false;
        } else {
          result = rewriter.valueConstant(site.table, *(*entry)->value);
          detail = "constant key: value inlined";
          if (context.log)
            context.log->inlined[site.table].push_back(**entry);
        }
        LookupRewriter::replaceWith(*site.call, result);
        if (context.log)
          context.log->record(site, "constant-key-lookup", true, detail);
        return true;
      });
  return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
}

} // namespace morpheus::core
