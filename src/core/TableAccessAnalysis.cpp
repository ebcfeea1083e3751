#include "core/TableAccessAnalysis.h"

#include "core/GuardPlanning.h"
#include "core/KeyBytes.h"
#include "core/OpaqueValue.h"
#include "core/PointerFlow.h"
#include "support/Bytes.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/SmallPtrSet.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/DebugInfoMetadata.h>
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Operator.h>
#include <llvm/Support/Path.h>

#include <algorithm>
#include <map>
#include <set>

using namespace llvm;

namespace morpheus::core {

AnalysisKey TableAccessAnalysis::Key;

std::string KeyProvenance::describe() const {
  std::string out;
  auto add = [&](bool on, const char *name) {
    if (!on)
      return;
    if (!out.empty())
      out += "+";
    out += name;
  };
  add(constant, "constant");
  add(packet, "packet");
  add(context, "context");
  add(table, "table");
  add(other, "other");
  return out.empty() ? "unknown" : out;
}

std::string UnwrittenKeyBytes::describe() const {
  bool one = first == last;
  std::string bytes = one ? "key byte " + std::to_string(first)
                          : "key bytes " + std::to_string(first) + ".." + std::to_string(last);
  std::string state = unsure.empty() ? (one ? " is never written" : " are never written")
                                     : " may be left unwritten (" + unsure + ")";
  return bytes + state +
         ": the kernel compares the stack's stale bytes, which no rewrite can reproduce";
}

bool TableAccessInfo::isReadOnly(const std::string &table) const {
  auto it = tables.find(table);
  return it != tables.end() && !it->second.written;
}

bool ValueWrite::overlaps(const std::optional<Bytes> &otherKey, uint64_t otherOffset,
                          uint64_t otherSize) const {
  if (key && otherKey && *key != *otherKey)
    return false;
  uint64_t end = size == WholeValue ? UINT64_MAX : offset + size;
  uint64_t otherEnd = otherSize == WholeValue ? UINT64_MAX : otherOffset + otherSize;
  return offset < otherEnd && otherOffset < end;
}

std::vector<const ValueWrite *>
TableAccessInfo::writesAt(const std::string &table, const std::optional<Bytes> &key,
                          uint64_t offset, uint64_t size) const {
  std::vector<const ValueWrite *> found;
  if (auto it = tables.find(table); it != tables.end())
    for (const ValueWrite &write : it->second.valueWrites)
      if (write.overlaps(key, offset, size))
        found.push_back(&write);
  return found;
}

bool TableAccessInfo::isReadOnlyAt(const std::string &table, const std::optional<Bytes> &key,
                                   uint64_t offset, uint64_t size) const {
  auto it = tables.find(table);
  return it != tables.end() && !it->second.writtenWholesale &&
         writesAt(table, key, offset, size).empty();
}

bool TableAccessInfo::writtenOnlyInPart(const std::string &table, uint64_t valueSize) const {
  auto it = tables.find(table);
  if (it == tables.end() || !it->second.written || it->second.writtenWholesale)
    return false;
  for (uint64_t byte = 0; byte < valueSize; ++byte)
    if (none_of(it->second.valueWrites, [&](const ValueWrite &write) {
          return !write.key && write.overlaps(std::nullopt, byte, 1);
        }))
      return true;
  return false;
}

bool TableAccessInfo::sameWhereReadOnly(const TableSnapshot &a, const TableSnapshot &b) const {
  if (a.size() != b.size())
    return false;
  for (auto left = a.begin(), right = b.begin(); left != a.end(); ++left, ++right)
    if (left->first != right->first || !sameWhereReadOnly(left->first, left->second, right->second))
      return false;
  return true;
}

bool TableAccessInfo::sameWhereReadOnly(const std::string &table, const TableContents &one,
                                        const TableContents &other) const {
  if (one.complete != other.complete || one.unlistedValue != other.unlistedValue ||
      one.probedKeys != other.probedKeys || one.storedTables != other.storedTables)
    return false;
  auto usage = tables.find(table);
  if (usage == tables.end())
    return one.entries == other.entries;
  const TableUsage &use = usage->second;
  // The bytes of an entry's value the data plane may write: those of
  // writes to any key, computed once per value size, and those of writes
  // to this entry's key.
  std::map<uint64_t, std::vector<bool>> anyKey;
  // Writes that name a key, by key: a program that counts into each entry
  // by a constant key (a rule's hit counter, unrolled over 512 rules) has
  // as many such writes as the table has entries.
  std::map<Bytes, std::vector<const ValueWrite *>> byKey;
  for (const ValueWrite &write : use.valueWrites)
    if (write.key)
      byKey[*write.key].push_back(&write);
  std::vector<bool> keyed; // the last entry's, when some write names its key
  auto writtenOf = [&](const TableEntry &entry) -> const std::vector<bool> & {
    uint64_t size = entry.value ? entry.value->size() : entry.cpuZero.size();
    auto mark = [&](std::vector<bool> &written, const ValueWrite &write) {
      if (write.overlaps(entry.key, 0, ValueWrite::WholeValue))
        for (uint64_t offset = write.offset;
             offset < size &&
             (write.size == ValueWrite::WholeValue || offset < write.offset + write.size);
             ++offset)
          written[offset] = true;
    };
    auto [common, made] = anyKey.try_emplace(size);
    if (made) {
      common->second.assign(size, use.writtenWholesale);
      for (const ValueWrite &write : use.valueWrites)
        if (!write.key)
          mark(common->second, write);
    }
    auto named = byKey.find(entry.key);
    if (named == byKey.end())
      return common->second;
    keyed = common->second;
    for (const ValueWrite *write : named->second)
      mark(keyed, *write);
    return keyed;
  };
  // The entries compared, in key order, one per key (the last listed, as
  // a map assigned in order keeps it). A key with no byte the data plane
  // never writes is left out, unless only the control plane changes the
  // table's keys (key-set-filter answers the others null): then a key
  // added or removed by another writer is a change too.
  auto compared = [&](const TableContents &contents) {
    std::vector<const TableEntry *> rows;
    for (const TableEntry &entry : contents.entries) {
      const std::vector<bool> &written = writtenOf(entry);
      if (!use.keySetWrite || std::find(written.begin(), written.end(), false) != written.end())
        rows.push_back(&entry);
    }
    auto byKey = [](const TableEntry *x, const TableEntry *y) { return x->key < y->key; };
    if (!std::is_sorted(rows.begin(), rows.end(), byKey))
      std::stable_sort(rows.begin(), rows.end(), byKey);
    std::vector<const TableEntry *> last;
    for (size_t i = 0; i < rows.size(); ++i)
      if (i + 1 == rows.size() || rows[i + 1]->key != rows[i]->key)
        last.push_back(rows[i]);
    return last;
  };
  std::vector<const TableEntry *> ones = compared(one), others = compared(other);
  if (ones.size() != others.size())
    return false;
  for (size_t i = 0; i < ones.size(); ++i) {
    const TableEntry &x = *ones[i], &y = *others[i];
    const Bytes &xHeld = x.value ? *x.value : x.cpuZero, &yHeld = y.value ? *y.value : y.cpuZero;
    // Values of another size are another layout: not the same.
    if (x.key != y.key || xHeld.size() != yHeld.size())
      return false;
    const std::vector<bool> &written = writtenOf(x);
    // A byte the CPUs of a per-CPU table do not agree on is never folded:
    // compared as unknown.
    for (size_t offset = 0; offset < xHeld.size(); ++offset) {
      if (written[offset])
        continue;
      bool xKnown = x.value || x.agreed[offset], yKnown = y.value || y.agreed[offset];
      if (xKnown != yKnown || (xKnown && xHeld[offset] != yHeld[offset]))
        return false;
    }
  }
  return true;
}

const AccessSite *TableAccessInfo::siteFor(const CallBase *call) const {
  for (const AccessSite &site : sites)
    if (site.call == call)
      return &site;
  return nullptr;
}

GlobalVariable *resolveTable(Value *operand, const AccessSignatureTable &sigs) {
  SmallVector<const Value *, 4> objects;
  getUnderlyingObjects(operand, objects);
  GlobalVariable *found = nullptr;
  for (const Value *object : objects) {
    auto *global = dyn_cast<GlobalVariable>(const_cast<Value *>(object));
    if (!global || !sigs.isTable(*global) || (found && found != global))
      return nullptr;
    found = global;
  }
  return found;
}

static constexpr const char *SiteIdMetadata = "morpheus.site";

static constexpr const char *SiteCountMetadata = "morpheus.sites";

unsigned accessSiteCount(const Module &module) {
  NamedMDNode *count = module.getNamedMetadata(SiteCountMetadata);
  if (!count || count->getNumOperands() != 1)
    return 0;
  return unsigned(
      mdconst::extract<ConstantInt>(count->getOperand(0)->getOperand(0))->getZExtValue());
}

// The key and value arguments of an access call that the backend
// guarantees are only read, never captured (annotateAccessCalls says so in
// attributes, dropAccessCallFacts takes them back).
static SmallVector<unsigned, 2> onlyReadArguments(const CallBase &call,
                                                  const AccessSignature &sig,
                                                  const AccessSignatureTable &sigs) {
  SmallVector<unsigned, 2> arguments;
  for (std::optional<unsigned> arg : {sig.keyArg, sig.valueArg})
    if (arg && *arg < call.arg_size() && call.getArgOperand(*arg)->getType()->isPointerTy() &&
        sigs.onlyReadsArgument(call, *arg))
      arguments.push_back(*arg);
  return arguments;
}

void annotateAccessCalls(Module &module, const AccessSignatureTable &sigs) {
  unsigned nextId = 0;
  for (Function &function : module)
    for (Instruction &inst : instructions(function)) {
      auto *call = dyn_cast<CallBase>(&inst);
      if (!call)
        continue;
      std::optional<AccessSignature> sig = sigs.match(*call);
      if (!sig)
        continue;
      LLVMContext &context = module.getContext();
      call->setMetadata(
          SiteIdMetadata,
          MDNode::get(context, ConstantAsMetadata::get(ConstantInt::get(
                                   Type::getInt32Ty(context), nextId++))));
      for (unsigned arg : onlyReadArguments(*call, *sig, sigs)) {
        call->addParamAttr(arg, Attribute::NoCapture);
        call->addParamAttr(arg, Attribute::ReadOnly);
      }
    }
  LLVMContext &context = module.getContext();
  NamedMDNode *count = module.getOrInsertNamedMetadata(SiteCountMetadata);
  count->clearOperands();
  count->addOperand(MDNode::get(
      context, ConstantAsMetadata::get(ConstantInt::get(Type::getInt32Ty(context), nextId))));
}

void dropAccessCallFacts(Module &module, const AccessSignatureTable &sigs) {
  for (Function &function : module)
    for (Instruction &inst : instructions(function))
      if (auto *call = dyn_cast<CallBase>(&inst))
        if (std::optional<AccessSignature> sig = sigs.match(*call))
          for (unsigned arg : onlyReadArguments(*call, *sig, sigs)) {
            call->removeParamAttr(arg, Attribute::NoCapture);
            call->removeParamAttr(arg, Attribute::ReadOnly);
          }
}

std::vector<std::string> AccessSite::possibleTables() const {
  if (!table.empty())
    return {table};
  std::vector<std::string> tables = mergedTables;
  tables.insert(tables.end(), innerCandidates.begin(), innerCandidates.end());
  return tables;
}

std::string operandDescription(const AccessSite &site) {
  if (!site.table.empty())
    return site.table;
  std::vector<std::string> parts;
  if (!site.outerTables.empty())
    parts.push_back("an inner map of " + join(site.outerTables, ", "));
  parts.insert(parts.end(), site.mergedTables.begin(), site.mergedTables.end());
  return parts.empty() ? "an unresolved table" : join(parts, " or ");
}

std::string locationOf(const Instruction &inst) {
  const DebugLoc &loc = inst.getDebugLoc();
  if (!loc)
    return "";
  // Line 0 is LLVM's merged location: clang's O2 made one instruction of
  // several on different lines (the stores of both arms of an if/else sunk
  // into one), keeping only their nearest common scope. That scope's line
  // (the block or function holding all of them) is the one true line left.
  unsigned line = loc.getLine();
  for (const DIScope *scope = loc->getScope(); !line && scope; scope = scope->getScope()) {
    if (const auto *block = dyn_cast<DILexicalBlock>(scope))
      line = block->getLine();
    else if (const auto *subprogram = dyn_cast<DISubprogram>(scope))
      line = subprogram->getLine();
    if (isa<DISubprogram>(scope))
      break;
  }
  return (sys::path::filename(loc->getFilename()) + ":" + Twine(line)).str();
}

namespace {

class Analyzer {
public:
  Analyzer(Module &module, const AccessSignatureTable &sigs,
           const TableCatalog *catalog, FunctionAnalysisManager &fam)
      : module(module), sigs(sigs), catalog(catalog), fam(fam),
        dl(module.getDataLayout()) {}

