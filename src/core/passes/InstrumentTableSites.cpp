//===- InstrumentTableSites.cpp - Record sampled lookup keys --------------===//
//
// Before a lookup whose table is not turned whole into code, and which a
// fast path could serve (whyNotInlinable: read-only, modelled semantics, or
// written by the data plane with its writes counted by guard-table-writes
// and none through this lookup's result), the
// program asks the runtime for a profile slot for this site
// (ProfileOptions::slotFunction, inlined from the guard runtime) and, when
// it gets one, copies the lookup key into it. User space reads the slots
// each cycle and counts the keys (core/TrafficProfile): the heavy hitters
// heavy-hitter-fast-path puts in front of the lookup.
//
// Why it cannot change what the program does: the inserted code only reads
// the key (the bytes the helper is about to read anyway, so the verifier
// has already required them to be readable) and writes Morpheus's own
// profile map, which the program never reads and no other map aliases. The
// lookup itself is untouched. Nothing here depends on table contents, so
// no guard is needed for it: sites in functions without a guard are
// instrumented too; generic copies are not (they run only while a guard
// fails, and the same site is already counted in the specialized copy).
//
// Why it is cheap: no helper call on the per-packet path. The runtime's
// slot function is a PERCPU_ARRAY lookup the verifier inlines and a
// countdown (no random number), and a packet that is not sampled takes one
// not-taken branch here.
//
// Not instrumented: lookups with a constant key (nothing to learn), tables
// the snapshot holds whole (inlined whole: no fast path needed), tables
// whose lookup costs less than any fast path must save (arrays: the
// verifier inlines their lookup; FastPathCosts, the same numbers
// core/TrafficProfile sizes fast paths with, at their defaults), tables
// the operator excluded (--no-profile), keys longer than a slot, and site
// ids beyond the profile map. Sampling a site no fast path can pay for
// would only cost (the firewall's array sites: 2-6 ns a packet).
//
//   %v = call ptr inttoptr (i64 1 to ptr)(ptr @routes, ptr %key)
// becomes
//   %slot = call ptr @morpheus_profile_slot(i32 SITE)
//   %sampled = icmp ne ptr %slot, null
//   br i1 %sampled, label %record, label %lookup
// record:
//   call void @llvm.memcpy(ptr %slot, ptr %key, i64 KEY_SIZE, i1 false)
//   br label %lookup
// lookup:
//   %v = call ptr inttoptr (i64 1 to ptr)(ptr @routes, ptr %key)
//===----------------------------------------------------------------------===//

#include "core/passes/TablePasses.h"
#include "core/TrafficProfile.h"

#include <llvm/ADT/Statistic.h>
#include <llvm/Transforms/Utils/Local.h>
#include <llvm/IR/IRBuilder.h>

using namespace llvm;

#define DEBUG_TYPE "instrument-table-sites"

ALWAYS_ENABLED_STATISTIC(SitesSampled, "lookup sites whose keys are sampled into a profile slot");
ALWAYS_ENABLED_STATISTIC(SitesDeclined, "lookup sites that could have a fast path, not sampled");

namespace morpheus::core {

PreservedAnalyses InstrumentTableSitesPass::run(Module &module, ModuleAnalysisManager &mam) {
  if (!context.profile)
    return PreservedAnalyses::all();
  context.declines = &SitesDeclined;
  const ProfileOptions &profile = *context.profile;
  const TableAccessInfo &info = mam.getResult<TableAccessAnalysis>(module);
  std::vector<AccessSite> sites = info.sites; // instrumenting splits blocks
  bool changed = false;
  std::set<std::string> writeGuarded;
  if (context.writeGuards)
    writeGuarded = writeGuardedTables(info, *context.catalog, *context.writeGuards);
  for (const AccessSite &site : sites) {
    if (site.signature.kind != AccessKind::Lookup ||
        context.genericFunctions.count(site.function) || site.key.constantKey ||
        LookupRewriter::keptOnMissPath(*site.call) ||
        whyNotInlinable(site, info, *context.catalog, writeGuarded.count(site.table) > 0))
      continue;
    if (auto contents = context.snapshot->find(site.table);
        !writeGuarded.count(site.table) && contents != context.snapshot->end() &&
        contents->second.complete &&
        contents->second.entries.size() <= context.inlineLimit)
      continue; // small enough to be turned whole into code: nothing to learn
    if (FastPathCosts costs;
        costs.lookupNs(context.catalog->at(site.table).match) < costs.minimumSavingNs) {
      declineSite(context, site, Decider::InstrumentTableSitesPass, SiteOutcome::NotProfiled,
                  "its lookup is cheaper than any fast path must save (an array lookup the "
                  "verifier inlines): nothing to learn");
      continue;
    }
    if (profile.excludedTables.count(site.table)) {
      declineSite(context, site, Decider::InstrumentTableSitesPass, SiteOutcome::NotProfiled,
                  "not profiled (--no-profile)");
      continue;
    }
    uint32_t keySize = context.catalog->at(site.table).keySize;
    if (keySize == 0 || keySize > profile.keyBytes) {
      declineSite(context, site, Decider::InstrumentTableSitesPass, SiteOutcome::NoProfileSlot,
                  "key of " + std::to_string(keySize) + " bytes: profile slots hold " +
                  std::to_string(profile.keyBytes));
      continue;
    }
    if (site.id >= profile.sites) {
      declineSite(context, site, Decider::InstrumentTableSitesPass, SiteOutcome::NoProfileSlot,
                  "site id beyond the profile map's " + std::to_string(profile.sites) + " sites");
      continue;
    }

    CallBase &lookup = *site.call;
    Value *key = lookup.getArgOperand(*site.signature.keyArg);
    emitProfileSample(lookup, profile, site.id, site.table,
                      [&](IRBuilderBase &builder, Value *slot) {
                        Align keyAlign = getKnownAlignment(key, module.getDataLayout());
                        builder.CreateMemCpy(slot, Align(8), key, keyAlign, keySize);
                      });
    ++SitesSampled;
    if (context.log) {
      context.log->record(site, Decider::InstrumentTableSitesPass, SiteOutcome::Applied,
                          "lookup keys sampled into profile slot " + std::to_string(site.id));
      context.log->profiled[site.id] = {site.table, keySize, std::nullopt};
    }
    changed = true;
  }
  return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
}

} // namespace morpheus::core
