// The table passes' shared building blocks (see TableRewriting.h).
#include "core/passes/TableRewriting.h"

#include "core/passes/PrefixIntervals.h"

#include "core/OpaqueValue.h"
#include "core/TableAccessAnalysis.h"
#include "support/Bytes.h"

#include <llvm/ADT/SmallPtrSet.h>
#include <llvm/ADT/Statistic.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Transforms/Utils/BasicBlockUtils.h>
#include <llvm/Transforms/Utils/Local.h>

#include <map>
#include <set>
#include <tuple>

using namespace llvm;

namespace morpheus::core {

const char *deciderName(Decider decider) {
  switch (decider) {
  case Decider::Analysis:
    return "analysis";
#define MORPHEUS_TABLE_PASS(NAME, CLASS)                                       \
  case Decider::CLASS:                                                         \
    return NAME;
#include "core/Passes.def"
  }
  return "?";
}

const char *siteOutcomeName(SiteOutcome outcome) {
  switch (outcome) {
  case SiteOutcome::Applied:
    return "applied";
  case SiteOutcome::NotReplaceable:
    return "not_replaceable";
  case SiteOutcome::NotEligible:
    return "not_eligible";
  case SiteOutcome::InnerTableUnresolved:
    return "inner_table_unresolved";
  case SiteOutcome::Unguarded:
    return "unguarded";
  case SiteOutcome::TableNotRead:
    return "table_not_read";
  case SiteOutcome::NotReadWhole:
    return "not_read_whole";
  case SiteOutcome::OverInlineLimit:
    return "over_inline_limit";
  case SiteOutcome::OverVerifierBudget:
    return "over_verifier_budget";
  case SiteOutcome::CompareChainsOff:
    return "compare_chains_off";
  case SiteOutcome::RegionsOff:
    return "regions_off";
  case SiteOutcome::PerCpuValuesDiffer:
    return "per_cpu_values_differ";
  case SiteOutcome::KeyNotInSnapshot:
    return "key_not_in_snapshot";
  case SiteOutcome::KeyPresent:
    return "key_present";
  case SiteOutcome::NothingToFold:
    return "nothing_to_fold";
  case SiteOutcome::NoHotKey:
    return "no_hot_key";
  case SiteOutcome::WriteCountsNotRead:
    return "write_counts_not_read";
  case SiteOutcome::WritesNotCounted:
    return "writes_not_counted";
  case SiteOutcome::NoRepresentation:
    return "no_representation";
  case SiteOutcome::NoFlow:
    return "no_flow";
  case SiteOutcome::RegionNotTabulable:
    return "region_not_tabulable";
  case SiteOutcome::NotCheaper:
    return "not_cheaper";
  case SiteOutcome::NotProfiled:
    return "not_profiled";
  case SiteOutcome::NoProfileSlot:
    return "no_profile_slot";
  }
  return "?";
}

void SpecializationLog::record(const AccessSite &site, Decider decider, SiteOutcome outcome,
                               std::string detail) {
  record(site.id, site.table, site.function, site.location, decider, outcome,
         std::move(detail));
}

void SpecializationLog::record(unsigned site, std::string table, std::string function,
                               std::string location, Decider decider, SiteOutcome outcome,
                               std::string detail) {
  SiteDecision decision;
  decision.site = site;
  decision.table = std::move(table);
  decision.function = std::move(function);
  decision.location = std::move(location);
  decision.decider = decider;
  decision.outcome = outcome;
  decision.pass = deciderName(decider);
  decision.applied = outcome == SiteOutcome::Applied;
  decision.detail = std::move(detail);
  decisions.push_back(std::move(decision));
}

std::string SpecializationLog::toText() const {
  // Sites left alone for the same reason are one line: a program with a
  // dozen counter updates should not bury what was specialized.
  std::string out;
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<unsigned>> kept;
  for (const SiteDecision &decision : decisions) {
    if (!decision.applied) {
      kept[{decision.table, decision.pass, decision.detail}].push_back(decision.site);
      continue;
    }
    out += llvm::formatv("  specialized {0,-16} site #{1} ({2}) by {3}: {4}\n",
                         decision.table, decision.site, decision.location,
                         decision.pass, decision.detail)
               .str();
  }
  for (const auto &[reason, sites] : kept) {
    const auto &[table, pass, detail] = reason;
    out += llvm::formatv("  kept        {0,-16} {1} site{2}: {3}\n", table, sites.size(),
                         sites.size() == 1 ? "" : "s", detail)
               .str();
  }
  for (const PointDecision &point : points)
    out += llvm::formatv("  {0} {1,-16} in {2}(): {3}\n",
                         point.applied ? "assumed    " : "point off  ", point.label,
                         point.function, point.detail)
               .str();
  for (const GlobalDecision &global : globals)
    out += llvm::formatv("  {0} {1,-16} global: {2}\n",
                         global.applied ? "specialized" : "kept       ", global.global,
                         global.detail)
               .str();
  for (const GuardDecision &guard : guards)
    out += llvm::formatv("  guard       {0,-16} {1}{2}: {3}\n", guard.function,
                         fallbackName(guard.fallback),
                         guard.fallback == Fallback::TailCall
                             ? " (slot " + std::to_string(guard.slot) + ")"
                             : std::string(),
                         guard.detail)
               .str();
  return out;
}

const char *fallbackName(Fallback fallback) {
  switch (fallback) {
  case Fallback::InProgram:
    return "in-program";
  case Fallback::TailCall:
    return "tail call";
  case Fallback::None:
    return "none";
  }
  return "?";
}

namespace {

std::string typeName(Type *type) {
  std::string text;
  raw_string_ostream out(text);
  type->print(out);
  return out.str();
}

constexpr const char *KeptMetadata = "morpheus.kept";

// Why a site whose operand merges tables is specialized at none of them.
std::string mergedOperand(const AccessSite &site) {
  return "table operand is " + operandDescription(site) +
         ", merged by a phi or select: not one table";
}

} // namespace

std::optional<std::string> whyWritesNotGuardable(const std::string &table,
                                                 const TableAccessInfo &info,
                                                 const TableCatalog &catalog) {
  auto usage = info.tables.find(table);
  if (usage == info.tables.end() || !usage->second.written)
    return "not written by the data plane";
  auto entry = catalog.find(table);
  if (entry == catalog.end())
    return "table not in the catalog";
  if (entry->second.lookupHasSideEffects)
    return entry->second.typeName +
           " table: an insert may evict any entry, hot ones included, without a write "
           "naming its key";
  if (usage->second.untiedWrite)
    return "written where the key is not known: " + *usage->second.untiedWrite;
  return std::nullopt;
}

std::set<std::string> writeGuardedTables(const TableAccessInfo &info,
                                         const TableCatalog &catalog,
                                         const WriteGuardOptions &guards) {
  // A table accessed where frames must stay the original's could not have
  // its writes counted there.
  std::set<std::string> inKeptFrames;
  for (const AccessSite &site : info.sites)
    if (site.framesKept)
      for (const std::string &table : site.possibleTables())
        inKeptFrames.insert(table);
  std::set<std::string> tables;
  for (const AccessSite &site : info.sites)
    if (!site.table.empty() && !tables.count(site.table) &&
        !guards.excludedTables.count(site.table) && !inKeptFrames.count(site.table) &&
        !info.isReadOnly(site.table) &&
        !whyNotInlinable(site, info, catalog, /*writesGuarded=*/true))
      tables.insert(site.table);
  return tables;
}

std::optional<LookupDecline> whyNotInlinable(const AccessSite &site,
                                             const TableAccessInfo &info,
                                             const TableCatalog &catalog,
                                             bool writesGuarded) {
  using Why = LookupDecline::Reason;
  if (site.signature.kind != AccessKind::Lookup)
    return LookupDecline{Why::NotALookup, "not a lookup"};
  if (!site.signature.rewritable)
    return LookupDecline{Why::HelperNotModelled,
                         site.signature.name + " is not a key -> value lookup the core models"};
  if (site.table.empty() && !site.mergedTables.empty())
    return LookupDecline{Why::MergedOperand, mergedOperand(site)};
  if (site.table.empty() && !site.outerTables.empty())
    return LookupDecline{Why::InnerMapOperand,
                         "table operand is an inner map of " + join(site.outerTables, ", ") +
                             " (inlined only once resolve-inner-table names the table)"};
  if (site.table.empty())
    return LookupDecline{Why::UnresolvedOperand, "table operand not resolved to one table"};
  if (!site.signature.keyArg || *site.signature.keyArg >= site.call->arg_size())
    return LookupDecline{Why::NoKeyArgument, "lookup without a key argument"};
  // The helper declared by hand with other types: the rewrites build
  // pointers and read key bytes through a pointer, so they take only the
  // shape they understand.
  if (!site.call->getType()->isPointerTy())
    return LookupDecline{Why::HelperShape,
                         "lookup returns " + typeName(site.call->getType()) +
                             ", not a pointer (helper declared with another return type)"};
  if (Type *key = site.call->getArgOperand(*site.signature.keyArg)->getType();
      !key->isPointerTy())
    return LookupDecline{Why::HelperShape,
                         "key passed as " + typeName(key) + ", not as a pointer"};
  auto table = catalog.find(site.table);
  if (table == catalog.end())
    return LookupDecline{Why::NotInTheCatalog, "table not in the catalog"};
  // Whatever the program does with it, and fast paths over written tables
  // included: its other writer bumps no guard and counts no write.
  if (table->second.keptGeneric)
    return LookupDecline{Why::KeptGeneric, KeptGenericReason};
  // A site with a constant key reads one entry: writes to other keys do
  // not change what it returns.
  if (!info.isReadOnly(site.table) &&
      !(site.key.constantKey &&
        info.isReadOnlyAt(site.table, site.key.constantKey, 0, ValueWrite::WholeValue))) {
    if (!writesGuarded)
      return LookupDecline{Why::WrittenByTheDataPlane, "table is written by the data plane"};
    if (auto why = whyWritesNotGuardable(site.table, info, catalog))
      return LookupDecline{Why::WritesNotGuardable, "table is written by the data plane, " + *why};
    if (!site.resultWrites.empty())
      return LookupDecline{Why::WrittenThroughTheValue,
                           "the program writes through this lookup's value" +
                               (locationOf(*site.resultWrites.front()).empty()
                                    ? std::string()
                                    : " at " + locationOf(*site.resultWrites.front())) +
                               ": a fast path may skip the search, never the memory"};
  }
  if (table->second.innerTemplate)
    return LookupDecline{Why::MapOfMaps,
                         "a lookup in a map of maps returns a table, not a value (the accesses "
                         "to that table are resolve-inner-table's)"};
  if (table->second.match == TableMatch::Unsupported)
    return LookupDecline{Why::SemanticsNotModelled,
                         table->second.lookupNotModelled.empty()
                             ? "lookup semantics of " + table->second.typeName +
                                   " tables not modelled"
                             : table->second.lookupNotModelled};
  if (table->second.entriesRemovedUnguarded)
    return LookupDecline{Why::EntriesRemovedUnguarded,
                         *table->second.entriesRemovedUnguarded +
                             ", which no guard sees: only the keys it does not hold may be "
                             "answered without the lookup"};
  if (table->second.lookupHasSideEffects)
    return LookupDecline{Why::LookupSideEffects,
                         "lookups in " + table->second.typeName + " tables have side effects"};
  const TableUsage &usage = info.tables.at(site.table);
  if (!usage.pointerComparisons.empty())
    return LookupDecline{Why::ValuePointersCompared,
                         "value pointers " + usage.pointerComparisons.front() +
                             ": the kernel answers by entry identity"};
  if (site.valueNeedsWritableMemory)
    return LookupDecline{Why::ValueNeedsWritableMemory,
                         *site.valueNeedsWritableMemory +
                             ", which the verifier checks with writable pointer arguments"};
  if (site.key.unwritten)
    return LookupDecline{Why::UnwrittenKeyBytes, site.key.unwritten->describe()};
  if (site.framesKept)
    return LookupDecline{Why::FramesKept, *site.framesKept};
  return std::nullopt;
}

std::optional<std::string> whyNoFieldFolding(const AccessSite &site,
                                             const TableAccessInfo &info,
                                             const TableCatalog &catalog) {
  if (site.signature.kind != AccessKind::Lookup || !site.signature.rewritable ||
      site.table.empty() || !site.call->getType()->isPointerTy())
    return "not a lookup in one table";
  auto table = catalog.find(site.table);
  if (table == catalog.end() || (table->second.match != TableMatch::Exact &&
                                 table->second.match != TableMatch::Index))
    return "lookup semantics not modelled";
  if (!site.key.constantKey)
    return "key not constant";
  if (site.framesKept)
    return *site.framesKept;
  const TableUsage &usage = info.tables.at(site.table);
  if (!usage.written && !table->second.entriesRemovedUnguarded)
    return "table read-only: the whole value is inlined instead";
  if (usage.writtenWholesale)
    return "table written wholesale: " + usage.wholesaleReason;
  for (uint64_t byte = 0; byte < table->second.valueSize; ++byte)
    if (info.isReadOnlyAt(site.table, site.key.constantKey, byte, 1))
      return std::nullopt;
  return "every byte of this key's value is written by the data plane";
}

std::optional<std::string> whyNoKeySetFilter(const AccessSite &site, const TableAccessInfo &info,
                                             const TableCatalog &catalog) {
  if (site.signature.kind != AccessKind::Lookup || !site.signature.rewritable ||
      site.table.empty() || !site.call->getType()->isPointerTy() || !site.signature.keyArg ||
      *site.signature.keyArg >= site.call->arg_size())
    return "not a lookup in one table";
  if (site.key.unwritten)
    return site.key.unwritten->describe();
  if (site.framesKept)
    return *site.framesKept;
  return whyNoKeySetFilter(site.table, info, catalog);
}

std::optional<std::string> whyNoKeySetFilter(const std::string &tableName,
                                             const TableAccessInfo &info,
                                             const TableCatalog &catalog) {
  auto table = catalog.find(tableName);
  if (table == catalog.end() || table->second.match != TableMatch::Exact)
    return "not an exact-match hash table";
  if (table->second.lookupHasSideEffects)
    return "its lookups have side effects (" + table->second.typeName + ")";
  auto usage = info.tables.find(tableName);
  if (usage == info.tables.end())
    return "table not in the analysis";
  if (!usage->second.written && !table->second.entriesRemovedUnguarded)
    return "table read-only: the whole table is inlined instead";
  if (usage->second.keySetWrite)
    return "the data plane may add or remove keys: " + *usage->second.keySetWrite;
  return std::nullopt;
}

InnerTableResolution resolveInnerTable(const AccessSite &site, const TableAccessInfo &info,
                                       const TableSnapshot &snapshot) {
  if (site.table.empty() && !site.mergedTables.empty())
    return {std::nullopt, mergedOperand(site)};
  if (!site.table.empty() || site.outerTables.empty())
    return {std::nullopt, "not an inner-map site"};
  std::string inner = "table operand is an inner map of " + join(site.outerTables, ", ");
  const AccessSite *outer = site.outerLookup ? info.siteFor(site.outerLookup) : nullptr;
  if (!outer || outer->table.empty())
    return {std::nullopt, inner + ", returned by more than one lookup: not resolved"};
  const std::string &name = outer->table;
  if (!info.isReadOnly(name))
    return {std::nullopt, inner + ", which the data plane writes: not resolved"};
  auto contents = snapshot.find(name);
  if (contents == snapshot.end())
    return {std::nullopt, inner + ": its contents were not read"};
  auto stored = [&](const TableEntry &entry) -> std::optional<std::string> {
    auto found = contents->second.storedTables.find(entry.key);
    if (found == contents->second.storedTables.end())
      return std::nullopt;
    return found->second;
  };
  if (outer->key.constantKey) {
    std::string slot = name + "[" + toHex(*outer->key.constantKey) + "]";
    std::optional<const TableEntry *> entry = contents->second.known(*outer->key.constantKey);
    if (!entry)
      return {std::nullopt, inner + ": " + slot + " was not read"};
    if (!*entry)
      return {std::nullopt, inner + ": " + slot + " is empty, the outer lookup misses"};
    if (std::optional<std::string> table = stored(**entry))
      return {*table, slot + " holds " + *table};
    return {std::nullopt, inner + ": " + slot +
                              " holds a map the program does not declare (its loader's), "
                              "whose updates bypass the guard"};
  }
  if (!contents->second.complete)
    return {std::nullopt, inner + ": outer key not constant and " + name + " not read whole"};
  std::set<std::string> held;
  for (const TableEntry &entry : contents->second.entries) {
    std::optional<std::string> table = stored(entry);
    if (!table)
      return {std::nullopt, inner + ": outer key not constant and " + name + "[" +
                                toHex(entry.key) +
                                "] holds a map the program does not declare (its loader's)"};
    held.insert(*table);
  }
  if (held.size() != 1)
    return {std::nullopt, inner + ": outer key not constant and " + name + " holds " +
                              std::to_string(held.size()) + " tables"};
  return {*held.begin(), "every slot of " + name + " holds " + *held.begin()};
}

std::optional<const TableEntry *> snapshotAnswer(const TableContents &contents,
                                                 const TableInfo &table, const Bytes &key,
                                                 bool littleEndian) {
  if (table.match != TableMatch::LongestPrefix || !contents.complete)
    return contents.known(key);
  auto answer = trieAnswer(contents.entries, key, 8 * (table.keySize - PrefixLengthBytes),
                           littleEndian);
  if (!answer) {
    consumeError(answer.takeError());
    return std::nullopt;
  }
  return *answer;
}

std::optional<const TableEntry *> hotKeyAnswer(const TableContents &contents,
                                               const TableInfo &table, const Bytes &key,
                                               bool written, bool littleEndian) {
  std::optional<const TableEntry *> entry = snapshotAnswer(contents, table, key, littleEndian);
  if (!entry || (*entry && !(*entry)->value) || (!*entry && !written))
    return std::nullopt;
  return entry;
}

bool rewriteEligibleLookups(Module &module, ModuleAnalysisManager &mam,
                            const TablePassContext &context, SiteRewrite rewrite,
                            bool writesGuarded) {
  const TableAccessInfo &info = mam.getResult<TableAccessAnalysis>(module);
  LookupRewriter rewriter(module, context);
  // Copy the sites first: rewriting erases calls the analysis points to.
  std::vector<AccessSite> sites = info.sites;
  bool changed = false;
  for (const AccessSite &site : sites) {
    if (whyNotInlinable(site, info, *context.catalog, writesGuarded) ||
        context.untouchable(site.function) || LookupRewriter::keptOnMissPath(*site.call))
      continue;
    auto contents = context.snapshot->find(site.table);
    if (contents == context.snapshot->end())
      continue;
    changed |= rewrite(site, context.catalog->at(site.table), contents->second,
                       rewriter);
  }
  return changed;
}

std::vector<std::pair<LoadInst *, uint64_t>> loadsAtKnownOffsets(CallBase &lookup,
                                                                  const DataLayout &dl) {
  std::vector<std::pair<LoadInst *, uint64_t>> loads;
  SmallVector<std::pair<Value *, int64_t>, 8> worklist{{&lookup, 0}};
  SmallPtrSet<Value *, 8> seen{&lookup};
  while (!worklist.empty()) {
    auto [pointer, offset] = worklist.pop_back_val();
    for (Use &use : pointer->uses()) {
      User *user = use.getUser();
      if (auto *gep = dyn_cast<GetElementPtrInst>(user)) {
        APInt delta(dl.getIndexTypeSizeInBits(gep->getType()), 0);
        if (use.getOperandNo() == 0 && gep->accumulateConstantOffset(dl, delta) &&
            seen.insert(gep).second)
          worklist.push_back({gep, offset + delta.getSExtValue()});
      } else if (isa<BitCastInst>(user) || isa<AddrSpaceCastInst>(user)) {
        if (seen.insert(user).second)
          worklist.push_back({user, offset});
      } else if (auto *load = dyn_cast<LoadInst>(user);
                 load && load->isSimple() && offset >= 0) {
        loads.push_back({load, uint64_t(offset)});
      }
    }
  }
  return loads;
}

Constant *constantAt(Type *type, const Bytes &bytes, uint64_t offset, const DataLayout &dl) {
  auto *integer = dyn_cast<IntegerType>(type);
  uint64_t size = dl.getTypeStoreSize(type);
  if (!integer || size > 8 || offset + size > bytes.size() || integer->getBitWidth() != size * 8)
    return nullptr;
  uint64_t value = 0;
  for (uint64_t i = 0; i < size; ++i) {
    uint64_t byte = dl.isLittleEndian() ? size - 1 - i : i;
    value = (value << 8) | bytes[offset + byte];
  }
  return ConstantInt::get(integer, value);
}

namespace {

// Values sit 8-byte aligned, as the kernel stores them.
uint64_t strideOf(const TableInfo &table) { return alignTo(table.valueSize, 8); }

} // namespace

GlobalVariable *LookupRewriter::valueArray(const std::string &table) {
  std::string name = "__morpheus." + table + ".values";
  if (GlobalVariable *existing = module.getNamedGlobal(name))
    return existing;
  const TableContents &contents = context.snapshot->at(table);
  uint64_t stride = strideOf(context.catalog->at(table));
  // An array read by content gets one more slot: the value of every index
  // the snapshot does not list.
  size_t slots = contents.entries.size() + (contents.unlistedValue ? 1 : 0);
  std::vector<uint8_t> bytes(slots * stride, 0);
  for (size_t i = 0; i < contents.entries.size(); ++i)
    if (const std::optional<Bytes> &value = contents.entries[i].value)
      std::copy(value->begin(), value->end(), bytes.begin() + i * stride);
  if (contents.unlistedValue)
    std::copy(contents.unlistedValue->begin(), contents.unlistedValue->end(),
              bytes.begin() + contents.entries.size() * stride);
  Constant *init = ConstantDataArray::get(module.getContext(), ArrayRef<uint8_t>(bytes));
  // Not unnamed_addr: entries keep distinct addresses, and LLVM may not
  // merge this array with another holding equal bytes.
  auto *global = new GlobalVariable(module, init->getType(), /*isConstant=*/true,
                                    GlobalValue::PrivateLinkage, init, name);
  global->setAlignment(Align(8));
  const std::string &section = context.indexLoweredTables.count(table)
                                   ? context.indexedValueSection
                                   : context.constantSection;
  if (!section.empty())
    global->setSection(section);
  return global;
}

GlobalVariable *LookupRewriter::derivedTable(const std::string &table, StringRef kind,
                                            function_ref<Constant *()> build) {
  std::string name = "__morpheus." + table + "." + kind.str();
  if (GlobalVariable *existing = module.getNamedGlobal(name))
    return existing;
  Constant *init = build();
  auto *global = new GlobalVariable(module, init->getType(), /*isConstant=*/true,
                                    GlobalValue::PrivateLinkage, init, name);
  global->setAlignment(Align(8));
  if (!context.constantSection.empty())
    global->setSection(context.constantSection);
  return global;
}

uint64_t LookupRewriter::indexOf(const std::string &table, const Bytes &key) const {
  const std::vector<TableEntry> &entries = context.snapshot->at(table).entries;
  for (size_t i = 0; i < entries.size(); ++i)
    if (entries[i].key == key)
      return i;
  return entries.size(); // not reached: callers pass entries of the snapshot
}

Constant *LookupRewriter::valuePointer(const std::string &table, const TableEntry &entry) {
  LLVMContext &llvmContext = module.getContext();
  uint64_t offset = indexOf(table, entry.key) * strideOf(context.catalog->at(table));
  return ConstantExpr::getInBoundsGetElementPtr(
      Type::getInt8Ty(llvmContext), valueArray(table),
      ConstantInt::get(Type::getInt64Ty(llvmContext), offset));
}

Value *LookupRewriter::entryPointer(IRBuilderBase &builder, const std::string &table,
                                   Value *index) {
  Value *offset = builder.CreateMul(index, builder.getInt64(strideOf(context.catalog->at(table))));
  return builder.CreateInBoundsGEP(builder.getInt8Ty(), valueArray(table), offset,
                                   table + ".entry");
}

std::optional<std::string> LookupRewriter::valueArrayTable(const GlobalVariable &global) const {
  StringRef name = global.getName();
  if (!name.consume_front("__morpheus.") || !name.consume_back(".values") ||
      !context.catalog->count(name.str()) || !context.snapshot->count(name.str()) ||
      module.getNamedGlobal(global.getName()) != &global)
    return std::nullopt;
  return name.str();
}

uint64_t LookupRewriter::valueStride(const std::string &table) const {
  return strideOf(context.catalog->at(table));
}

Constant *LookupRewriter::unlistedValuePointer(const std::string &table) {
  LLVMContext &llvmContext = module.getContext();
  uint64_t offset =
      context.snapshot->at(table).entries.size() * strideOf(context.catalog->at(table));
  return ConstantExpr::getInBoundsGetElementPtr(
      Type::getInt8Ty(llvmContext), valueArray(table),
      ConstantInt::get(Type::getInt64Ty(llvmContext), offset));
}

void LookupRewriter::replaceWith(CallBase &lookup, Value *result) {
  lookup.replaceAllUsesWith(result);
  lookup.eraseFromParent();
}

bool LookupRewriter::keptOnMissPath(const CallBase &call) {
  return call.getMetadata(KeptMetadata) != nullptr;
}

void LookupRewriter::keepOnMissPath(CallBase &call) {
  call.setMetadata(KeptMetadata, MDNode::get(call.getContext(), {}));
}

std::vector<KeyChunk> keyChunks(uint32_t keySize, uint64_t alignment) {
  std::vector<KeyChunk> chunks;
  for (uint32_t offset = 0; offset < keySize;) {
    uint32_t width = 8;
    while (width > 1 && (width > keySize - offset || width > alignment ||
                         offset % width != 0))
      width /= 2;
    chunks.push_back({offset, width});
    offset += width;
  }
  return chunks;
}

uint64_t chunkValue(const Bytes &key, KeyChunk chunk, bool littleEndian) {
  uint64_t value = 0;
  for (uint32_t i = 0; i < chunk.width; ++i) {
    uint32_t byte = littleEndian ? chunk.width - 1 - i : i;
    value = (value << 8) | key[chunk.offset + byte];
  }
  return value;
}

namespace {

// writeBucket's constants: a 64-bit odd multiplier (Fibonacci hashing) and
// the table's salt (FNV-1a of its name), so that keys of different tables
// fall into different buckets.
constexpr uint64_t BucketMultiplier = 0x9e3779b97f4a7c15ull;

uint64_t tableSalt(const std::string &table) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : table)
    hash = (hash ^ c) * 0x100000001b3ull;
  return hash;
}

