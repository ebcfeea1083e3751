//===- ConstantKeyLookup.cpp - lookups with a constant key -> the value ---===//
//
// When every byte of a lookup's key is a compile-time constant (proved by
// TableAccessAnalysis with MemorySSA) the lookup always returns the same
// entry, so it is replaced by a pointer to a constant copy of that entry's
// value, or by null when the key is known absent. This is what turns
// configuration arrays (`config[0]`) into constants that the O2 pipeline
// folds into every branch that tests them, however large the table.
//
// Correctness: the table is read-only from the data plane, so only the
// control plane can change the entry, and every change through Morpheus
// bumps the program-level guard before it is applied. Per-CPU tables are
// rewritten only when all CPUs hold the same value for the key. What
// "absent" means follows the table: a hash key the snapshot shows missing
// is null; an array index is null only at or beyond max_entries, since every
// element below exists (zeroed until written); an LPM trie answers with the
// longest stored prefix containing the key (PrefixIntervals.h says exactly
// what the kernel does), computed from the trie read whole, or the kernel's
// own answer to the probed key. An array index the snapshot does not list
// (an offline snapshot may list a few) keeps its lookup.
//
//   store i32 0, ptr %zero
//   %cfg = call ptr inttoptr (i64 1 to ptr)(ptr @config, ptr %zero)
// becomes
//   %cfg = getelementptr (i8, @__morpheus.config.values, i64 0)
//===----------------------------------------------------------------------===//

#include "core/passes/TablePasses.h"

#include <llvm/ADT/Statistic.h>
#include <llvm/IR/Constants.h>

#include <cstring>

using namespace llvm;

#define DEBUG_TYPE "constant-key-lookup"

ALWAYS_ENABLED_STATISTIC(ValuesInlined, "lookups with a constant key replaced by their value");
ALWAYS_ENABLED_STATISTIC(MissesInlined,
                         "lookups with a constant key the table does not hold replaced by null");
ALWAYS_ENABLED_STATISTIC(SitesDeclined, "lookups with a constant key left alone");

namespace morpheus::core {

PreservedAnalyses ConstantKeyLookupPass::run(Module &module,
                                             ModuleAnalysisManager &mam) {
  context.declines = &SitesDeclined;
  bool littleEndian = module.getDataLayout().isLittleEndian();
  bool changed = rewriteEligibleLookups(
      module, mam, context,
      [&](const AccessSite &site, const TableInfo &table, const TableContents &contents,
          LookupRewriter &rewriter) {
        if (!site.key.constantKey)
          return false;
        const Bytes &key = *site.key.constantKey;
        auto miss = [&](std::string detail) {
          LookupRewriter::replaceWith(
              *site.call, ConstantPointerNull::get(cast<PointerType>(site.call->getType())));
          ++MissesInlined;
          if (context.log) {
            context.log->inlined[site.table].push_back({key, std::nullopt});
            context.log->record(site, Decider::ConstantKeyLookupPass, SiteOutcome::Applied,
                                std::move(detail));
          }
          return true;
        };
        std::optional<uint32_t> arrayIndex;
        if (table.match == TableMatch::Index && key.size() == sizeof(uint32_t)) {
          arrayIndex.emplace();
          std::memcpy(&*arrayIndex, key.data(), sizeof(uint32_t));
          if (*arrayIndex >= table.maxEntries)
            return miss("constant index beyond the array: lookup always misses");
        }
        std::optional<const TableEntry *> entry =
            snapshotAnswer(contents, table, key, littleEndian);
        if (!entry)
          return false; // the snapshot did not read this key
        if (!*entry && arrayIndex && contents.unlistedValue) {
          LookupRewriter::replaceWith(*site.call, rewriter.unlistedValuePointer(site.table));
          ++ValuesInlined;
          if (context.log)
            context.log->record(site, Decider::ConstantKeyLookupPass, SiteOutcome::Applied,
                                "constant index of an array read by content: its unlisted value");
          return true;
        }
        if (!*entry) {
          if (arrayIndex)
            return declineSite(context, site, Decider::ConstantKeyLookupPass,
                               SiteOutcome::KeyNotInSnapshot,
                               "index " + std::to_string(*arrayIndex) +
                               " not in the snapshot: the element exists, its value is "
                               "unknown; the lookup stays");
          return miss("constant key absent: lookup always misses");
        }
        if (!(*entry)->value)
          return declineSite(context, site, Decider::ConstantKeyLookupPass,
                             SiteOutcome::PerCpuValuesDiffer,
                             "per-CPU values differ for the constant key");
        if (context.faults.invalidConstantKeyLookup) // TEST-ONLY: a terminator mid-block
          new UnreachableInst(site.call->getContext(), site.call);
        LookupRewriter::replaceWith(*site.call, rewriter.valuePointer(site.table, **entry));
        ++ValuesInlined;
        if (context.log) {
          context.log->inlined[site.table].push_back(**entry);
          context.log->record(site, Decider::ConstantKeyLookupPass, SiteOutcome::Applied,
                              "constant key: value inlined");
        }
        return true;
      });
  return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
}

} // namespace morpheus::core
