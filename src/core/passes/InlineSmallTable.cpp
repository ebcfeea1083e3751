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
// The key is read through an opaque copy of its pointer, so it stays in
// memory and padding bytes the program never wrote compare as they are
// there, as in the helper's memcmp. Every key keeps its own value address
// (TableRewriting.h), so pointer identity is the kernel's. An array whose
// snapshot does not list every index below max_entries keeps the real
// lookup on the miss path (an unlisted element exists: never null). Chains
// the verifier budget marks (Pipeline.cpp) yield an index into the table's
// value array instead of a constant per entry, so the verifier does not
// multiply its states by the chain's length. Such a chain folds no value:
// all it saves is the lookup itself, so it is built only where the cost
// model prices the chain under the map's own lookup. An eBPF array's
// lookup is a bounds check and a load the verifier inlines, which a chain
// of more than a few compares only slows down; a hash's direct index
// (hash-as-array, DirectIndex.h), which folds nothing either, is priced
// against it.
//
//   %v = call ptr inttoptr (i64 1 to ptr)(ptr @policy, ptr %key)
// becomes
//   %k = call ptr asm "", "=r,0"(ptr %key)
//   %k0 = load i64, ptr %k
//   %m0 = icmp eq i64 %k0, 0x0050_0600_0a00_0001
//   br i1 %m0, label %hit0, label %next0      ; ... one compare per entry
//   %v = phi ptr [ getelementptr (@__morpheus.policy.values, 0), %hit0 ], ...,
//                [ null, %nextN ]
//===----------------------------------------------------------------------===//

#include "core/passes/DirectIndex.h"
#include "core/passes/TablePasses.h"

#include <llvm/ADT/Statistic.h>
#include <llvm/ADT/Twine.h>

#include <cstring>

using namespace llvm;

#define DEBUG_TYPE "inline-small-table"

ALWAYS_ENABLED_STATISTIC(SitesInlined, "lookups replaced by a compare chain over every entry");
ALWAYS_ENABLED_STATISTIC(EntriesInlined, "entries compared in those chains");
ALWAYS_ENABLED_STATISTIC(IndexChains, "chains yielding an index, not constants (verifier budget)");
ALWAYS_ENABLED_STATISTIC(SitesDeclined, "lookups of tables read whole left alone");

namespace morpheus::core {

namespace {

// Whether `entries` list every index of an array with `maxEntries` slots.
bool coversEveryIndex(const std::vector<TableEntry> &entries, uint32_t maxEntries) {
  std::vector<bool> seen(maxEntries, false);
  uint32_t count = 0;
  for (const TableEntry &entry : entries) {
    uint32_t index = 0;
    if (entry.key.size() != sizeof(index))
      return false;
    std::memcpy(&index, entry.key.data(), sizeof(index));
    if (index < maxEntries && !seen[index]) {
      seen[index] = true;
      ++count;
    }
  }
  return count == maxEntries;
}

} // namespace

PreservedAnalyses InlineSmallTablePass::run(Module &module,
                                            ModuleAnalysisManager &mam) {
  context.declines = &SitesDeclined;
  bool changed = rewriteEligibleLookups(
      module, mam, context,
      [&](const AccessSite &site, const TableInfo &table, const TableContents &contents,
          LookupRewriter &rewriter) {
        if (table.match == TableMatch::LongestPrefix)
          return false; // lpm-as-code's
        if (!contents.complete)
          return declineSite(context, site, Decider::InlineSmallTablePass,
                             SiteOutcome::OverInlineLimit,
                             "table larger than the inline limit of " +
                                 std::to_string(context.inlineLimit));
        if (contents.entries.empty() && !contents.unlistedValue)
          return false; // table-elimination's case
        if (context.noCompareChains)
          return declineSite(context, site, Decider::InlineSmallTablePass,
                             SiteOutcome::CompareChainsOff, *context.noCompareChains);
        if (contents.entries.size() > context.inlineLimit)
          return declineSite(context, site, Decider::InlineSmallTablePass,
                             SiteOutcome::OverInlineLimit,
                             "table larger than the inline limit of " +
                                 std::to_string(context.inlineLimit) + " (" +
                                 std::to_string(contents.entries.size()) + " entries)");
        std::vector<const TableEntry *> entries;
        for (const TableEntry &entry : contents.entries) {
          if (!entry.value)
            return declineSite(context, site, Decider::InlineSmallTablePass,
                               SiteOutcome::PerCpuValuesDiffer,
                               "per-CPU values differ between CPUs");
          entries.push_back(&entry);
        }
        using OnMiss = LookupRewriter::OnMiss;
        OnMiss onMiss = OnMiss::Null;
        if (table.match == TableMatch::Index && contents.unlistedValue)
          onMiss = OnMiss::UnlistedBelowMaxEntries;
        else if (table.match == TableMatch::Index &&
                 !coversEveryIndex(contents.entries, table.maxEntries))
          onMiss = OnMiss::KeepLookup;
        ChainLowering lowering = context.indexLoweredSites.count(site.id)
                                     ? ChainLowering::Index
                                     : ChainLowering::Constants;
        if (lowering == ChainLowering::Index) {
          TableShape shape{.match = table.match, .entries = entries.size(),
                           .keySize = table.keySize};
          std::vector<Representation> eligible{Representation::CompareChain};
          // hash-as-array's direct index, which folds nothing either.
          if (context.enabledPasses.count(passOf(Representation::DirectIndex))) {
            auto index = directIndex(table, contents, module.getDataLayout().isLittleEndian());
            if (index) {
              shape.indexBytes = index->bytes();
              eligible.push_back(Representation::DirectIndex);
            } else {
              consumeError(index.takeError());
            }
          }
          RepresentationChoice choice = context.costModel.choose(shape, eligible);
          if (choice.chosen != Representation::CompareChain)
            return declineSite(context, site, Decider::InlineSmallTablePass,
                               SiteOutcome::NotCheaper,
                               "a chain yielding an index (verifier budget) folds no value "
                               "and " +
                                   (choice.chosen == Representation::OriginalMap
                                        ? std::string("is not faster than the lookup")
                                        : "the cost model prefers the " +
                                              std::string(representationName(choice.chosen))) +
                                   "; " + choice.describe());
        }
        rewriter.replaceWithDispatch(*site.call, *site.signature.keyArg,
                                     LookupRewriter::armsOf(entries), site.table, lowering,
                                     onMiss);
        ++SitesInlined;
        EntriesInlined += entries.size();
        if (lowering == ChainLowering::Index)
          ++IndexChains;
        if (context.log) {
          std::string detail = std::to_string(entries.size()) + " entries inlined as compares";
          if (lowering == ChainLowering::Index)
            detail += ", yielding an index into their values (verifier budget)";
          if (onMiss == OnMiss::KeepLookup)
            detail += "; indexes the snapshot does not list keep the lookup";
          if (onMiss == OnMiss::UnlistedBelowMaxEntries)
            detail += " (the listed slots of " + std::to_string(table.maxEntries) +
                      "; the others yield their common value)";
          context.log->record(site, Decider::InlineSmallTablePass, SiteOutcome::Applied, detail);
          context.log->inlined[site.table] = contents.entries;
        }
        return true;
      });
  return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
}

} // namespace morpheus::core