// Where byte `index` of a key lands in the fold: its place in its 8-byte
// word as a load of that word would read it.
unsigned foldShift(uint32_t index, bool littleEndian) {
  return 8 * (littleEndian ? index % 8 : 7 - index % 8);
}

} // namespace

uint32_t writeBucket(const std::string &table, const Bytes &key, uint32_t bucketBits,
                     bool littleEndian) {
  uint64_t fold = 0;
  for (uint32_t i = 0; i < key.size(); ++i)
    fold ^= uint64_t(key[i]) << foldShift(i, littleEndian);
  uint64_t mixed = (fold ^ tableSalt(table)) * BucketMultiplier;
  return bucketBits ? uint32_t(mixed >> (64 - bucketBits)) : 0;
}

WriteBucketWords loadWriteBucketKey(IRBuilderBase &builder, Value *key, const std::string &table,
                                    uint32_t keySize, const DataLayout &dl) {
  uint64_t alignment = getKnownAlignment(key, dl).value();
  Value *keyMemory = opaqueCopy(builder, key, table + ".written.key");
  WriteBucketWords loaded;
  for (KeyChunk chunk : keyChunks(keySize, alignment)) {
    Value *address = chunk.offset ? builder.CreateConstInBoundsGEP1_32(builder.getInt8Ty(),
                                                                      keyMemory, chunk.offset)
                                  : keyMemory;
    Value *word = builder.CreateZExt(
        builder.CreateAlignedLoad(builder.getIntNTy(chunk.width * 8), address,
                                  Align(std::min<uint64_t>(alignment, chunk.width))),
        builder.getInt64Ty());
    // Shifted so that every byte of the chunk lands where foldShift puts it
    // (the chunk never crosses an 8-byte word: keyChunks aligns it).
    unsigned shift = dl.isLittleEndian() ? foldShift(chunk.offset, true)
                                         : foldShift(chunk.offset + chunk.width - 1, false);
    loaded.words.emplace_back(word, shift);
  }
  return loaded;
}

