#include "cli/Reports.h"

#include "backend/bpf/MapIO.h"
#include "core/Globals.h"
#include "core/ValueFields.h"

#include <linux/bpf.h>
#include <llvm/ADT/SmallPtrSet.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>

#include <llvm/Support/FormatVariadic.h>
#include <llvm/Transforms/Utils/Cloning.h>

#include <map>
#include <set>
#include <tuple>

namespace morpheus::cli {

namespace {

const char *kindName(core::AccessKind kind) {
  switch (kind) {
  case core::AccessKind::Lookup:
    return "lookup";
  case core::AccessKind::Update:
    return "update";
  case core::AccessKind::Delete:
    return "delete";
  case core::AccessKind::OtherRead:
    return "read";
  case core::AccessKind::OtherWrite:
    return "write";
  }
  return "?";
}

} // namespace

nlohmann::json analysisToJson(const bpf::ProgramSpec &spec) {
  const core::TableAccessInfo &info = spec.analysis();
  nlohmann::json maps = nlohmann::json::array();
  for (const auto &[name, table] : spec.catalog()) {
    auto usage = info.tables.find(name);
    bool written = usage != info.tables.end() && usage->second.written;
    nlohmann::json map = {{"name", name},
                          {"type", table.typeName},
                          {"key_size", table.keySize},
                          {"value_size", table.valueSize},
                          {"max_entries", table.maxEntries},
                          {"access", written ? "rw" : "ro"},
                          {"kept_generic", table.keptGeneric},
                          {"sites", usage == info.tables.end() ? 0u : usage->second.siteCount}};
    if (written)
      map["write_reasons"] = usage->second.writeReasons;
    maps.push_back(map);
  }
  nlohmann::json sites = nlohmann::json::array();
  for (const core::AccessSite &site : info.sites) {
    nlohmann::json key = {{"sources", site.key.describe()}};
    if (site.key.constantKey)
      key["constant"] = toHex(*site.key.constantKey);
    auto table = spec.catalog().find(site.table);
    if (table != spec.catalog().end())
      key["size"] = table->second.keySize;
    sites.push_back({{"id", site.id},
                     {"map", site.table},
                     {"kind", kindName(site.signature.kind)},
                     {"helper", site.signature.name},
                     {"key", key},
                     {"function", site.function},
                     {"location", site.location}});
  }
  return {{"program", spec.path()},
          {"programs", spec.programs()},
          {"maps", maps},
          {"sites", sites}};
}

std::string analysisToText(const bpf::ProgramSpec &spec) {
  nlohmann::json json = analysisToJson(spec);
  std::string out = spec.path() + ": programs";
  for (const auto &program : json["programs"])
    out += " " + program.get<std::string>();
  out += "\nmaps:\n";
  for (const auto &map : json["maps"]) {
    out += llvm::formatv("  {0,-16} {1,-14} key {2,3}  value {3,4}  max {4,8}  {5}\n",
                         map["name"].get<std::string>(),
                         map["type"].get<std::string>(), map["key_size"].get<int>(),
                         map["value_size"].get<int>(),
                         map["max_entries"].get<uint64_t>(),
                         map["access"].get<std::string>())
               .str();
    if (map.contains("write_reasons"))
      for (const auto &reason : map["write_reasons"])
        out += "      written: " + reason.get<std::string>() + "\n";
  }
  out += "sites:\n";
  for (const auto &site : json["sites"]) {
    std::string key = site["key"]["sources"].get<std::string>();
    if (site["key"].contains("constant"))
      key += " [" + site["key"]["constant"].get<std::string>() + "]";
    out += llvm::formatv("  #{0,-3} {1,-16} {2,-7} key {3}  ({4} {5})\n",
                         site["id"].get<int>(), site["map"].get<std::string>(),
                         site["kind"].get<std::string>(), key,
                         site["function"].get<std::string>(),
                         site["location"].get<std::string>())
               .str();
  }
  return out;
}

namespace {

// The fields of `fields` no write touches for `key`, as text.
std::string readOnlyFields(const core::TableAccessInfo &info, const std::string &table,
                           const std::optional<core::Bytes> &key,
                           const std::vector<core::ValueField> &fields, uint32_t valueSize) {
  std::string names;
  for (const core::ValueField &field : fields)
    if (info.isReadOnlyAt(table, key, field.offset, field.size))
      names += (names.empty() ? "`" : ", `") + field.name + "`";
  if (!names.empty() || !fields.empty())
    return names.empty() ? "no field" : names;
  uint64_t free = 0;
  for (uint64_t byte = 0; byte < valueSize; ++byte)
    free += info.isReadOnlyAt(table, key, byte, 1);
  return std::to_string(free) + " of " + std::to_string(valueSize) + " bytes";
}

// What a compare chain's plan depends on that only the cycle knows: the
// verifier budget of the program as built for the snapshot may ask for
// chains that yield an index (Pipeline.cpp), which fold nothing, and
// inline-small-table keeps the lookup where the cost model finds such a
// chain no faster (Katran's `reals`).
constexpr const char *IndexChainCaveat =
    "; unless the verifier budget calls for chains that yield an index: then kept where "
    "the cost model finds one no faster than the lookup";

// The text of `plan`, the pipeline's plan of `site`: what Morpheus would do
// there, or why not and what would change it.
std::string planText(const bpf::ProgramSpec &spec, const core::AccessSite &site,
                     const core::SitePlan &plan, const std::vector<core::ValueField> &fields,
                     uint32_t inlineLimit) {
  using Action = core::SitePlan::Action;
  using Writes = core::SitePlan::Writes;
  const core::TableAccessInfo &info = spec.analysis();
  switch (plan.action) {
  case Action::NotALookup:
    return "not a lookup: stays as it is";
  case Action::KeptMergedOperand:
    return "kept: the map operand is " + core::operandDescription(site) +
           ", merged by a phi or select, so no one map's contents answer it; each "
           "of them is still analysed as this site reads and writes it";
  case Action::KeptNoInnerCandidate:
    return "kept: no map of the program fits the inner template of " +
           llvm::join(site.outerTables, ", ") +
           ", so only maps its loader creates are stored there, and their updates "
           "bypass the guard";
  case Action::ResolvedInnerTable:
    return "each cycle, the table the outer slot holds is named from "
           "the outer map's contents (resolve-inner-table; one table for a key that is not "
           "constant) and the access is then treated as one to it; kept when the slot holds a "
           "map the program does not declare (its loader's: updated behind the guard)";
  case Action::InlinedConstantKey:
    return "the entry's value will be inlined as constants (constant-key-lookup)";
  case Action::InlinedSmallArray:
    return "inlined as compares over its " +
           std::to_string(spec.catalog().at(site.table).maxEntries) +
           " slots (inline-small-table)" + IndexChainCaveat;
  case Action::InlinedWhileFewDiffer:
    return "inlined as compares over the slots that differ from its most common value "
           "while at most " +
           std::to_string(inlineLimit) + " of its " +
           std::to_string(spec.catalog().at(site.table).maxEntries) +
           " do, the others yielding that value (inline-small-table); kept "
           "otherwise" +
           IndexChainCaveat;
  case Action::KeptArrayTooLargeToRead:
    return "kept: " + std::to_string(spec.catalog().at(site.table).maxEntries) + " slots (" +
           std::to_string(plan.arrayBytes) +
           " bytes) are more than the inline limit and too large to read by content "
           "each cycle (limit " + std::to_string(plan.arrayReadLimit) +
           " bytes); a constant key would be inlined";
  case Action::InlinedWhileSmall:
    return "inlined as compares while the map holds at most " + std::to_string(inlineLimit) +
           " entries (inline-small-table), removed while it is empty (table-elimination); "
           "kept otherwise" +
           IndexChainCaveat;
  case Action::FoldedFields:
    if (const std::optional<std::string> &removed =
            spec.catalog().at(site.table).entriesRemovedUnguarded)
      return "loads of the value will be folded (fold-read-only-fields); the lookup stays "
             "because " +
             *removed + ", which no guard sees: the kernel says whether the entry is there";
    return "loads of " +
           readOnlyFields(info, site.table, site.key.constantKey, fields,
                          spec.catalog().at(site.table).valueSize) +
           " (never written for this key) will be folded "
           "(fold-read-only-fields); the lookup stays, so writes reach the entry";
  case Action::FilteredKeys:
    return "the lookup stays for the keys the map holds; while it holds few enough for "
           "their compares to cost at most half the lookup (at most " +
           std::to_string(inlineLimit) +
           "), any other key is answered null without it (key-set-filter: " +
           (spec.catalog().at(site.table).entriesRemovedUnguarded
                ? *spec.catalog().at(site.table).entriesRemovedUnguarded +
                      ", unguarded, but no key is added without the guard)"
                : std::string("the data plane writes values only, never adds or removes "
                              "keys)"));
  case Action::Kept:
    break;
  }
  // The operator's choice, not the program's: said as it is.
  std::string text = plan.decline->reason == core::LookupDecline::Reason::KeptGeneric
                         ? plan.decline->detail +
                               ": the lookup stays, so its other writer's updates hold "
                               "from the next packet on"
                         : "kept: " + plan.decline->detail;
  switch (plan.writes) {
  case Writes::NotTheReason:
    break;
  case Writes::Wholesale:
    text += " (" + info.tables.at(site.table).wholesaleReason +
            "). Would change it: writes confined to some fields (stores through a lookup's "
            "result at fixed offsets) or to constant keys leave the rest foldable";
    break;
  case Writes::EveryByte:
    text += ": every byte of its values is written";
    break;
  case Writes::FieldsNotFoldable:
    text += ": " + plan.noFieldFolding;
    break;
  case Writes::InPart:
    text += " in part, and this key is not constant: the read-only " +
            readOnlyFields(info, site.table, std::nullopt, fields,
                           spec.catalog().at(site.table).valueSize) +
            " could be folded at lookups with a constant key";
    break;
  }
  if (plan.keySetFilter)
    text += "; while the map does not hold the key, it is answered null without the lookup "
            "(key-set-filter)";
  // Stale key bytes rule out every rewrite, fast paths over written maps
  // included: said even when another reason comes first.
  if (site.key.unwritten &&
      plan.decline->reason != core::LookupDecline::Reason::UnwrittenKeyBytes)
    text += "; and " + site.key.unwritten->describe();
  return text;
}

// Whether a decision of `decider` rewrites what the site computes:
// instrumenting its keys or counting its writes does not.
bool specializes(core::Decider decider) {
  return decider != core::Decider::Analysis && decider != core::Decider::InstrumentTableSitesPass &&
         decider != core::Decider::GuardTableWritesPass;
}

// The plan's action as the JSON names it: the kinds of kept and inlined
// sites are told apart by the text.
const char *actionName(core::SitePlan::Action action) {
  using Action = core::SitePlan::Action;
  switch (action) {
  case Action::InlinedConstantKey:
  case Action::InlinedSmallArray:
    return "inlined";
  case Action::InlinedWhileFewDiffer:
  case Action::InlinedWhileSmall:
    return "inlined_while_small";
  case Action::FoldedFields:
    return "folded";
  case Action::ResolvedInnerTable:
    return "resolved";
  case Action::FilteredKeys:
    return "filtered";
  case Action::KeptMergedOperand:
  case Action::KeptNoInnerCandidate:
  case Action::KeptArrayTooLargeToRead:
  case Action::Kept:
    return "kept";
  case Action::NotALookup:
    return "not_a_lookup";
  }
  return "?";
}

// The verdict on `site` from what the cycle recorded of it (the plan says
// why where nothing was tried), and its words.
void decide(ExplainedSite &site, const core::SpecializationLog &log,
            const std::set<std::string> &unchangedFunctions) {
  using Verdict = ExplainedSite::Verdict;
  using Action = core::SitePlan::Action;
  std::string planned = std::move(site.text);
  for (const core::SiteDecision &decision : log.decisions)
    if (decision.site == site.id)
      site.decisions.push_back(decision);
  std::string applied;
  for (size_t i = 0; i < site.decisions.size(); ++i) {
    const core::SiteDecision &decision = site.decisions[i];
    if (!decision.applied || !specializes(decision.decider))
      continue;
    if (!site.decided)
      site.decided = i;
    applied += (applied.empty() ? "" : "; and by ") + decision.pass + ": " + decision.detail;
  }
  if (site.decided) {
    if (unchangedFunctions.count(site.function)) {
      site.verdict = Verdict::Unchanged;
      site.text = "not specialized: rewritten by " + applied + ", but " + site.function +
                  " emits the original's code";
    } else {
      site.verdict = Verdict::Specialized;
      site.text = "specialized by " + applied;
    }
    return;
  }
  // The declines of the passes that could take the site. Where no pass
  // may take it the plan's reason says more than the analysis's words
  // (and a table not read changes nothing there).
  bool plannedAPass = site.plan.pass.has_value();
  std::string declined;
  for (size_t i = 0; i < site.decisions.size(); ++i) {
    const core::SiteDecision &decision = site.decisions[i];
    if (decision.applied ||
        (decision.decider == core::Decider::Analysis &&
         (!plannedAPass || decision.outcome == core::SiteOutcome::NotReplaceable)))
      continue;
    if (!site.decided)
      site.decided = i;
    declined += (declined.empty() ? "" : "; ") + decision.pass + " (" +
                core::siteOutcomeName(decision.outcome) + "): " + decision.detail;
  }
  if (!declined.empty()) {
    site.verdict = Verdict::Declined;
    site.text = "declined: " + declined;
    if (plannedAPass)
      site.text += " (planned from the program alone: " + planned + ")";
  } else if (plannedAPass) {
    site.verdict = Verdict::Declined;
    site.text = "not specialized: " + std::string(core::deciderName(*site.plan.pass)) +
                " recorded nothing for these tables (planned from the program alone: " + planned +
                ")";
  } else {
    site.verdict = site.plan.action == Action::NotALookup ? Verdict::NotALookup : Verdict::Kept;
    site.text = std::move(planned);
  }
}

ExplainedSite explained(const bpf::ProgramSpec &spec, const core::AccessSite &site,
                        const core::SitePlan &plan, const std::vector<core::ValueField> &fields,
                        uint32_t inlineLimit, const BuiltVersion &built) {
  ExplainedSite out;
  out.id = site.id;
  out.helper = site.signature.name;
  out.function = site.function;
  out.location = site.location;
  out.constantKey = site.key.constantKey;
  if (site.signature.keyArg)
    out.keySources = site.key.describe();
  if (!site.key.constantKey && site.key.constantsOnly())
    out.constantUnproven = site.key.constantUnproven;
  out.outerTables = site.outerTables;
  out.innerCandidates = site.innerCandidates;
  out.mergedTables = site.mergedTables;
  out.possibleTables = site.possibleTables();
  out.plan = plan;
  out.text = planText(spec, site, plan, fields, inlineLimit);
  decide(out, built.log, built.unchangedFunctions);
  return out;
}

} // namespace

Explanation explainProgram(const bpf::ProgramSpec &spec, uint32_t inlineLimit,
                           const BuiltVersion &built) {
  const core::TableAccessInfo &info = spec.analysis();
  // The backend's limit on reading arrays by content each cycle.
  core::ArrayContentReads arrays{bpf::ArrayContentReadBytes, bpf::arrayContentBytes};
  std::map<unsigned, core::SitePlan> plans =
      core::planSites(info, spec.catalog(), inlineLimit, &arrays);
  Explanation out;
  out.program = spec.path();
  out.source = built.source;
  out.costModel = built.costModel;
  out.inlineLimit = inlineLimit;
  out.guards = built.log.guards;
  for (const auto &[name, table] : spec.catalog()) {
    auto usage = info.tables.find(name);
    if (usage == info.tables.end())
      continue;
    std::vector<core::ValueField> fields = core::valueFields(spec.module(), name);
    const core::TableUsage &used = usage->second;
    ExplainedMap map;
    map.name = name;
    map.type = table.typeName;
    map.maxEntries = table.maxEntries;
    map.valueSize = table.valueSize;
    map.mapOfMaps = table.innerTemplate.has_value();
    map.access = table.keptGeneric ? ExplainedMap::Access::KeptGeneric
                 : !used.written   ? ExplainedMap::Access::ReadOnly
                 : info.writtenOnlyInPart(name, table.valueSize)
                     ? ExplainedMap::Access::WrittenInPart
                     : ExplainedMap::Access::Written;
    // Kept generic, the program's own writes are listed beside the policy.
    if (used.writtenWholesale) {
      for (const std::string &reason : used.writeReasons)
        if (reason != core::KeptGenericReason)
          map.writes.push_back({"", std::nullopt, reason});
    } else {
      for (const core::ValueWrite &write : used.valueWrites) {
        // Sites inlined from one helper function write in the same place:
        // one each.
        ExplainedWrite line{core::describeValueBytes(fields, write.offset, write.size),
                            write.key ? std::optional<std::string>(toHex(*write.key))
                                      : std::nullopt,
                            write.where};
        if (llvm::find(map.writes, line) == map.writes.end())
          map.writes.push_back(std::move(line));
      }
    }
    map.pointerComparisons = used.pointerComparisons;
    for (const core::AccessSite &site : info.sites)
      if (site.table == name)
        map.sites.push_back(explained(spec, site, plans.at(site.id), fields, inlineLimit, built));
    if (auto inlined = built.log.inlined.find(name); inlined != built.log.inlined.end())
      map.inlinedEntries = inlined->second.size();
    out.maps.push_back(std::move(map));
  }
  for (const core::AccessSite &site : info.sites)
    if (site.table.empty())
      out.sitesWithoutOneMap.push_back(
          explained(spec, site, plans.at(site.id), {}, inlineLimit, built));
  // The writable globals as the pass sees them (a clone: the analysis
  // hands out the module's loads), the constants as LLVM does.
  std::unique_ptr<llvm::Module> clone = llvm::CloneModule(spec.module());
  std::map<std::string, core::GlobalAccess> writable;
  for (core::GlobalAccess &access : core::analyzeGlobals(*clone))
    writable[access.global->getName().str()] = std::move(access);
  std::set<std::string> laidOut;
  for (const core::GlobalSlice &slice : spec.globals())
    laidOut.insert(slice.global);
  const llvm::DataLayout &dl = clone->getDataLayout();
  for (const llvm::GlobalVariable &global : spec.module().globals()) {
    ExplainedGlobal explainedGlobal;
    explainedGlobal.name = global.getName().str();
    auto access = writable.find(explainedGlobal.name);
    if (access != writable.end()) {
      explainedGlobal.section = access->second.section;
      unsigned folded = 0, kept = 0;
      for (const core::GlobalLoad &load : access->second.loads)
        ++(access->second.writtenAt(load.offset, dl.getTypeStoreSize(load.load->getType()))
               ? kept
               : folded);
      unsigned copied = 0;
      for (const core::GlobalCopy &copy : access->second.copies)
        copied += copy.size <= core::MaxFoldedGlobalCopy &&
                  !access->second.writtenAt(copy.offset, copy.size);
      if (!folded && !copied) {
        explainedGlobal.treatment = ExplainedGlobal::Treatment::WrittenByTheProgram;
        explainedGlobal.verdict =
            !access->second.firstWrite.empty()
                ? "written by the program (" + access->second.firstWrite + "): left alone"
                 : "no load or copy at a known offset (volatile or unread): left alone";
      } else if (!laidOut.count(explainedGlobal.name)) {
        explainedGlobal.treatment = ExplainedGlobal::Treatment::WrittenByTheProgram;
        explainedGlobal.verdict = "its place in the section is unknown (no BTF): left alone";
      } else {
        explainedGlobal.treatment = ExplainedGlobal::Treatment::PolledAndChecked;
        explainedGlobal.verdict =
            (folded ? std::to_string(folded) + " load" + (folded == 1 ? "" : "s") : "") +
            (folded && copied ? " and " : "") +
            (copied ? std::to_string(copied) + (copied == 1 ? " copy" : " copies") : "") +
            " of bytes the program never writes will be folded" +
            (kept ? " (" + std::to_string(kept) + " of bytes it writes kept)" : "") +
            "; polled, not guarded: a control plane writing it through mmap bypasses "
            "Morpheus, so every guarded entry compares the folded bytes with the live ones "
            "and runs the generic code when they differ (a packet that starts after the write "
            "sees it), and each cycle rebuilds the code for the new bytes";
      }
    } else if (std::optional<std::string> section = core::readOnlyDataSection(global)) {
      explainedGlobal.section = *section;
      explainedGlobal.treatment = ExplainedGlobal::Treatment::Constant;
      explainedGlobal.verdict =
          "constant: the loader sets it before load and the kernel freezes it; LLVM folds "
          "what it can (not `volatile` loads), Morpheus adds nothing";
    } else {
      continue;
    }
    for (const core::GlobalDecision &decision : built.log.globals)
      if (decision.global == explainedGlobal.name)
        explainedGlobal.decision = decision;
    out.globals.push_back(std::move(explainedGlobal));
  }
  return out;
}

namespace {

std::string siteName(const ExplainedSite &site) {
  std::string text = "site #" + std::to_string(site.id) + " " + site.helper + " in " +
                     site.function;
  if (!site.location.empty())
    text += " at " + site.location;
  if (site.constantKey)
    text += ", key [" + toHex(*site.constantKey) + "]";
  else if (!site.keySources.empty())
    text += ", key from " + site.keySources;
  if (!site.constantUnproven.empty())
    text += " (its bytes are not proven constant: " + site.constantUnproven + ")";
  return text;
}

const char *verdictName(ExplainedSite::Verdict verdict) {
  using Verdict = ExplainedSite::Verdict;
  switch (verdict) {
  case Verdict::Specialized:
    return "specialized";
  case Verdict::Unchanged:
    return "unchanged";
  case Verdict::Declined:
    return "declined";
  case Verdict::Kept:
    return "kept";
  case Verdict::NotALookup:
    return "not_a_lookup";
  }
  return "?";
}

const char *accessName(ExplainedMap::Access access) {
  switch (access) {
  case ExplainedMap::Access::ReadOnly:
    return "read_only";
  case ExplainedMap::Access::WrittenInPart:
    return "written_in_part";
  case ExplainedMap::Access::Written:
    return "written";
  case ExplainedMap::Access::KeptGeneric:
    return "kept_generic";
  }
  return "?";
}

const char *treatmentName(ExplainedGlobal::Treatment treatment) {
  switch (treatment) {
  case ExplainedGlobal::Treatment::Constant:
    return "constant";
  case ExplainedGlobal::Treatment::WrittenByTheProgram:
    return "written_by_the_program";
  case ExplainedGlobal::Treatment::PolledAndChecked:
    return "polled_and_checked";
  }
  return "?";
}

nlohmann::json guardToJson(const core::GuardDecision &guard) {
  nlohmann::json json = {{"function", guard.function},
                         {"callback", guard.callback},
                         {"fallback", core::fallbackName(guard.fallback)},
                         {"detail", guard.detail}};
  if (guard.fallback == core::Fallback::TailCall)
    json["slot"] = guard.slot;
  return json;
}

nlohmann::json siteToJson(const ExplainedSite &site) {
  nlohmann::json json = {{"id", site.id},
                         {"helper", site.helper},
                         {"function", site.function},
                         {"location", site.location},
                         {"action", verdictName(site.verdict)},
                         {"planned", actionName(site.plan.action)},
                         {"detail", site.text}};
  if (site.decided) {
    json["pass"] = site.decisions[*site.decided].pass;
    json["outcome"] = core::siteOutcomeName(site.decisions[*site.decided].outcome);
  } else {
    json["pass"] = "";
    json["outcome"] = "";
  }
  nlohmann::json decisions = nlohmann::json::array();
  for (const core::SiteDecision &decision : site.decisions)
    decisions.push_back({{"pass", decision.pass},
                         {"outcome", core::siteOutcomeName(decision.outcome)},
                         {"applied", decision.applied},
                         {"detail", decision.detail}});
  json["decisions"] = std::move(decisions);
  if (site.constantKey)
    json["constant_key"] = toHex(*site.constantKey);
  if (!site.keySources.empty())
    json["key_sources"] = site.keySources;
  if (!site.constantUnproven.empty())
    json["constant_unproven"] = site.constantUnproven;
  if (!site.outerTables.empty()) {
    json["outer_maps"] = site.outerTables;
    json["inner_candidates"] = site.innerCandidates;
  }
  if (!site.mergedTables.empty())
    json["merged_maps"] = site.mergedTables;
  return json;
}

} // namespace

std::string explanationToText(const Explanation &explanation) {
  std::string out = explanation.program + ": what a cycle decides (inline limit " +
                    std::to_string(explanation.inlineLimit) + ", tables from " +
                    explanation.source + ")\n" + explanation.costModel + "\n";
  for (const ExplainedMap &map : explanation.maps) {
    out += "map " + map.name + " (" + map.type + ", " + std::to_string(map.maxEntries) + " x " +
           std::to_string(map.valueSize) + " bytes): ";
    if (map.mapOfMaps)
      out += "a map of maps; ";
    switch (map.access) {
    case ExplainedMap::Access::ReadOnly:
      out += "read-only from the data plane\n";
      break;
    case ExplainedMap::Access::Written:
      out += "written by the data plane\n";
      break;
    case ExplainedMap::Access::WrittenInPart:
      out += "written in part by the data plane\n";
      break;
    case ExplainedMap::Access::KeptGeneric:
      out += std::string(core::KeptGenericReason) + ": never specialized\n";
      break;
    }
    bool wholesale = map.access == ExplainedMap::Access::Written ||
                     map.access == ExplainedMap::Access::KeptGeneric;
    for (const ExplainedWrite &write : map.writes)
      out += wholesale ? "    written: " + write.by + "\n"
                       : "    written: " + write.bytes +
                             (write.key ? " of key [" + *write.key + "]" : " of every key") +
                             ", by " + write.by + "\n";
    for (const std::string &where : map.pointerComparisons)
      out += "    value pointers " + where + "\n";
    if (map.inlinedEntries)
      out += "    " + std::to_string(map.inlinedEntries) + " entr" +
             (map.inlinedEntries == 1 ? "y" : "ies") + " inlined as constants\n";
    for (const ExplainedSite &site : map.sites)
      out += "  " + siteName(site) + ": " + site.text + "\n";
  }
  if (!explanation.sitesWithoutOneMap.empty())
    out += "sites without one map:\n";
  for (const ExplainedSite &site : explanation.sitesWithoutOneMap) {
    std::string candidates =
        !site.possibleTables.empty()
            ? llvm::join(site.possibleTables, ", ")
            : (site.outerTables.empty() ? "any map" : "no map of the program");
    out += "  " + siteName(site) + " (may be " + candidates + "): " + site.text + "\n";
  }
  out += "globals:\n";
  for (const ExplainedGlobal &global : explanation.globals) {
    out += "  " + global.name + " (" + global.section + "): " + global.verdict + "\n";
    if (global.decision)
      out += std::string("    this cycle: ") + (global.decision->applied ? "folded" : "kept") +
             ": " + global.decision->detail + "\n";
  }
  out += "guards:\n";
  for (const core::GuardDecision &guard : explanation.guards)
    out +=
        "  " + guard.function + (guard.callback ? " (callback)" : "") + ": " +
        core::fallbackName(guard.fallback) +
        (guard.fallback == core::Fallback::TailCall ? " (slot " + std::to_string(guard.slot) + ")"
                                                    : std::string()) +
        ": " + guard.detail + "\n";
  return out;
}

nlohmann::json explanationToJson(const Explanation &explanation) {
  nlohmann::json maps = nlohmann::json::array();
  for (const ExplainedMap &map : explanation.maps) {
    nlohmann::json writes = nlohmann::json::array();
    for (const ExplainedWrite &write : map.writes) {
      nlohmann::json json = {{"by", write.by}};
      if (map.access != ExplainedMap::Access::Written &&
          map.access != ExplainedMap::Access::KeptGeneric) {
        json["bytes"] = write.bytes;
        json["key"] = write.key ? nlohmann::json(*write.key) : nlohmann::json(nullptr);
      }
      writes.push_back(std::move(json));
    }
    nlohmann::json sites = nlohmann::json::array();
    for (const ExplainedSite &site : map.sites)
      sites.push_back(siteToJson(site));
    maps.push_back({{"name", map.name},
                    {"type", map.type},
                    {"max_entries", map.maxEntries},
                    {"value_size", map.valueSize},
                    {"map_of_maps", map.mapOfMaps},
                    {"access", accessName(map.access)},
                    {"writes", writes},
                    {"pointer_comparisons", map.pointerComparisons},
                    {"inlined_entries", map.inlinedEntries},
                    {"sites", sites}});
  }
  nlohmann::json others = nlohmann::json::array();
  for (const ExplainedSite &site : explanation.sitesWithoutOneMap)
    others.push_back(siteToJson(site));
  nlohmann::json globals = nlohmann::json::array();
  for (const ExplainedGlobal &global : explanation.globals) {
    nlohmann::json json = {{"name", global.name},
                           {"section", global.section},
                           {"treatment", treatmentName(global.treatment)},
                           {"detail", global.verdict}};
    if (global.decision)
      json["this_cycle"] = {{"applied", global.decision->applied},
                            {"detail", global.decision->detail}};
    globals.push_back(std::move(json));
  }
  nlohmann::json guards = nlohmann::json::array();
  for (const core::GuardDecision &guard : explanation.guards)
    guards.push_back(guardToJson(guard));
  return {{"program", explanation.program},
          {"source", explanation.source},
          {"cost_model", explanation.costModel},
          {"inline_limit", explanation.inlineLimit},
          {"maps", maps},
          {"sites_without_one_map", others},
          {"globals", globals},
          {"guards", guards}};
}

nlohmann::json logToJson(const core::SpecializationLog &log) {
  nlohmann::json sites = nlohmann::json::array();
  for (const core::SiteDecision &decision : log.decisions)
    sites.push_back({{"site", decision.site},
                     {"map", decision.table},
                     {"function", decision.function},
                     {"location", decision.location},
                     {"pass", decision.pass},
                     {"applied", decision.applied},
                     {"detail", decision.detail}});
  nlohmann::json inlined = nlohmann::json::object();
  for (const auto &[table, entries] : log.inlined) {
    nlohmann::json list = nlohmann::json::array();
    for (const core::TableEntry &entry : entries) {
      nlohmann::json item = {{"key", toHex(entry.key)}};
      item["value"] = entry.value ? nlohmann::json(toHex(*entry.value))
                                  : nlohmann::json(nullptr);
      list.push_back(item);
    }
    inlined[table] = list;
  }
  nlohmann::json guards = nlohmann::json::array();
  for (const core::GuardDecision &guard : log.guards)
    guards.push_back(guardToJson(guard));
  // The bytes of globals folded, which every guarded root checks.
  nlohmann::json globals = nlohmann::json::array();
  for (const core::GlobalCheck &check : log.globalChecks)
    globals.push_back(
        {{"global", check.global}, {"offset", check.offset}, {"bytes", toHex(check.bytes)}});
  return {{"sites", sites}, {"inlined", inlined}, {"guards", guards}, {"globals", globals}};
}

} // namespace morpheus::cli
