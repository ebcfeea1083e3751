//===- FoldReadOnlyFields.cpp - fold the bytes the data plane never writes -===//
//
// Real programs keep configuration and counters in one value (a rule with
// its hit counter) or in one table (key 0 the configuration, key 1 an
// atomic counter). Such a table is written by the data plane, so the other
// passes leave it alone; but TableAccessAnalysis records which bytes of
// which keys each write can touch. At a lookup with a constant key whose
// entry the snapshot holds, every load through the result (at a constant
// offset, through GEPs and casts) of bytes no data-plane write touches
// becomes the constant the snapshot holds there.
//
// The lookup itself stays: the program keeps a pointer to the real entry,
// so every write (the counter) still goes to the live map, and the null
// test still asks the kernel. Only the reads of bytes that cannot change
// from the data plane are folded.
//
// Correctness: those bytes change only through the control plane, and every
// change through Morpheus bumps the program-level guard first (the
// specialized code then runs the generic copy). A write the analysis cannot
// confine to known bytes (unknown offset: the whole value of its key;
// a key that is not constant: that range in every key; updates, deletes and
// other helpers without a constant key, escapes of the table: the whole
// table) leaves nothing to fold. A key the snapshot shows absent is left
// alone (the lookup answers; its loads are unreachable under the guard).
// A table the data plane never writes whose entries the kernel removes
// unguarded (a devmap: TableInfo::entriesRemovedUnguarded) is folded too:
// no other pass may answer its lookups, an entry the lookup still finds
// holds the snapshot's bytes (removal is the only change the guard does
// not see), and one it no longer finds is null, which the program tests
// before it reads.
// Per-CPU tables: only bytes every CPU holds alike are folded (a per-CPU
// counter beside configuration makes the whole values differ, but the
// configuration bytes, written by the control plane to every CPU, agree;
// MapIO reads which bytes agree).
//
//   struct rule { __u32 action; __u32 port; __u64 hits; };
//   struct rule *r = bpf_map_lookup_elem(&rules, &zero);
//   if (r) { __sync_fetch_and_add(&r->hits, 1); return r->action; }
// becomes
//   %r = call ptr inttoptr (i64 1 to ptr)(ptr @rules, ptr %zero) ; kept
//   atomicrmw add ptr %hits, i64 1                              ; kept
//   ret i32 2                                                    ; r->action
//===----------------------------------------------------------------------===//

#include "core/passes/TablePasses.h"

#include <llvm/ADT/Statistic.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/Instructions.h>

#include <cstring>

using namespace llvm;

#define DEBUG_TYPE "fold-read-only-fields"

ALWAYS_ENABLED_STATISTIC(SitesFolded,
                         "lookups of written tables whose read-only fields were folded");
ALWAYS_ENABLED_STATISTIC(LoadsFolded, "loads of read-only bytes replaced by constants");
ALWAYS_ENABLED_STATISTIC(SitesDeclined, "lookups of written tables with no field folded");

namespace morpheus::core {

PreservedAnalyses FoldReadOnlyFieldsPass::run(Module &module, ModuleAnalysisManager &mam) {
  const TableAccessInfo &info = mam.getResult<TableAccessAnalysis>(module);
  const DataLayout &dl = module.getDataLayout();
  bool changed = false;
  for (const AccessSite &site : info.sites) {
    if (whyNoFieldFolding(site, info, *context.catalog) || context.untouchable(site.function))
      continue;
    auto contents = context.snapshot->find(site.table);
    if (contents == context.snapshot->end())
      continue;
    auto record = [&](SiteOutcome outcome, std::string detail) {
      ++(outcome == SiteOutcome::Applied ? SitesFolded : SitesDeclined);
      if (context.log)
        context.log->record(site, Decider::FoldReadOnlyFieldsPass, outcome, std::move(detail));
    };
    const Bytes &key = *site.key.constantKey;
    std::optional<const TableEntry *> entry = contents->second.known(key);
    if (!entry)
      continue; // the snapshot did not read this key
    if (!*entry) {
      record(SiteOutcome::NothingToFold,
             "constant key absent from the snapshot: the lookup answers");
      continue;
    }
    unsigned folded = 0, written = 0, differing = 0;
    std::string firstWrite;
    for (auto [load, offset] : loadsAtKnownOffsets(*site.call, dl)) {
      uint64_t size = dl.getTypeStoreSize(load->getType());
      if (!info.isReadOnlyAt(site.table, key, offset, size)) {
        if (!written++)
          firstWrite = info.writesAt(site.table, key, offset, size).front()->where;
        continue;
      }
      // Per-CPU: only bytes every CPU holds alike.
      std::optional<Bytes> bytes = (*entry)->agreedAt(offset, size);
      if (!bytes) {
        ++differing;
        continue;
      }
      Constant *constant = constantAt(load->getType(), *bytes, 0, dl);
      if (!constant)
        continue;
      load->replaceAllUsesWith(constant);
      load->eraseFromParent();
      ++folded;
    }
    if (!folded) {
      if (written)
        record(SiteOutcome::NothingToFold,
               "every load reads bytes the data plane writes (" + firstWrite + ")");
      else if (differing)
        record(SiteOutcome::PerCpuValuesDiffer, "per-CPU values differ in every byte loaded");
      else
        record(SiteOutcome::NothingToFold, "no load at a known offset to fold");
      continue;
    }
    changed = true;
    LoadsFolded += folded;
    const TableInfo &table = context.catalog->at(site.table);
    std::string detail = std::to_string(folded) + " load" + (folded == 1 ? "" : "s") +
                         " of read-only bytes folded; the lookup stays " +
                         (table.entriesRemovedUnguarded
                              ? "because " + *table.entriesRemovedUnguarded +
                                    ": it says whether the entry is still there"
                              : std::string("for the writes"));
    if (written)
      detail += " (" + std::to_string(written) + " load" + (written == 1 ? "" : "s") +
                " of written bytes kept)";
    record(SiteOutcome::Applied, detail);
    if (context.log)
      context.log->inlined[site.table].push_back(**entry);
  }
  return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
}

} // namespace morpheus::core
