//===- HeavyHitterFastPath.cpp - Compare the hot keys before the lookup ---===//
//
// A lookup in a read-only table too large to inline whole gets, in front of
// it, a chain of full-key compares over the keys the traffic profile found
// hot for this site (TablePassContext::hotKeys, hottest first, as many as
// pay for their compares: core/TrafficProfile). A hit yields the address of
// a constant copy of what the table answers for that key, so O2 folds the
// value into the code that follows, as for inline-small-table; a miss falls
// through to the original lookup, untouched (marked kept, so no other pass
// rewrites it).
//
// Why it is correct: for every key the chain compares, the kernel's answer
// is the snapshot's answer for exactly that key — for a hash table the
// entry with that key, for an array the slot at that index, for an LPM trie
// the trie's own answer to a lookup of that whole key, prefix length
// included (user space asked the kernel exactly that lookup: the snapshot's
// probed keys, never its prefixes) — and every other key reaches the real
// lookup. The compare covers every key byte, read through an opaque copy of
// the key pointer (LookupRewriter), so no two keys are confused. The table
// is read-only to the data plane (whyNotInlinable), lookups have no side
// effects (LRU excluded), value pointers are never compared with anything
// but null, and control-plane writes bump the program guard, which sends
// packets to the generic code before the table changes. Which keys are hot
// affects only speed: a wrong heavy-hitter set is slower, never wrong.
// Keys the snapshot shows absent are left to the lookup, and so are keys
// whose per-CPU values differ between CPUs. Fast paths are optional: the
// verifier budget (Pipeline.cpp) drops those that would not fit beside the
// compare chains already planned.
//===----------------------------------------------------------------------===//

#include "core/passes/TablePasses.h"

using namespace llvm;

namespace morpheus::core {

PreservedAnalyses HeavyHitterFastPathPass::run(Module &module, ModuleAnalysisManager &mam) {
  if (context.hotKeys.empty())
    return PreservedAnalyses::all();
  bool changed = rewriteEligibleLookups(
      module, mam, context,
      [&](const AccessSite &site, const TableInfo &table, const TableContents &contents,
          LookupRewriter &rewriter) {
        auto hot = context.hotKeys.find(site.id);
        if (hot == context.hotKeys.end() || hot->second.empty())
          return false;
        // A table small enough is turned whole into code, or was declined
        // by the passes that do it. A trie read whole holds prefixes, not
        // the answers to lookups of the hot keys.
        if (contents.complete && (contents.entries.size() <= context.inlineLimit ||
                                  table.match == TableMatch::LongestPrefix))
          return declineSite(context, site, "heavy-hitter-fast-path",
                             "table read whole: not a fast-path candidate");
        if (site.key.constantKey)
          return declineSite(context, site, "heavy-hitter-fast-path",
                             "constant key: constant-key-lookup's");
        if (context.noCompareChains)
          return declineSite(context, site, "heavy-hitter-fast-path", *context.noCompareChains);
        std::vector<const TableEntry *> entries;
        for (const Bytes &key : hot->second) {
          if (key.size() != table.keySize)
            continue;
          std::optional<const TableEntry *> entry = contents.known(key);
          if (!entry || !*entry || !(*entry)->value)
            continue; // not read this cycle, absent, or per-CPU values that differ
          entries.push_back(*entry);
        }
        if (entries.empty())
          return declineSite(context, site, "heavy-hitter-fast-path",
                             "no hot key present in the table");
        rewriter.replaceWithDispatch(*site.call, *site.signature.keyArg, entries, site.table,
                                     ChainLowering::Constants,
                                     LookupRewriter::OnMiss::KeepLookup);
        if (context.log) {
          context.log->record(site, "heavy-hitter-fast-path", true,
                              std::to_string(entries.size()) +
                                  " hot keys compared before the lookup");
          std::vector<TableEntry> &inlined = context.log->inlined[site.table];
          for (const TableEntry *entry : entries)
            inlined.push_back(*entry);
        }
        return true;
      });
  return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
}

} // namespace morpheus::core
