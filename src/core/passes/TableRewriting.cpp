// The table passes' shared building blocks (see TableRewriting.h).
// TEST-ONLY switch: MORPHEUS_TEST_BREAK_INLINE=1 makes the key compare chain
// wrong on purpose (last key byte off by one), so tests can prove that the
// differential fuzzer (runtime/Differential) catches a broken pass.
#include "core/passes/TableRewriting.h"

#include "core/TableAccessAnalysis.h"

#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/Transforms/Utils/BasicBlockUtils.h>
#include <llvm/Transforms/Utils/Local.h>
#include <llvm/Support/FormatVariadic.h>

#include <cstdlib>
#include <map>
#include <tuple>

using namespace llvm;

namespace morpheus::core {

void SpecializationLog::record(const AccessSite &site, const char *pass,
                               bool applied, std::string detail) {
  decisions.push_back({site.id, site.table, site.function, site.location, pass,
                       applied, std::move(detail)});
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
  return out;
}

std::optional<std::string> whyNotInlinable(const AccessSite &site,
                                           const TableAccessInfo &info,
                                           const TableCatalog &catalog) {
  if (site.signature.kind != AccessKind::Lookup)
    return "not a lookup";
  if (site.table.empty())
    return "table operand not resolved to one table";
  if (!site.signature.keyArg)
    return "lookup without a key argument";
  auto table = catalog.find(site.table);
  if (table == catalog.end())
    return "table not in the catalog";
  if (!info.isReadOnly(site.table))
    return "table is written by the data plane";
  if (table->second.match != TableMatch::Exact &&
      table->second.match != TableMatch::Index)
    return "lookup semantics of " + table->second.typeName +
           " tables not modelled";
  if (table->second.lookupHasSideEffects)
    return "lookups in " + table->second.typeName + " tables have side effects";
  return std::nullopt;
}

bool rewriteEligibleLookups(Module &module, ModuleAnalysisManager &mam,
                            const TablePassContext &context, SiteRewrite rewrite) {
  const TableAccessInfo &info = mam.getResult<TableAccessAnalysis>(module);
  LookupRewriter rewriter(module, context.constantSection);
  // Copy the sites first: rewriting erases calls the analysis points to.
  std::vector<AccessSite> sites = info.sites;
  bool changed = false;
  for (const AccessSite &site : sites) {
    if (whyNotInlinable(site, info, *context.catalog) ||
        context.unguardedFunctions.count(site.function))
      continue;
    auto contents = context.snapshot->find(site.table);
    if (contents == context.snapshot->end())
      continue;
    changed |= rewrite(site, context.catalog->at(site.table), contents->second,
                       rewriter);
  }
  return changed;
}

Constant *LookupRewriter::valueConstant(const std::string &table,
                                        const Bytes &value) {
  auto [slot, fresh] = values.try_emplace({table, value}, nullptr);
  if (!fresh)
    return slot->second;
  LLVMContext &context = module.getContext();
  Constant *init = ConstantDataArray::get(context, ArrayRef<uint8_t>(value));
  auto *global = new GlobalVariable(
      module, init->getType(), /*isConstant=*/true,
      GlobalValue::PrivateLinkage, init,
      "__morpheus." + table + "." + Twine(values.size() - 1));
  global->setUnnamedAddr(GlobalValue::UnnamedAddr::Global);
  global->setAlignment(Align(8));
  if (!section.empty())
    global->setSection(section);
  slot->second = global;
  return global;
}

void LookupRewriter::replaceWith(CallBase &lookup, Value *result) {
  lookup.replaceAllUsesWith(result);
  lookup.eraseFromParent();
}

namespace {

struct KeyChunk {
  uint32_t offset;
  uint32_t width; // bytes: 8, 4, 2 or 1
};

// Splits a key into the widest loads its known alignment allows, so the BPF
// backend never has to assemble a word from single bytes.
std::vector<KeyChunk> chunksFor(uint32_t keySize, uint64_t alignment) {
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

// TEST-ONLY: with MORPHEUS_TEST_BREAK_INLINE=1 in the environment the key
// compare chain matches the last key byte off by one, a deliberately wrong
// specialization that proves `morpheus fuzz` (tests/kernel/DifferentialTest)
// notices a broken pass. Never set it anywhere else.
bool breakInlineForTests() {
  const char *value = std::getenv("MORPHEUS_TEST_BREAK_INLINE");
  return value && std::string(value) == "1";
}

uint64_t chunkConstant(const Bytes &key, KeyChunk chunk, bool littleEndian) {
  bool broken = breakInlineForTests() && chunk.offset + chunk.width == key.size();
  uint64_t value = 0;
  for (uint32_t i = 0; i < chunk.width; ++i) {
    uint32_t byte = littleEndian ? chunk.width - 1 - i : i;
    uint8_t keyByte = key[chunk.offset + byte];
    if (broken && chunk.offset + byte == key.size() - 1)
      ++keyByte;
    value = (value << 8) | keyByte;
  }
  return value;
}

} // namespace

void LookupRewriter::replaceWithDispatch(
    CallBase &lookup, unsigned keyArg,
    const std::vector<const TableEntry *> &entries, const std::string &table) {
  LLVMContext &context = module.getContext();
  const DataLayout &dl = module.getDataLayout();
  Value *key = lookup.getArgOperand(keyArg);
  auto *pointerType = cast<PointerType>(lookup.getType());
  if (entries.empty()) {
    replaceWith(lookup, ConstantPointerNull::get(pointerType));
    return;
  }
  uint32_t keySize = entries.front()->key.size();

  BasicBlock *head = lookup.getParent();
  BasicBlock *tail = SplitBlock(head, &lookup);
  head->getTerminator()->eraseFromParent();
  IRBuilder<> builder(head);
  builder.SetCurrentDebugLocation(lookup.getDebugLoc());

  // Read the key once, as the helper would have. freeze: bytes the program
  // never wrote (struct padding) compare as whatever they hold, like the
  // helper's memcmp does, instead of letting LLVM fold compares on undef.
  uint64_t alignment = getKnownAlignment(key, dl).value();
  std::vector<KeyChunk> chunks = chunksFor(keySize, alignment);
  std::vector<Value *> words;
  for (KeyChunk chunk : chunks) {
    Type *type = builder.getIntNTy(chunk.width * 8);
    Value *address = chunk.offset ? builder.CreateConstInBoundsGEP1_32(
                                        builder.getInt8Ty(), key, chunk.offset)
                                  : key;
    LoadInst *load = builder.CreateAlignedLoad(
        type, address, Align(std::min<uint64_t>(alignment, chunk.width)),
        table + ".key");
    words.push_back(builder.CreateFreeze(load));
  }

  builder.SetInsertPoint(tail, tail->begin());
  PHINode *result = builder.CreatePHI(pointerType, entries.size() + 1,
                                      table + ".value");
  Function *function = head->getParent();
  BasicBlock *compare = head;
  for (const TableEntry *entry : entries) {
    builder.SetInsertPoint(compare);
    Value *match = nullptr;
    for (size_t i = 0; i < chunks.size(); ++i) {
      Value *equal = builder.CreateICmpEQ(
          words[i], ConstantInt::get(words[i]->getType(),
                                     chunkConstant(entry->key, chunks[i],
                                                   dl.isLittleEndian())));
      match = match ? builder.CreateAnd(match, equal) : equal;
    }
    BasicBlock *hit = BasicBlock::Create(context, table + ".hit", function, tail);
    BasicBlock *next = BasicBlock::Create(context, table + ".next", function, tail);
    builder.CreateCondBr(match, hit, next);
    builder.SetInsertPoint(hit);
    builder.CreateBr(tail);
    result->addIncoming(valueConstant(table, *entry->value), hit);
    compare = next;
  }
  builder.SetInsertPoint(compare);
  builder.CreateBr(tail);
  result->addIncoming(ConstantPointerNull::get(pointerType), compare);
  lookup.replaceAllUsesWith(result);
  lookup.eraseFromParent();
}

} // namespace morpheus::core
