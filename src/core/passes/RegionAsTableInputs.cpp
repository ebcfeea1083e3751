#include "core/passes/RegionAsTableInputs.h"

#include "core/OpaqueValue.h"

#include <llvm/Analysis/ConstantFolding.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/Instructions.h>

using namespace llvm;

namespace morpheus::core::region_as_table {

std::string nameOf(const Value &value) {
  std::string text;
  raw_string_ostream out(text);
  value.printAsOperand(out, false);
  return out.str();
}

std::optional<std::string> InputDomain::collect(Value *value) {
  if (!visited.insert(value).second)
    return std::nullopt;
  if (isa<ConstantPointerNull>(value)) {
    constantIds[cast<Constant>(value)] =
        classOf(std::nullopt, [&] { return cast<Constant>(value); });
    return std::nullopt;
  }
  if (auto *constant = dyn_cast<Constant>(value)) {
    std::optional<Bytes> bytes = constantBytes(*constant);
    if (!bytes)
      return nameOf(*value) + " points to no constant bytes";
    constantIds[constant] = classOf(std::move(*bytes), [&] { return constant; });
    return tooMany();
  }
  if (auto *phi = dyn_cast<PHINode>(value)) {
    for (Value *incoming : phi->incoming_values())
      if (std::optional<std::string> why = collect(incoming))
        return why;
    return std::nullopt;
  }
  if (auto *select = dyn_cast<SelectInst>(value)) {
    if (std::optional<std::string> why = collect(select->getTrueValue()))
      return why;
    return collect(select->getFalseValue());
  }
  if (auto *call = dyn_cast<CallBase>(value)) {
    if (isEmptyAsmCopy(*call))
      return collect(call->getArgOperand(0));
    return collectLookup(*call);
  }
  if (auto *gep = dyn_cast<GetElementPtrInst>(value))
    return collectEntry(*gep);
  return nameOf(*value) + " is neither a lookup's answer nor a constant";
}

Value *InputDomain::buildId(Value *value) {
  if (auto found = ids.find(value); found != ids.end())
    return found->second;
  Type *i64 = Type::getInt64Ty(module.getContext());
  if (auto *constant = dyn_cast<Constant>(value))
    return ids[value] = ConstantInt::get(i64, constantIds.at(constant));
  if (auto *phi = dyn_cast<PHINode>(value)) {
    PHINode *id = PHINode::Create(i64, phi->getNumIncomingValues(), phi->getName() + ".class");
    id->insertAfter(phi);
    ids[value] = id;
    for (unsigned i = 0; i < phi->getNumIncomingValues(); ++i)
      id->addIncoming(buildId(phi->getIncomingValue(i)), phi->getIncomingBlock(i));
    return id;
  }
  if (auto *select = dyn_cast<SelectInst>(value)) {
    Value *whenTrue = buildId(select->getTrueValue());
    Value *whenFalse = buildId(select->getFalseValue());
    IRBuilder<> builder(select->getNextNode());
    return ids[value] = builder.CreateSelect(select->getCondition(), whenTrue, whenFalse,
                                             select->getName() + ".class");
  }
  if (auto *call = dyn_cast<CallBase>(value); call && isEmptyAsmCopy(*call))
    return ids[value] = buildId(call->getArgOperand(0));
  const Leaf &leaf = leaves.at(value);
  auto *instruction = cast<Instruction>(value);
  IRBuilder<> builder(instruction->getNextNode());
  // The class of the index (below leaf.slotClass's size: an entry
  // number, or an array slot); a slot past the array's end is no entry.
  Value *index = builder.CreateZExtOrTrunc(leaf.index ? leaf.index : loadLookupKey(builder, leaf),
                                           i64);
  index = opaqueCopy(builder, index, value->getName() + ".slot");
  Value *inside = builder.CreateICmpULT(index, builder.getInt64(leaf.slotClass.size()));
  Value *slot = builder.CreateSelect(inside, index, builder.getInt64(0));
  GlobalVariable *classes = rewriter.derivedTable(
      leaf.table, "classes" + std::to_string(leaf.number), [&] {
        return ConstantDataArray::get(module.getContext(), ArrayRef<uint8_t>(leaf.slotClass));
      });
  Value *id = builder.CreateZExt(
      builder.CreateLoad(builder.getInt8Ty(),
                         builder.CreateInBoundsGEP(builder.getInt8Ty(), classes, slot),
                         value->getName() + ".class"),
      i64);
  return ids[value] = builder.CreateSelect(inside, id, builder.getInt64(leaf.outsideClass));
}

std::optional<std::string> InputDomain::tooMany() const {
  if (representatives.size() > MaxClasses)
    return "more than " + std::to_string(MaxClasses) + " distinct values";
  return std::nullopt;
}

unsigned InputDomain::classOf(std::optional<Bytes> bytes,
                              function_ref<Constant *()> representative) {
  auto [at, added] = classIds.try_emplace(std::move(bytes), representatives.size());
  if (added)
    representatives.push_back(representative());
  return at->second;
}

Constant *InputDomain::heldBytes(const Bytes &bytes) {
  Constant *init = ConstantDataArray::get(module.getContext(), ArrayRef<uint8_t>(bytes));
  auto *global = new GlobalVariable(module, init->getType(), /*isConstant=*/true,
                                    GlobalValue::PrivateLinkage, init, "__morpheus.class");
  global->setAlignment(Align(8));
  scratch.push_back(global);
  return global;
}

std::optional<Bytes> InputDomain::constantBytes(Constant &pointer) {
  const DataLayout &dl = module.getDataLayout();
  APInt offset(dl.getIndexTypeSizeInBits(pointer.getType()), 0);
  auto *global = dyn_cast<GlobalVariable>(
      pointer.stripAndAccumulateConstantOffsets(dl, offset, /*AllowNonInbounds=*/true));
  if (!global || !global->isConstant() || !global->hasDefinitiveInitializer() ||
      offset.isNegative())
    return std::nullopt;
  uint64_t at = offset.getZExtValue();
  if (std::optional<std::string> table = rewriter.valueArrayTable(*global)) {
    uint64_t stride = rewriter.valueStride(*table);
    if (at % stride)
      return std::nullopt;
    tableNames.insert(*table);
    return slotBytes(*table, at / stride);
  }
  uint64_t size = dl.getTypeAllocSize(global->getValueType());
  if (at >= size || size - at > MaxClassBytes)
    return std::nullopt;
  Bytes bytes;
  Type *i8 = Type::getInt8Ty(module.getContext());
  for (uint64_t i = at; i < size; ++i) {
    auto *byte = dyn_cast_or_null<ConstantInt>(
        ConstantFoldLoadFromConst(global->getInitializer(), i8, APInt(64, i), dl));
    if (!byte)
      return std::nullopt;
    bytes.push_back(byte->getZExtValue());
  }
  return bytes;
}

std::optional<Bytes> InputDomain::slotBytes(const std::string &table, uint64_t slot) const {
  const TableContents &contents = context.snapshot->at(table);
  if (slot < contents.entries.size())
    return contents.entries[slot].value;
  if (slot == contents.entries.size() && contents.unlistedValue)
    return contents.unlistedValue;
  return std::nullopt;
}

Constant *InputDomain::slotPointer(GlobalVariable &values, const std::string &table,
                                   uint64_t slot) {
  Type *i64 = Type::getInt64Ty(module.getContext());
  return ConstantExpr::getInBoundsGetElementPtr(
      Type::getInt8Ty(module.getContext()), &values,
      ConstantInt::get(i64, slot * rewriter.valueStride(table)));
}

std::optional<std::string> InputDomain::collectEntry(GetElementPtrInst &gep) {
  auto *global = dyn_cast<GlobalVariable>(gep.getPointerOperand());
  std::optional<std::string> table = global ? rewriter.valueArrayTable(*global) : std::nullopt;
  auto *scaled = gep.getNumIndices() == 1 && gep.getSourceElementType()->isIntegerTy(8)
                     ? dyn_cast<BinaryOperator>(gep.getOperand(1))
                     : nullptr;
  auto *stride = scaled && scaled->getOpcode() == Instruction::Mul
                     ? dyn_cast<ConstantInt>(scaled->getOperand(1))
                     : nullptr;
  if (!table || !stride || stride->getZExtValue() != rewriter.valueStride(*table))
    return nameOf(gep) + " is an address the analysis does not follow";
  const TableContents &contents = context.snapshot->at(*table);
  uint64_t slots = contents.entries.size() + (contents.unlistedValue ? 1 : 0);
  Leaf leaf{*table, leafNumbers++, scaled->getOperand(0), nullptr, {}, 0};
  for (uint64_t slot = 0; slot < slots; ++slot) {
    std::optional<Bytes> bytes = slotBytes(*table, slot);
    if (!bytes)
      return "an entry of " + *table + " differs between CPUs";
    leaf.slotClass.push_back(
        classOf(std::move(*bytes), [&] { return slotPointer(*global, *table, slot); }));
  }
  // An entry number past the entries is never computed (the
  // representations check it first): any class will do.
  leaf.outsideClass = leaf.slotClass.empty() ? 0 : leaf.slotClass.front();
  tableNames.insert(*table);
  leaves.emplace(&gep, std::move(leaf));
  return tooMany();
}

std::optional<std::string> InputDomain::collectLookup(CallBase &call) {
  const AccessSite *site = info.siteFor(&call);
  if (!site || site->signature.kind != AccessKind::Lookup)
    return nameOf(call) + " is a call, not a lookup";
  if (std::optional<LookupDecline> why = whyNotInlinable(*site, info, *context.catalog))
    return "the lookup of " + site->table + ": " + why->detail;
  if (LookupRewriter::keptOnMissPath(call))
    return "the lookup of " + site->table + " kept for keys the code leaves to it";
  auto contents = context.snapshot->find(site->table);
  const TableInfo &table = context.catalog->at(site->table);
  if (table.match != TableMatch::Index || table.keySize != 4)
    return "the lookup of " + site->table + " (a " + table.typeName +
           ") answers more than a few values";
  if (contents == context.snapshot->end() || !contents->second.complete ||
      (!contents->second.unlistedValue && contents->second.entries.size() < table.maxEntries))
    return "not every slot of " + site->table + " was read";
  if (table.maxEntries > MaxSlots)
    return site->table + " has more than " + std::to_string(MaxSlots) + " slots";
  Leaf leaf{site->table, leafNumbers++, nullptr, &call, {}, 0};
  auto *pointerType = cast<PointerType>(call.getType());
  leaf.outsideClass =
      classOf(std::nullopt, [&] { return ConstantPointerNull::get(pointerType); });
  std::optional<uint8_t> unlistedClass;
  std::vector<uint8_t> slots(table.maxEntries, 0);
  std::vector<bool> listed(table.maxEntries, false);
  for (size_t i = 0; i < contents->second.entries.size(); ++i) {
    const TableEntry &entry = contents->second.entries[i];
    uint32_t slot = entry.key[0] | entry.key[1] << 8 | entry.key[2] << 16 |
                    uint32_t(entry.key[3]) << 24;
    if (!module.getDataLayout().isLittleEndian())
      slot = __builtin_bswap32(slot);
    if (!entry.value)
      return "an entry of " + site->table + " differs between CPUs";
    if (slot >= table.maxEntries)
      continue;
    slots[slot] = classOf(*entry.value, [&] { return heldBytes(*entry.value); });
    listed[slot] = true;
  }
  for (uint32_t slot = 0; slot < table.maxEntries; ++slot)
    if (!listed[slot]) {
      if (!unlistedClass)
        unlistedClass = classOf(*contents->second.unlistedValue, [&] {
          return heldBytes(*contents->second.unlistedValue);
        });
      slots[slot] = *unlistedClass;
    }
  leaf.slotClass = std::move(slots);
  tableNames.insert(site->table);
  lookupCalls.push_back(&call);
  leaves.emplace(&call, std::move(leaf));
  return tooMany();
}

Value *InputDomain::loadLookupKey(IRBuilderBase &builder, const Leaf &leaf) {
  const AccessSite *site = info.siteFor(leaf.lookup);
  Value *key = opaqueCopy(builder, leaf.lookup->getArgOperand(*site->signature.keyArg),
                          leaf.table + ".key.memory");
  return builder.CreateLoad(builder.getInt32Ty(), key, leaf.table + ".key");
}

} // namespace morpheus::core::region_as_table