Value *emitWriteBucket(IRBuilderBase &builder, const WriteBucketWords &loaded,
                       const std::string &table, uint32_t bucketBits) {
  Value *fold = builder.getInt64(0);
  for (auto [word, shift] : loaded.words)
    fold = builder.CreateXor(fold, shift ? builder.CreateShl(word, shift) : word);
  Value *mixed = builder.CreateMul(builder.CreateXor(fold, builder.getInt64(tableSalt(table))),
                                   builder.getInt64(BucketMultiplier));
  Value *bucket = bucketBits ? builder.CreateLShr(mixed, 64 - bucketBits)
                             : static_cast<Value *>(builder.getInt64(0));
  return builder.CreateTrunc(bucket, builder.getInt32Ty(), table + ".written.bucket");
}

namespace {

uint64_t chunkConstant(const Bytes &key, KeyChunk chunk, bool littleEndian,
                       const FaultInjection &faults) {
  uint64_t value = chunkValue(key, chunk, littleEndian);
  // The deliberate bug: the key's last byte compared off by one.
  if (faults.breakKeyCompare && chunk.offset + chunk.width == key.size())
    value += littleEndian ? uint64_t(1) << (8 * (chunk.width - 1)) : 1;
  return value;
}

} // namespace

std::vector<LookupRewriter::Arm>
LookupRewriter::armsOf(const std::vector<const TableEntry *> &entries) {
  std::vector<Arm> arms;
  for (const TableEntry *entry : entries)
    arms.push_back({&entry->key, entry});
  return arms;
}

