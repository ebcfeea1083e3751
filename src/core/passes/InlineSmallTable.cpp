//===- InlineSmallTable.cpp - JIT a small read-only table into code -------===//
//
// A lookup in a read-only table with at most `inlineLimit` entries becomes a
// chain of full-key compares, each hit yielding a pointer to a constant copy
// of that entry's value and the miss yielding null: exactly what the helper
// returns for every possible key, since the chain covers every entry and
// compares every key byte (no hashing, so no collisions). Values as
// constants let the O2 pipeline propagate them into the code that follows
// and delete what the current configuration makes unreachable.
//
// Correctness rests on the table not changing while this code runs: the data
// plane never writes it (TableAccessAnalysis), and control-plane writes go
// through Morpheus, which bumps the program-level guard first. Per-CPU
// tables are inlined only when every CPU holds the same value for every key.
//
//   %v = call ptr inttoptr (i64 1 to ptr)(ptr @policy, ptr %key)
// becomes
//   %k0 = freeze (load i64, ptr %key)
//   %m0 = icmp eq i64 %k0, 0x0050_0600_0a00_0001
//   br i1 %m0, label %hit0, label %next0      ; ... one compare per entry
//   %v = phi ptr [ @__morpheus.policy.0, %hit0 ], ..., [ null, %nextN ]
//===----------------------------------------------------------------------===//

#include "core/passes/TablePasses.h"

#include <llvm/ADT/Twine.h>

using namespace llvm;

namespace morpheus::core {

PreservedAnalyses InlineSmallTablePass::run(Module &module,
                                            ModuleAnalysisManager &mam) {
  bool changed = rewriteEligibleLookups(
      module, mam, context,
      [&](const AccessSite &site, const TableInfo &, const TableContents &contents,
          LookupRewriter &rewriter) {
        auto decline = [&](std::string why) {
          if (context.log)
            context.log->record(site, "inline-small-table", false, std::move(why));
          return false;
        };
        if (!contents.complete)
          return decline("table larger than the inline limit of " +
                         std::to_string(context.inlineLimit));
        if (contents.entries.empty())
          return false; // table-elimination's case
        if (contents.entries.size() > context.inlineLimit)
          return decline(std::to_string(contents.entries.size()) +
                         " entries exceed the inline limit of " +
                         std::to_string(context.inlineLimit));
        std::vector<const TableEntry *> entries;
        for (const TableEntry &entry : contents.entries) {
          if (!entry.value)
            return decline("per-CPU values differ between CPUs");
          entries.push_back(&entry);
        }
        rewriter.replaceWithDispatch(*site.call, *site.signature.keyArg, entries,
                                     site.table);
        if (context.log) {
          context.log->record(site, "inline-small-table", true,
                              std::to_string(entries.size()) +
                                  " entries inlined as compares");
          context.log->inlined[site.table] = contents.entries;
        }
        return true;
      });
  return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
}

} // namespace morpheus::core
