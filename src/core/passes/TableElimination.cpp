//===- TableElimination.cpp - lookups in empty read-only tables -> null ---===//
//
// A lookup in a table that holds no entry returns null. When the data plane
// never writes the table (TableAccessAnalysis proved it read-only) and the
// snapshot read it whole and empty, every lookup returns null until the
// control plane inserts something; such an insert goes through Morpheus,
// which bumps the program-level guard first, so the specialized program is
// not executed again once the table stops being empty.
//
//   %v = call ptr inttoptr (i64 1 to ptr)(ptr @acl, ptr %key)
//   %miss = icmp eq ptr %v, null
// becomes
//   %miss = icmp eq ptr null, null        ; folded by the O2 pipeline,
//                                         ; taking the hit path with it
//===----------------------------------------------------------------------===//

#include "core/passes/TablePasses.h"

#include <llvm/ADT/Statistic.h>
#include <llvm/IR/Constants.h>

using namespace llvm;

#define DEBUG_TYPE "table-elimination"

ALWAYS_ENABLED_STATISTIC(LookupsEliminated, "lookups in empty read-only tables answered null");

namespace morpheus::core {

PreservedAnalyses TableEliminationPass::run(Module &module,
                                            ModuleAnalysisManager &mam) {
  bool changed = rewriteEligibleLookups(
      module, mam, context,
      [&](const AccessSite &site, const TableInfo &table,
          const TableContents &contents, LookupRewriter &) {
        if (!contents.complete || !contents.entries.empty() ||
            table.match != TableMatch::Exact)
          return false;
        LookupRewriter::replaceWith(
            *site.call,
            ConstantPointerNull::get(cast<PointerType>(site.call->getType())));
        ++LookupsEliminated;
        if (context.log) {
          context.log->record(site, Decider::TableEliminationPass, SiteOutcome::Applied,
                              "table is empty: lookup always misses");
          context.log->inlined[site.table];
        }
        return true;
      });
  return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
}

} // namespace morpheus::core