void LookupRewriter::replaceWithDispatch(CallBase &lookup, unsigned keyArg,
                                         const std::vector<Arm> &arms, const std::string &table,
                                         ChainLowering lowering, OnMiss onMiss,
                                         EntryGuard stillValid) {
  bool keepLookupOnMiss = onMiss == OnMiss::KeepLookup;
  LLVMContext &llvmContext = module.getContext();
  const DataLayout &dl = module.getDataLayout();
  auto *pointerType = cast<PointerType>(lookup.getType());
  if (arms.empty() && onMiss == OnMiss::Null) {
    replaceWith(lookup, ConstantPointerNull::get(pointerType));
    return;
  }
  uint32_t keySize = context.catalog->at(table).keySize;
  IRBuilder<> builder(llvmContext);
  // The key is read once, as the helper would have.
  Frame frame = openFrame(lookup, keyArg, table, builder, arms.size() + 2);
  BasicBlock *head = frame.head;
  BasicBlock *tail = frame.tail;
  Function *function = head->getParent();
  PHINode *result = frame.result;
  std::vector<KeyChunk> chunks = keyChunks(keySize, frame.keyAlignment);
  std::vector<Value *> words;
  for (KeyChunk chunk : chunks)
    words.push_back(
        loadKey(builder, frame, chunk.offset, builder.getIntNTy(chunk.width * 8), table + ".key"));

  // The index an array lookup would take, for the unlisted value's range test.
  Value *arrayIndex = nullptr;
  if (onMiss == OnMiss::UnlistedBelowMaxEntries)
    arrayIndex = loadKey(builder, frame, 0, builder.getInt32Ty(), table + ".index");

  BasicBlock *found = nullptr;
  PHINode *index = nullptr;
  if (lowering == ChainLowering::Index && !arms.empty()) {
    found = BasicBlock::Create(llvmContext, table + ".found", function, tail);
    builder.SetInsertPoint(found);
    index = builder.CreatePHI(builder.getInt64Ty(), arms.size(), table + ".index");
  }
  BasicBlock *compare = head;
  for (const Arm &arm : arms) {
    builder.SetInsertPoint(compare);
    Value *match = nullptr;
    for (size_t i = 0; i < chunks.size(); ++i) {
      Value *equal = builder.CreateICmpEQ(
          words[i], ConstantInt::get(words[i]->getType(),
                                     chunkConstant(*arm.key, chunks[i],
                                                   dl.isLittleEndian(), context.faults)));
      match = match ? builder.CreateAnd(match, equal) : equal;
    }
    BasicBlock *hit = BasicBlock::Create(llvmContext, table + ".hit", function, found ? found : tail);
    BasicBlock *next = BasicBlock::Create(llvmContext, table + ".next", function, tail);
    if (stillValid) {
      BasicBlock *matched =
          BasicBlock::Create(llvmContext, table + ".matched", function, hit);
      builder.CreateCondBr(match, matched, next);
      builder.SetInsertPoint(matched);
      builder.CreateCondBr(stillValid(builder, *arm.answer), hit, next);
    } else {
      builder.CreateCondBr(match, hit, next);
    }
    builder.SetInsertPoint(hit);
    if (index) {
      builder.CreateBr(found);
      index->addIncoming(builder.getInt64(indexOf(table, arm.answer->key)), hit);
    } else {
      builder.CreateBr(tail);
      result->addIncoming(valuePointer(table, *arm.answer), hit);
    }
    compare = next;
  }
  if (index) {
    // Every entry leaves the chain through here with only its index: the
    // verifier sees one pointer into the value array per path, and once the
    // loads are done nothing distinguishes the paths.
    builder.SetInsertPoint(found);
    Value *hidden = opaqueCopy(builder, index, table + ".index.hidden");
    Value *pointer = entryPointer(builder, table, hidden);
    builder.CreateBr(tail);
    result->addIncoming(pointer, found);
  }
  builder.SetInsertPoint(compare);
  BranchInst *missExit = builder.CreateBr(tail);
  if (keepLookupOnMiss) {
    closeFrame(lookup, frame, CallKept::OnMissPath, compare);
    return;
  }
  if (arrayIndex) {
    builder.SetInsertPoint(missExit);
    Value *exists = builder.CreateICmpULT(
        arrayIndex, builder.getInt32(context.catalog->at(table).maxEntries), table + ".exists");
    result->addIncoming(builder.CreateSelect(exists, unlistedValuePointer(table),
                                             ConstantPointerNull::get(pointerType),
                                             table + ".unlisted"),
                        compare);
  } else {
    result->addIncoming(ConstantPointerNull::get(pointerType), compare);
  }
  closeFrame(lookup, frame, CallKept::No);
}

