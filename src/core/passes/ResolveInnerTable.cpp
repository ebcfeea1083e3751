//===- ResolveInnerTable.cpp - inner-map operands -> the table stored -----===//
//
// A lookup in a table of tables (ARRAY_OF_MAPS, HASH_OF_MAPS) returns a
// table, and the program then accesses that table. When the snapshot shows
// which of the program's own tables the outer lookup returns (the table
// stored at its constant key, or the one table every slot holds), the inner
// access's table operand becomes that table's global, so the passes after
// this one treat it like any access to a named table: inlined when the
// table is read-only and small, folded field by field, or left alone with
// their own reason.
//
// Correctness: the outer table is part of the snapshot (its slots as the
// program's table names, core/Tables.h storedTables), so this is a
// specialization like any other, protected by the program guard: a
// control-plane update of the outer table through Morpheus (a new inner
// map in a slot: MapUpdater, client::Transaction) bumps the guard before it
// is applied, and the next cycle reads the new contents. The outer lookup
// itself stays: the program's own null test still sees an emptied slot.
// Programs cannot write tables of tables (the verifier refuses updates of
// them), and the analysis declines any it finds written. Only the program's
// own tables are named: a map its loader created and stored is updated
// through the loader's fd, never through Morpheus, so code built from its
// contents would not be guarded (declined, with that reason). Sites in
// generic copies and unguarded functions are left alone.
//
//   %m = call ptr @lookup(ptr @configs, ptr %zero)   ; configs[0] = @primary
//   %v = call ptr @lookup(ptr %m, ptr %key)
// becomes
//   %v = call ptr @lookup(ptr @primary, ptr %key)
//===----------------------------------------------------------------------===//

#include "core/passes/TablePasses.h"

#include <llvm/ADT/Statistic.h>
#include <llvm/IR/Module.h>

using namespace llvm;

#define DEBUG_TYPE "resolve-inner-table"

ALWAYS_ENABLED_STATISTIC(SitesResolved, "inner-map sites given the table the outer slot holds");
ALWAYS_ENABLED_STATISTIC(SitesDeclined,
                         "inner-map sites resolved to a table that is no global of the module");

namespace morpheus::core {

PreservedAnalyses ResolveInnerTablePass::run(Module &module, ModuleAnalysisManager &mam) {
  const TableAccessInfo &info = mam.getResult<TableAccessAnalysis>(module);
  bool changed = false;
  for (const AccessSite &site : info.sites) {
    if (site.outerTables.empty() || !site.table.empty() || context.untouchable(site.function))
      continue;
    InnerTableResolution resolved = resolveInnerTable(site, info, *context.snapshot);
    if (!resolved.table)
      continue; // logged up front with the reason (Pipeline.cpp)
    GlobalVariable *table = module.getNamedGlobal(*resolved.table);
    AccessSite named = site;
    named.table = *resolved.table;
    if (!table) {
      ++SitesDeclined;
      if (context.log)
        context.log->record(named, Decider::ResolveInnerTablePass,
                            SiteOutcome::InnerTableUnresolved,
                            resolved.why + ", not a global of this module");
      continue;
    }
    site.call->setArgOperand(site.signature.tableArg, table);
    changed = true;
    ++SitesResolved;
    if (context.log)
      context.log->record(named, Decider::ResolveInnerTablePass, SiteOutcome::Applied,
                          resolved.why);
  }
  return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
}

} // namespace morpheus::core
