// What the pipeline will do with each access site, and what it reads for
// that (see SitePlan.h).
#include "core/SitePlan.h"

#include "core/passes/RegionAsTableInputs.h"
#include "core/passes/TableRewriting.h"

#include <algorithm>

namespace morpheus::core {

namespace {

// The plan of a lookup whyNotInlinable accepts: which pass replaces it.
SitePlan planReplaceable(const AccessSite &site, const TableInfo &table, uint32_t inlineLimit,
                         const ArrayContentReads *arrays) {
  using Action = SitePlan::Action;
  SitePlan plan;
  if (site.key.constantKey) {
    plan.action = Action::InlinedConstantKey;
    plan.pass = Decider::ConstantKeyLookupPass;
    return plan;
  }
  plan.pass = Decider::InlineSmallTablePass;
  if (table.match != TableMatch::Index) {
    plan.action = Action::InlinedWhileSmall;
    return plan;
  }
  if (table.maxEntries <= inlineLimit) {
    plan.action = Action::InlinedSmallArray;
    return plan;
  }
  uint64_t bytes = arrays ? arrays->bytes(table) : 0;
  if (!arrays || bytes <= arrays->limit) {
    plan.action = Action::InlinedWhileFewDiffer;
    return plan;
  }
  plan.action = Action::KeptArrayTooLargeToRead;
  plan.pass.reset();
  plan.arrayBytes = bytes;
  plan.arrayReadLimit = arrays->limit;
  return plan;
}

// How the data plane writes the table of a lookup kept for that reason.
SitePlan::Writes writesOf(const AccessSite &site, const TableAccessInfo &info,
                          const TableCatalog &catalog) {
  using Writes = SitePlan::Writes;
  if (info.tables.at(site.table).writtenWholesale)
    return Writes::Wholesale;
  if (!info.writtenOnlyInPart(site.table, catalog.at(site.table).valueSize))
    return Writes::EveryByte;
  return site.key.constantKey ? Writes::FieldsNotFoldable : Writes::InPart;
}

} // namespace

SitePlan planSite(const AccessSite &site, const TableAccessInfo &info,
                  const TableCatalog &catalog, uint32_t inlineLimit,
                  const ArrayContentReads *arrays) {
  using Action = SitePlan::Action;
  SitePlan plan;
  if (site.signature.kind != AccessKind::Lookup) {
    plan.action = Action::NotALookup;
    return plan;
  }
  if (site.table.empty() && !site.mergedTables.empty()) {
    plan.action = Action::KeptMergedOperand;
    return plan;
  }
  if (site.table.empty() && !site.outerTables.empty()) {
    if (site.innerCandidates.empty()) {
      plan.action = Action::KeptNoInnerCandidate;
    } else {
      plan.action = Action::ResolvedInnerTable;
      plan.pass = Decider::ResolveInnerTablePass;
    }
    return plan;
  }
  bool keySetFilter = !whyNoKeySetFilter(site, info, catalog);
  std::optional<LookupDecline> decline = whyNotInlinable(site, info, catalog);
  if (!decline) {
    plan = planReplaceable(site, catalog.at(site.table), inlineLimit, arrays);
    plan.keySetFilter = keySetFilter;
    return plan;
  }
  plan.decline = std::move(decline);
  plan.keySetFilter = keySetFilter;
  std::optional<std::string> noFieldFolding = whyNoFieldFolding(site, info, catalog);
  if (!noFieldFolding) {
    plan.action = Action::FoldedFields;
    plan.pass = Decider::FoldReadOnlyFieldsPass;
    return plan;
  }
  if (keySetFilter && !site.key.constantKey) {
    plan.action = Action::FilteredKeys;
    plan.pass = Decider::KeySetFilterPass;
    return plan;
  }
  plan.action = Action::Kept;
  if (plan.decline->reason == LookupDecline::Reason::WrittenByTheDataPlane) {
    plan.writes = writesOf(site, info, catalog);
    if (plan.writes == SitePlan::Writes::FieldsNotFoldable)
      plan.noFieldFolding = std::move(*noFieldFolding);
  }
  return plan;
}

std::map<unsigned, SitePlan> planSites(const TableAccessInfo &info, const TableCatalog &catalog,
                                       uint32_t inlineLimit, const ArrayContentReads *arrays) {
  std::map<unsigned, SitePlan> plans;
  for (const AccessSite &site : info.sites)
    plans.emplace(site.id, planSite(site, info, catalog, inlineLimit, arrays));
  return plans;
}

ReadPlan planReads(const TableAccessInfo &info, const TableCatalog &catalog,
                   uint32_t inlineLimit, bool derivedTries) {
  using Action = SitePlan::Action;
  ReadPlan plan;
  auto request = [&](const AccessSite &site) {
    SitePlan planned = planSite(site, info, catalog, inlineLimit, nullptr);
    switch (planned.action) {
    case Action::InlinedConstantKey:
    case Action::InlinedSmallArray:
    case Action::InlinedWhileFewDiffer:
    case Action::KeptArrayTooLargeToRead:
    case Action::InlinedWhileSmall: {
      TableReadRequest &request = plan[site.table];
      // Hash tables are read whole further, for constant-fields and
      // branch-injection, and tries for the derived tables: lpm-as-array's
      // (IPv4 addresses, a leading word before them too) and lpm-as-hash's
      // (a hash per prefix length, any key size). Arrays larger than the
      // limit are read by content instead (MapIO: every slot that differs
      // from the array's most common value). Without
      // derived tables a trie larger than the limit is probed key by key:
      // heavy-hitter-fast-path needs the trie's answer for each hot key,
      // which a whole read (prefixes, not answers) does not give.
      const TableInfo &table = catalog.at(site.table);
      bool derivableTrie = derivedTries && table.match == TableMatch::LongestPrefix;
      request.wholeTableLimit = derivableTrie ? std::max(inlineLimit, DerivedTrieReadLimit)
                                : table.match == TableMatch::Exact
                                    ? std::max(inlineLimit, WholeTableReadLimit)
                                    : inlineLimit;
      // A probed trie key reads the kernel's own answer to that lookup
      // (the longest prefix containing it), which is what constant-key-lookup
      // inlines; a trie read whole is answered from its prefixes instead.
      if (site.key.constantKey)
        request.keys.push_back(*site.key.constantKey);
      // An array read by content serves inline-small-table (at most the
      // inline limit of slots differ from the common value; heavy-hitter-
      // fast-path and the verifier budget take it whole by the same bound)
      // and region-as-table (every slot, in at most MaxClasses classes of
      // equal bytes, within MaxSlots slots); constant-key-lookup takes the
      // probed keys. A read neither could take stops early: lb's 2,097,184
      // ring slots, 655,370 of them set, cost seconds read whole.
      if (table.match == TableMatch::Index) {
        request.contentDiffering = inlineLimit;
        request.contentValues = table.maxEntries <= region_as_table::MaxSlots
                                    ? uint32_t(region_as_table::MaxClasses)
                                    : 0;
      }
      break;
    }
    case Action::FoldedFields:
      plan[site.table].keys.push_back(*site.key.constantKey);
      break;
    case Action::NotALookup:
    case Action::KeptMergedOperand:
    case Action::KeptNoInnerCandidate:
    case Action::ResolvedInnerTable:
    case Action::FilteredKeys:
    case Action::Kept:
      break;
    }
    // key-set-filter needs every key of the table (its values are the
    // data plane's), within the inline limit.
    if (planned.keySetFilter) {
      TableReadRequest &request = plan[site.table];
      request.wholeTableLimit = std::max(request.wholeTableLimit, inlineLimit);
    }
  };
  for (const AccessSite &site : info.sites) {
    if (!site.table.empty() || (site.outerTables.empty() && site.mergedTables.empty())) {
      request(site);
      continue;
    }
    // An inner-map site: the outer slot it reads (resolve-inner-table), and
    // what the passes would need of each table it may turn out to be.
    const AccessSite *outer = site.outerLookup ? info.siteFor(site.outerLookup) : nullptr;
    for (const std::string &outerTable : site.outerTables) {
      // Which tables it holds is another loader's business, never read.
      if (auto outer = catalog.find(outerTable);
          outer != catalog.end() && outer->second.keptGeneric)
        continue;
      TableReadRequest &slots = plan[outerTable];
      slots.wholeTableLimit = inlineLimit;
      if (outer && outer->key.constantKey)
        slots.keys.push_back(*outer->key.constantKey);
    }
    for (const std::string &candidate : site.possibleTables()) {
      AccessSite named = site;
      named.table = candidate;
      request(named);
    }
  }
  return plan;
}

} // namespace morpheus::core