LookupRewriter::Frame LookupRewriter::openFrame(CallBase &lookup, unsigned keyArg,
                                                const std::string &table,
                                                IRBuilderBase &builder,
                                                unsigned expectedResults) {
  Value *key = lookup.getArgOperand(keyArg);
  BasicBlock *head = lookup.getParent();
  BasicBlock *tail = SplitBlock(head, &lookup);
  head->getTerminator()->eraseFromParent();
  builder.SetInsertPoint(head);
  builder.SetCurrentDebugLocation(lookup.getDebugLoc());
  uint64_t alignment = getKnownAlignment(key, module.getDataLayout()).value();
  Value *keyMemory = opaqueCopy(builder, key, table + ".key.memory");
  PHINode *result = PHINode::Create(lookup.getType(), expectedResults, table + ".value");
  result->insertInto(tail, tail->begin());
  result->setDebugLoc(lookup.getDebugLoc());
  return {head, tail, keyMemory, alignment, result};
}

Value *LookupRewriter::loadKey(IRBuilderBase &builder, const Frame &frame, uint32_t offset,
                               Type *type, const Twine &name) {
  uint64_t width = type->getPrimitiveSizeInBits() / 8;
  Value *address = offset ? builder.CreateConstInBoundsGEP1_32(builder.getInt8Ty(),
                                                               frame.keyMemory, offset)
                          : frame.keyMemory;
  return builder.CreateAlignedLoad(type, address,
                                   Align(std::min<uint64_t>(frame.keyAlignment, width)), name);
}