  TableAccessInfo run();

private:
  void collectSites();
  void checkTableUses();
  void checkLookupResult(AccessSite &site);
  void markWritten(const std::string &table, std::string reason);
  void markValueWritten(const std::string &table, ValueWrite write);
  void markAllWritten(const std::string &reason);
  void markUntied(const std::string &table, const std::string &reason);
  void markKeySetWritten(const std::string &table, const std::string &reason);
  std::optional<std::vector<std::string>> callbackTables(Value *operand);
  std::optional<std::vector<std::string>> innerCandidates(Value *operand,
                                                          std::vector<std::string> &outers,
                                                          std::vector<std::string> &merged,
                                                          CallBase *&outerLookup);
  void classifyValue(Value *value, KeyProvenance &into, unsigned depth);
  void classifyPointee(Value *pointer, KeyProvenance &into, unsigned depth);
  void keepFramesOfStaleKeys();

  Module &module;
  const AccessSignatureTable &sigs;
  const TableCatalog *catalog;
  FunctionAnalysisManager &fam;
  const DataLayout &dl;
  TableAccessInfo info;
};

TableAccessInfo Analyzer::run() {
  for (GlobalVariable &global : module.globals())
    if (sigs.isTable(global)) {
      TableUsage &usage = info.tables[global.getName().str()];
      usage.name = global.getName().str();
    }
  // A table another loader writes, kept generic by policy, is written
  // wholesale as far as every pass is concerned, first of all: its reason
  // is the one reports give.
  if (catalog)
    for (const auto &[name, table] : *catalog)
      if (table.keptGeneric && info.tables.count(name)) {
        markWritten(name, KeptGenericReason);
        markUntied(name, KeptGenericReason);
        markKeySetWritten(name, KeptGenericReason);
      }
  collectSites();
  checkTableUses();
  for (AccessSite &site : info.sites)
    if (site.signature.kind == AccessKind::Lookup)
      checkLookupResult(site);
  keepFramesOfStaleKeys();
  return std::move(info);
}

// The stale bytes a key's padding holds were left there by earlier code
// on the same stack: the function's own temporaries that shared the slot
// (stack colouring), the frames of functions called before it, its
// callers' frames. A version that changed any of that code would compare
// other bytes, whether or not the lookup itself is rewritten: every root
// reaching such a lookup (through calls and callbacks it runs) keeps
// everything it reaches as the original's.
void Analyzer::keepFramesOfStaleKeys() {
  std::map<const Function *, const AccessSite *> staleLookups;
  for (const AccessSite &site : info.sites)
    if (site.key.unwritten)
      staleLookups.try_emplace(site.call->getFunction(), &site);
  if (staleLookups.empty())
    return;
  for (Function *root : guardRoots(module, sigs)) {
    std::set<Function *> reached = reachableFrom(root, /*throughAddresses=*/true);
    const AccessSite *stale = nullptr;
    for (Function *function : reached)
      if (auto found = staleLookups.find(function); found != staleLookups.end()) {
        stale = found->second;
        break;
      }
    if (!stale)
      continue;
    std::string reason =
        "runs under '" + root->getName().str() + "', which reaches a lookup whose key may " +
        "hold the stack's stale bytes (site #" + std::to_string(stale->id) + " in " +
        stale->function + (stale->location.empty() ? "" : " at " + stale->location) +
        "): nothing it reaches is rewritten, so every frame, and the bytes that lookup " +
        "compares, stay the original's";
    for (Function *function : reached)
      info.framesKept.try_emplace(function->getName().str(), reason);
  }
  for (AccessSite &site : info.sites)
    if (auto kept = info.framesKept.find(site.function); kept != info.framesKept.end())
      site.framesKept = kept->second;
}

void Analyzer::markWritten(const std::string &table, std::string reason) {
  TableUsage &usage = info.tables[table];
  usage.name = table;
  usage.written = true;
  if (!usage.writtenWholesale)
    usage.wholesaleReason = reason;
  usage.writtenWholesale = true;
  if (!is_contained(usage.writeReasons, reason))
    usage.writeReasons.push_back(std::move(reason));
}

void Analyzer::markValueWritten(const std::string &table, ValueWrite write) {
  TableUsage &usage = info.tables[table];
  usage.name = table;
  usage.written = true;
  std::string reason = write.where;
  if (write.size != ValueWrite::WholeValue)
    reason += " (bytes " + std::to_string(write.offset) + ".." +
              std::to_string(write.offset + write.size - 1) + ")";
  if (write.key)
    reason += " (key " + toHex(*write.key) + ")";
  if (!is_contained(usage.writeReasons, reason))
    usage.writeReasons.push_back(std::move(reason));
  usage.valueWrites.push_back(std::move(write));
}

// A table operand that is the result of lookups in tables of tables can be
// any table stored there; of the program's own tables, only those that fit
// every such outer table's inner template (the kernel refuses the others).
// An operand merging tables of the program (phis, selects; with inner maps
// or not) can be each of them: those go to `merged`. nullopt when the
// operand is anything else, or an outer table's template is unknown.
std::optional<std::vector<std::string>>
Analyzer::innerCandidates(Value *operand, std::vector<std::string> &outers,
                          std::vector<std::string> &merged, CallBase *&outerLookup) {
  if (!catalog)
    return std::nullopt;
  SmallVector<const Value *, 4> objects;
  getUnderlyingObjects(operand, objects);
  std::vector<const TableTemplate *> templates;
  std::vector<std::string> globals; // `merged` once the whole operand is known
  for (const Value *object : objects) {
    if (auto *global = dyn_cast<GlobalVariable>(object); global && sigs.isTable(*global)) {
      if (!is_contained(globals, global->getName()))
        globals.push_back(global->getName().str());
      continue;
    }
    auto *call = dyn_cast<CallBase>(object);
    std::optional<AccessSignature> sig = call ? sigs.match(*call) : std::nullopt;
    if (!sig || sig->kind != AccessKind::Lookup || sig->tableArg >= call->arg_size())
      return std::nullopt;
    GlobalVariable *outer =
        resolveTable(const_cast<CallBase *>(call)->getArgOperand(sig->tableArg), sigs);
    auto entry = outer ? catalog->find(outer->getName().str()) : catalog->end();
    if (entry == catalog->end() || !entry->second.innerTemplate)
      return std::nullopt;
    templates.push_back(&*entry->second.innerTemplate);
    if (!is_contained(outers, entry->first))
      outers.push_back(entry->first);
  }
  if (templates.empty() && globals.empty())
    return std::nullopt;
  merged = std::move(globals);
  if (objects.size() == 1 && merged.empty())
    outerLookup = const_cast<CallBase *>(cast<CallBase>(objects.front()));
  std::vector<std::string> candidates;
  for (const auto &[name, table] : *catalog)
    if (info.tables.count(name) && !is_contained(merged, name) &&
        any_of(templates, [&](const TableTemplate *inner) { return table.fits(*inner); }))
      candidates.push_back(name);
  return candidates;
}

// A callback's table parameter (bpf_for_each_map_elem hands its callback
// the map it walks) is the table of the call that runs the callback. When
// the callback is static and only ever handed to such helpers, each at the
// parameter the helper fills with its table, the operand is one of those
// calls' tables (or of the program's tables it merges the parameter with):
// those tables. nullopt when no callback parameter is involved, or one is
// used otherwise, or a call's table is not one table of the program.
std::optional<std::vector<std::string>> Analyzer::callbackTables(Value *operand) {
  SmallVector<const Value *, 4> objects;
  getUnderlyingObjects(operand, objects);
  std::vector<std::string> tables;
  auto add = [&](const GlobalVariable &table) {
    if (!is_contained(tables, table.getName()))
      tables.push_back(table.getName().str());
  };
  bool handed = false;
  for (const Value *object : objects) {
    if (auto *global = dyn_cast<GlobalVariable>(object); global && sigs.isTable(*global)) {
      add(*global);
      continue;
    }
    auto *parameter = dyn_cast<Argument>(object);
    if (!parameter)
      return std::nullopt;
    const Function &callback = *parameter->getParent();
    if (!callback.hasLocalLinkage() || callback.use_empty())
      return std::nullopt;
    for (const Use &use : callback.uses()) {
      auto *call = dyn_cast<CallBase>(use.getUser());
      std::optional<AccessSignature> sig = call ? sigs.match(*call) : std::nullopt;
      if (!sig || !sig->callback || !call->isArgOperand(&use) ||
          call->getArgOperandNo(&use) != sig->callback->argument ||
          parameter->getArgNo() != sig->callback->tableParameter ||
          sig->tableArg >= call->arg_size())
        return std::nullopt;
      GlobalVariable *table =
          resolveTable(const_cast<CallBase *>(call)->getArgOperand(sig->tableArg), sigs);
      if (!table)
        return std::nullopt;
      add(*table);
    }
    handed = true;
  }
  if (!handed)
    return std::nullopt;
  llvm::sort(tables); // the order of uses is no order for reports
  return tables;
}

void Analyzer::markAllWritten(const std::string &reason) {
  for (auto &[name, usage] : info.tables) {
    markWritten(name, reason);
    markUntied(name, reason);
    markKeySetWritten(name, reason);
  }
}

void Analyzer::markKeySetWritten(const std::string &table, const std::string &reason) {
  TableUsage &usage = info.tables[table];
  if (!usage.keySetWrite)
    usage.keySetWrite = reason;
}

void Analyzer::markUntied(const std::string &table, const std::string &reason) {
  TableUsage &usage = info.tables[table];
  if (!usage.untiedWrite)
    usage.untiedWrite = reason;
}

void Analyzer::collectSites() {
  for (Function &function : module) {
    if (function.isDeclaration())
      continue;
    for (Instruction &inst : instructions(function)) {
      auto *call = dyn_cast<CallBase>(&inst);
      if (!call)
        continue;
      std::optional<AccessSignature> sig = sigs.match(*call);
      if (!sig || sig->tableArg >= call->arg_size())
        continue;
      AccessSite site;
      site.id = info.sites.size();
      if (MDNode *tag = call->getMetadata(SiteIdMetadata))
        site.id = mdconst::extract<ConstantInt>(tag->getOperand(0))->getZExtValue();
      site.call = call;
      site.signature = *sig;
      site.function = function.getName().str();
      site.location = locationOf(*call);
      std::string where = sig->name + " in " + site.function +
                          (site.location.empty() ? "" : " at " + site.location);
      Value *operand = call->getArgOperand(sig->tableArg);
      GlobalVariable *table = resolveTable(operand, sigs);
      std::optional<std::vector<std::string>> inner;
      if (!table) {
        if (std::optional<std::vector<std::string>> handed = callbackTables(operand)) {
          if (handed->size() == 1) {
            table = module.getNamedGlobal(handed->front());
          } else {
            site.mergedTables = std::move(*handed);
            inner.emplace();
          }
        } else {
          inner = innerCandidates(operand, site.outerTables, site.mergedTables, site.outerLookup);
        }
      }
      if (table)
        site.table = table->getName().str();
      else if (inner)
        site.innerCandidates = *inner;
      std::vector<std::string> possible = site.possibleTables();
      if (sig->keyArg && *sig->keyArg < call->arg_size() &&
          call->getArgOperand(*sig->keyArg)->getType()->isPointerTy()) {
        Value *key = call->getArgOperand(*sig->keyArg);
        classifyPointee(key, site.key, 0);
        // The key's bytes are read at the size of the table's key: one
        // size for every table the operand may be (inner candidates fit
        // one template; merged tables may differ), else no constant key.
        std::string keyed = possible.empty() ? "" : possible.front();
        auto keySize = [&](const std::string &name) {
          auto it = catalog->find(name);
          return it == catalog->end() ? 0u : it->second.keySize;
        };
        if (catalog && !keyed.empty() && all_of(possible, [&](const std::string &name) {
              return keySize(name) == keySize(keyed);
            }))
          if (auto it = catalog->find(keyed); it != catalog->end()) {
            KeyBytes bytes = keyBytes(*call, key, it->second.keySize, fam);
            site.key.constantKey = bytes.constantKey();
            if (!site.key.constantKey)
              site.key.constantUnproven = bytes.notConstant;
            if (sig->kind == AccessKind::Lookup)
              site.key.unwritten = std::move(bytes.unwritten);
            if (it->second.match == TableMatch::LongestPrefix && bytes.constant.size() >= 4 &&
                std::all_of(bytes.constant.begin(), bytes.constant.begin() + 4,
                            [](const auto &byte) { return byte.has_value(); })) {
              uint32_t value = 0;
              for (unsigned i = 0; i < 4; ++i)
                value |= uint32_t(*bytes.constant[dl.isLittleEndian() ? i : 3 - i]) << (8 * i);
              site.key.prefixLength = value;
            }
          }
      }
      bool writes = sig->kind == AccessKind::Update ||
                    sig->kind == AccessKind::Delete ||
                    sig->kind == AccessKind::OtherWrite;
      // An update or delete with a constant key changes that key alone.
      bool keyedWrite = sig->kind == AccessKind::Update || sig->kind == AccessKind::Delete;
      auto markSiteWrite = [&](const std::string &name, const std::string &why) {
        if (keyedWrite && site.key.constantKey)
          markValueWritten(name, {site.key.constantKey, 0, ValueWrite::WholeValue, why});
        else
          markWritten(name, why);
      };
      bool keyArgument = sig->keyArg && *sig->keyArg < call->arg_size() &&
                         call->getArgOperand(*sig->keyArg)->getType()->isPointerTy();
      if (writes)
        for (const std::string &name : possible)
          markKeySetWritten(name, where);
      if (table) {
        info.tables[site.table].siteCount++;
        if (writes)
          markSiteWrite(site.table, where);
        if (writes && !(keyedWrite && keyArgument))
          markUntied(site.table, where);
      } else if (inner) {
        if (writes)
          for (const std::string &candidate : possible) {
            std::string through = where + " (through " + operandDescription(site) + ")";
            markSiteWrite(candidate, through);
            markUntied(candidate, through);
          }
      } else if (writes || sig->kind == AccessKind::Lookup) {
        // A site whose table the analysis cannot name could touch any table.
        markAllWritten("unresolved table operand of " + where);
      }
      info.sites.push_back(std::move(site));
    }
  }
}

// Every use of a table global must be the table operand of a recognised
// access; anything else (stored, passed to a function, compared) means the
// table escapes the analysis and is treated as written.
void Analyzer::checkTableUses() {
  for (GlobalVariable &global : module.globals()) {
    if (!sigs.isTable(global))
      continue;
    SmallVector<const Use *, 16> worklist;
    for (const Use &use : global.uses())
      worklist.push_back(&use);
    SmallPtrSet<const Value *, 16> seen;
    while (!worklist.empty()) {
      const Use *use = worklist.pop_back_val();
      const User *user = use->getUser();
      if (!seen.insert(user).second && !isa<CallBase>(user))
        continue;
      if (isa<ConstantExpr>(user) || isa<BitCastInst>(user) ||
          isa<AddrSpaceCastInst>(user) || isa<PHINode>(user) ||
          (isa<SelectInst>(user) && use->getOperandNo() != 0)) {
        for (const Use &next : user->uses())
          worklist.push_back(&next);
        continue;
      }
      // llvm.used / llvm.compiler.used only keep the table alive; a table
      // of tables' initializer stores the table in it (the inner sites
      // account for what is done with it there).
      if (isa<ConstantAggregate>(user)) {
        bool onlyHeld = true;
        for (const Use &next : user->uses()) {
          auto *holder = dyn_cast<GlobalVariable>(next.getUser());
          if (holder && (holder->getName().starts_with("llvm.") || sigs.isTable(*holder)))
            continue;
          if (isa<ConstantAggregate>(next.getUser()))
            worklist.push_back(&next);
          else
            onlyHeld = false;
        }
        if (onlyHeld)
          continue;
      }
      if (auto *call = dyn_cast<CallBase>(user)) {
        std::optional<AccessSignature> sig = sigs.match(*call);
        if (sig && use->getOperandNo() == sig->tableArg)
          continue;
        if (isa<DbgInfoIntrinsic>(call))
          continue;
      }
      std::string where;
      if (auto *inst = dyn_cast<Instruction>(user))
        where = locationOf(*inst);
      std::string reason =
          "table used outside a recognised access" + (where.empty() ? "" : " at " + where);
      markWritten(global.getName().str(), reason);
      markUntied(global.getName().str(), reason);
      markKeySetWritten(global.getName().str(), reason);
      break;
    }
  }
}

// Follows every pointer derived from a lookup's result and records writes,
// comparisons with other pointers, and functions that need the memory
// writable. A write through the result changes that entry's value alone
// (the verifier keeps the pointer inside it): its key's when the lookup's
// key is constant, and only the bytes written when the offset from the
// result is known (constant GEPs); a pointer that escapes may write any
// byte of the entry later.
void Analyzer::checkLookupResult(AccessSite &site) {
  std::vector<std::string> targets = site.possibleTables();
  if (targets.empty() && site.outerTables.empty())
    return;
  constexpr int64_t Unknown = INT64_MIN;
  SmallVector<std::pair<Value *, int64_t>, 16> worklist{{site.call, 0}};
  // The offset from this site's result each derived pointer was reached
  // with. A phi or select keeps the offset: when it yields this site's
  // pointer, that is where it points; when it yields another pointer, the
  // write is not into this site's entry (other sites record their own). A
  // value reached at two offsets (phi(p, p + 8)) is walked again with the
  // offset unknown.
  DenseMap<Value *, int64_t> seen{{site.call, 0}};
  // Pointers derived through a phi or select may be another entry's: a
  // write through them is not tied to this site's key (guard-table-writes).
  SmallPtrSet<Value *, 16> merged;
  std::string looked = operandDescription(site);
  std::string from = " (value of " + looked + " looked up" +
                     (site.location.empty() ? "" : " at " + site.location) + ")";
  Value *current = nullptr; // the pointer whose uses are being followed
  auto follow = [&](Value *derived, int64_t offset) {
    if (merged.count(current))
      merged.insert(derived);
    auto [it, inserted] = seen.try_emplace(derived, offset);
    if (!inserted) {
      if (it->second == offset || it->second == Unknown)
        return;
      it->second = offset = Unknown;
    }
    worklist.push_back({derived, offset});
  };
  // `writer` is the instruction that writes through the result, or null
  // when the pointer escapes to where the write cannot be placed.
  auto written = [&](int64_t offset, std::optional<uint64_t> size, std::string why,
                     Instruction *writer = nullptr) {
    if (writer && !merged.count(current)) {
      if (!is_contained(site.resultWrites, writer)) // a value walked again
        site.resultWrites.push_back(writer);
    } else {
      for (const std::string &table : targets)
        markUntied(table, why);
    }
    ValueWrite write{site.key.constantKey, 0, ValueWrite::WholeValue, std::move(why)};
    if (offset != Unknown && offset >= 0 && size && *size) {
      write.offset = offset;
      write.size = *size;
    }
    for (const std::string &table : targets)
      markValueWritten(table, write);
  };
  auto isTableOfTables = [&](const std::string &table) {
    if (!catalog)
      return false;
    auto it = catalog->find(table);
    return it != catalog->end() && it->second.innerTemplate.has_value();
  };
  while (!worklist.empty()) {
    auto [pointer, offset] = worklist.pop_back_val();
    current = pointer;
    for (Use &use : pointer->uses()) {
      auto *user = cast<Instruction>(use.getUser());
      std::string at = locationOf(*user);
      at = at.empty() ? "" : " at " + at;
      if (auto *gep = dyn_cast<GetElementPtrInst>(user)) {
        APInt delta(dl.getIndexTypeSizeInBits(gep->getType()), 0);
        bool known = offset != Unknown && use.getOperandNo() == 0 &&
                     gep->accumulateConstantOffset(dl, delta);
        follow(user, known ? offset + delta.getSExtValue() : Unknown);
      } else if (isa<BitCastInst>(user) || isa<AddrSpaceCastInst>(user) ||
                 isOpaqueCopy(*user)) {
        // An opaque copy (a rewritten lookup's key read as memory holds it,
        // when the key lies in this value) is the same pointer.
        follow(user, offset);
      } else if (isa<PHINode>(user) ||
                 (isa<SelectInst>(user) && use.getOperandNo() != 0)) {
        merged.insert(user);
        follow(user, offset);
      } else if (auto *compare = dyn_cast<ICmpInst>(user)) {
        // Testing for null is what lookups are for; any other comparison
        // observes the pointer's identity.
        auto *other = dyn_cast<Constant>(compare->getOperand(1 - use.getOperandNo()));
        if (!other || !other->isNullValue())
          for (const std::string &table : targets) {
            TableUsage &usage = info.tables[table];
            std::string where = "compared with another pointer" + at + from;
            if (!is_contained(usage.pointerComparisons, where))
              usage.pointerComparisons.push_back(std::move(where));
          }
      } else if (isa<LoadInst>(user)) {
        // Reading does not change the table.
      } else if (auto *store = dyn_cast<StoreInst>(user)) {
        if (use.getOperandNo() == store->getPointerOperandIndex()) {
          written(offset, dl.getTypeStoreSize(store->getValueOperand()->getType()),
                  "store" + at + from, store);
        } else if (std::optional<std::vector<SlotRead>> reads = readsOfStoredBytes(*store, dl)) {
          // Kept in a stack slot (a pointer out-parameter of a function
          // that is not inlined): the loads of the slot read it back, or
          // whatever else the slot held, so what they yield is merged. A
          // load of part of the bytes is followed too: whatever it is used
          // for the walk either understands or takes as an escape.
          for (const SlotRead &read : *reads) {
            merged.insert(read.load);
            follow(read.load, read.exact ? offset : Unknown);
          }
        } else {
          written(Unknown, std::nullopt, "pointer stored to memory" + at + from);
        }
      } else if (auto *rmw = dyn_cast<AtomicRMWInst>(user)) {
        written(offset, dl.getTypeStoreSize(rmw->getValOperand()->getType()),
                "atomic update" + at + from, rmw);
      } else if (auto *xchg = dyn_cast<AtomicCmpXchgInst>(user)) {
        written(offset, dl.getTypeStoreSize(xchg->getNewValOperand()->getType()),
                "atomic update" + at + from, xchg);
      } else if (auto *intrinsic = dyn_cast<IntrinsicInst>(user);
                 intrinsic && (intrinsic->isLifetimeStartOrEnd() ||
                               isa<DbgInfoIntrinsic>(intrinsic))) {
      } else if (auto *transfer = dyn_cast<MemTransferInst>(user);
                 transfer && use.getOperandNo() == 1) {
        // Source of a copy: read only.
      } else if (auto *memory = dyn_cast<MemIntrinsic>(user)) {
        std::optional<uint64_t> length;
        if (auto *constant = dyn_cast<ConstantInt>(memory->getLength());
            constant && use.getOperandNo() == 0)
          length = constant->getZExtValue();
        written(length ? offset : Unknown, length, "memory intrinsic writes" + at + from,
                memory);
      } else if (auto *call = dyn_cast<CallBase>(user)) {
        unsigned argNo = call->getArgOperandNo(&use);
        std::optional<AccessSignature> sig = sigs.match(*call);
        if (sig && argNo == sig->tableArg && !site.table.empty() &&
            isTableOfTables(site.table))
          continue; // an inner map used as a table: that access is a site of its own
        if (Function *callee = call->getCalledFunction();
            callee && !site.valueNeedsWritableMemory && !callee->isIntrinsic() &&
            sigs.requiresWritableArguments(*callee))
          site.valueNeedsWritableMemory =
              "value passed to global function '" + callee->getName().str() + "'" + at;
        bool readOnly = false;
        if (sig)
          readOnly = (sig->keyArg == argNo || sig->valueArg == argNo) &&
                     sigs.onlyReadsArgument(*call, argNo);
        else if (call->getCalledFunction())
          readOnly = call->onlyReadsMemory(argNo) &&
                     call->doesNotCapture(argNo);
        else
          readOnly = sigs.onlyReadsArgument(*call, argNo);
        if (readOnly)
          continue;
        // A static function of the program: its parameter is followed
        // there (merged: its other calls pass other pointers).
        if (Function *callee = call->getCalledFunction();
            !sig && callee && call->isArgOperand(&use) && callee->hasLocalLinkage() &&
            !callee->isDeclaration() && !callee->isVarArg() &&
            call->getFunctionType() == callee->getFunctionType()) {
          Argument *parameter = callee->getArg(argNo);
          merged.insert(parameter);
          follow(parameter, offset);
          continue;
        }
        std::string name = sig ? sig->name : "a call";
        if (std::optional<uint64_t> bytes = sigs.bytesWrittenThrough(*call, argNo))
          written(offset, *bytes, name + " writes its object" + at + from, call);
        else
          written(Unknown, std::nullopt, "passed to a call that may write" + at + from);
      } else if (std::optional<std::vector<CallBase *>> calls =
                     isa<ReturnInst>(user) ? onlyDirectCalls(*user->getFunction())
                                           : std::nullopt) {
        // Returned by a static function: each call yields it, or what the
        // function's other returns give.
        for (CallBase *call : *calls) {
          merged.insert(call);
          follow(call, offset);
        }
      } else {
        // ptrtoint, a return to where the analysis cannot follow, or
        // anything else it does not understand.
        written(Unknown, std::nullopt, "pointer escapes the analysis" + at + from);
      }
    }
  }
}

void Analyzer::classifyPointee(Value *pointer, KeyProvenance &into,
                               unsigned depth) {
  if (depth > 8) {
    into.other = true;
    return;
  }
  SmallVector<const Value *, 4> objects;
  getUnderlyingObjects(pointer, objects);
  for (const Value *constObject : objects) {
    Value *object = const_cast<Value *>(constObject);
    if (auto *global = dyn_cast<GlobalVariable>(object)) {
      (global->isConstant() ? into.constant : into.other) = true;
    } else if (isa<Argument>(object)) {
      into.context = true;
    } else if (isa<CallBase>(object) && sigs.match(*cast<CallBase>(object))) {
      into.table = true;
    } else if (auto *cast = dyn_cast<IntToPtrInst>(object)) {
      // Packet pointers are integers loaded from the context, turned into
      // pointers: anything read through them comes from the packet.
      KeyProvenance base;
      classifyValue(cast->getOperand(0), base, depth + 1);
      (base.context ? into.packet : into.other) = true;
    } else if (isa<AllocaInst>(object)) {
      for (User *user : object->users()) {
        if (auto *store = dyn_cast<StoreInst>(user)) {
          if (store->getPointerOperand() == object)
            classifyValue(store->getValueOperand(), into, depth + 1);
        } else if (auto *gep = dyn_cast<GetElementPtrInst>(user)) {
          for (User *inner : gep->users())
            if (auto *store = dyn_cast<StoreInst>(inner);
                store && store->getPointerOperand() == gep)
              classifyValue(store->getValueOperand(), into, depth + 1);
        } else if (auto *set = dyn_cast<MemSetInst>(user)) {
          classifyValue(set->getValue(), into, depth + 1);
        } else if (auto *copy = dyn_cast<MemTransferInst>(user);
                   copy && copy->getDest() == object) {
          classifyPointee(copy->getSource(), into, depth + 1);
        }
      }
    } else {
      into.other = true;
    }
  }
}

void Analyzer::classifyValue(Value *value, KeyProvenance &into, unsigned depth) {
  if (depth > 8) {
    into.other = true;
    return;
  }
  if (isa<Constant>(value)) {
    into.constant = true;
  } else if (auto *load = dyn_cast<LoadInst>(value)) {
    classifyPointee(load->getPointerOperand(), into, depth + 1);
  } else if (isa<Argument>(value)) {
    into.context = true;
  } else if (isa<CallBase>(value)) {
    into.other = true;
  } else if (auto *inst = dyn_cast<Instruction>(value)) {
    for (Value *operand : inst->operands())
      if (!isa<BasicBlock>(operand))
        classifyValue(operand, into, depth + 1);
  } else {
    into.other = true;
  }
}

} // namespace

TableAccessInfo analyzeTableAccesses(Module &module,
                                     const AccessSignatureTable &sigs,
                                     const TableCatalog *catalog,
                                     FunctionAnalysisManager &fam) {
  return Analyzer(module, sigs, catalog, fam).run();
}

TableAccessInfo TableAccessAnalysis::run(Module &module,
                                         ModuleAnalysisManager &mam) {
  auto &fam =
      mam.getResult<FunctionAnalysisManagerModuleProxy>(module).getManager();
  return analyzeTableAccesses(module, *sigs, catalog, fam);
}

} // namespace morpheus::core