void LookupRewriter::closeFrame(CallBase &lookup, const Frame &frame, CallKept kept,
                                BasicBlock *callPath) {
  lookup.replaceAllUsesWith(frame.result);
  if (kept == CallKept::No) {
    lookup.eraseFromParent();
    return;
  }
  lookup.moveBefore(callPath->getTerminator());
  if (kept == CallKept::OnMissPath)
    keepOnMissPath(lookup);
  frame.result->addIncoming(&lookup, callPath);
}

unsigned flowProfileSite(const Module &module) { return accessSiteCount(module); }

void emitProfileSample(Instruction &at, const ProfileOptions &profile, uint32_t site,
                       const std::string &name,
                       function_ref<void(IRBuilderBase &, Value *slot)> record) {
  Module &module = *at.getModule();
  LLVMContext &llvmContext = module.getContext();
  FunctionCallee slotFunction = module.getOrInsertFunction(
      profile.slotFunction, PointerType::get(llvmContext, 0), Type::getInt32Ty(llvmContext));
  BasicBlock *head = at.getParent();
  BasicBlock *rest = SplitBlock(head, &at);
  head->getTerminator()->eraseFromParent();
  IRBuilder<> builder(head);
  builder.SetCurrentDebugLocation(at.getDebugLoc());
  CallInst *slot = builder.CreateCall(slotFunction, {builder.getInt32(site)}, name + ".profile.slot");
  BasicBlock *sampled =
      BasicBlock::Create(llvmContext, name + ".profile.record", head->getParent(), rest);
  // Sampled packets are the rare ones.
  MDNode *rarely = MDBuilder(llvmContext).createBranchWeights(1, 1000);
  builder.CreateCondBr(builder.CreateIsNotNull(slot, name + ".profile.sampled"), sampled, rest,
                       rarely);
  builder.SetInsertPoint(sampled);
  record(builder, slot);
  builder.CreateBr(rest);
}

bool declineSite(const TablePassContext &context, const AccessSite &site, Decider pass,
                 SiteOutcome outcome, std::string why) {
  if (context.declines)
    ++*context.declines;
  if (context.log)
    context.log->record(site, pass, outcome, std::move(why));
  return false;
}

} // namespace morpheus::core
