#include "backend/bpf/LegacyMaps.h"

#include "backend/bpf/MapSizes.h"

#include <linux/bpf.h>
#include <llvm/ADT/SmallVector.h>
#include <llvm/BinaryFormat/Dwarf.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/DIBuilder.h>
#include <llvm/IR/DebugInfoMetadata.h>
#include <llvm/IR/DerivedTypes.h>

#include <array>
#include <map>
#include <vector>

using namespace llvm;

namespace morpheus::bpf {

namespace {

// The fields both legacy layouts share, as libbpf's BTF map definitions
// name them.
constexpr std::array<const char *, 5> ConvertedFields = {"type", "key_size", "value_size",
                                                         "max_entries", "map_flags"};
constexpr unsigned TypeField = 0, MaxEntriesField = 3;
// iproute2's `struct bpf_elf_map` goes on with these two (then inner_id,
// inner_idx).
constexpr unsigned IdField = 5, PinningField = 6;
// libbpf's value of a BTF map's `pinning` member that pins by name.
constexpr uint32_t LibbpfPinByName = 1;

// The debug type __array(values, int (void *)) gives a program array's
// member: an array of unknown length of pointers to functions.
DIType *programsMember(DIBuilder &builder, DIBasicType *intType) {
  DIType *untyped = builder.createPointerType(nullptr, 64);
  DISubroutineType *function =
      builder.createSubroutineType(builder.getOrCreateTypeArray({intType, untyped}));
  DINodeArray unknown = builder.getOrCreateArray({builder.getOrCreateSubrange(0, -1)});
  return builder.createArrayType(0, 0, builder.createPointerType(function, 64), unknown);
}

// The names of the members of the struct a legacy definition's debug
// entry describes, in order; empty without them.
std::vector<std::string> memberNames(ArrayRef<DIGlobalVariableExpression *> debug) {
  std::vector<std::string> names;
  if (debug.empty())
    return names;
  const DIType *type = debug.front()->getVariable()->getType();
  while (auto *derived = dyn_cast_or_null<DIDerivedType>(type))
    type = derived->getBaseType(); // typedefs, const, volatile
  auto *structure = dyn_cast_or_null<DICompositeType>(type);
  if (!structure)
    return names;
  for (const DINode *element : structure->getElements())
    if (auto *member = dyn_cast<DIDerivedType>(element);
        member && member->getTag() == dwarf::DW_TAG_member)
      names.push_back(member->getName().str());
  return names;
}

// The programs of "ID/KEY" sections, by map id and slot.
using SectionSlots = std::map<uint32_t, std::map<uint32_t, Function *>>;

Expected<SectionSlots> tailCallSections(Module &module, const std::string &path) {
  SectionSlots slots;
  for (Function &function : module) {
    if (function.isDeclaration() || !function.hasSection())
      continue;
    auto section = tailCallSection(function.getSection());
    if (!section)
      continue;
    auto [placed, fresh] = slots[section->mapId].emplace(section->slot, &function);
    if (!fresh)
      return makeError("{0}: programs '{1}' and '{2}' are both in slot {3} of the program "
                       "array of iproute2 id {4} (sections '{5}' and '{6}')",
                       path, placed->second->getName(), function.getName(), section->slot,
                       section->mapId, placed->second->getSection(), function.getSection());
  }
  return slots;
}

} // namespace

std::optional<TailCallSection> tailCallSection(StringRef section) {
  auto [id, slot] = section.split('/');
  TailCallSection numbers;
  // Radix 0: decimal, or 0x-prefixed hexadecimal (and a leading 0 octal),
  // as iproute2's and Cilium's loaders read them.
  if (slot.empty() || slot.contains('/') || id.getAsInteger(0, numbers.mapId) ||
      slot.getAsInteger(0, numbers.slot))
    return std::nullopt;
  return numbers;
}

Expected<LegacyMapFacts> convertLegacyMaps(Module &module, const std::string &path) {
  LegacyMapFacts facts;
  auto sections = tailCallSections(module, path);
  if (!sections)
    return sections.takeError();
  std::vector<GlobalVariable *> legacy;
  for (GlobalVariable &global : module.globals())
    if (global.hasSection() && global.getSection() == "maps")
      legacy.push_back(&global);
  if (legacy.empty() && sections->empty())
    return facts;
  auto units = module.debug_compile_units();
  if (!legacy.empty() && units.empty())
    return makeError("{0}: map '{1}' is a legacy definition (section \"maps\") and the "
                     "module has no debug info to describe it as a BTF map: compile with -g",
                     path, legacy.front()->getName());
  std::map<uint32_t, std::string> mapsById;
  LLVMContext &context = module.getContext();
  Type *pointer = PointerType::getUnqual(context);
  SmallVector<DIGlobalVariableExpression *, 4> replaced;
  std::optional<DIBuilder> builder;
  DICompileUnit *unit = legacy.empty() ? nullptr : *units.begin();
  if (unit)
    builder.emplace(module, /*AllowUnresolved=*/true, unit);
  DIBasicType *intType =
      builder ? builder->createBasicType("int", 32, dwarf::DW_ATE_signed) : nullptr;
  for (GlobalVariable *old : legacy) {
    std::string name = old->getName().str();
    auto *fields = dyn_cast<StructType>(old->getValueType());
    Constant *initial = old->hasInitializer() ? old->getInitializer() : nullptr;
    if (!fields || fields->getNumElements() < ConvertedFields.size() || !initial)
      return makeError("{0}: map '{1}' in section \"maps\" is not a struct of at least five "
                       "32-bit fields (type, key size, value size, max entries, flags)",
                       path, name);
    std::vector<uint32_t> values;
    for (unsigned index = 0; index < fields->getNumElements(); ++index) {
      auto *value = dyn_cast_or_null<ConstantInt>(initial->getAggregateElement(index));
      if (!value || value->getBitWidth() != 32)
        return makeError("{0}: map '{1}' in section \"maps\": field {2} is not a 32-bit "
                         "constant",
                         path, name, index);
      values.push_back(uint32_t(value->getZExtValue()));
    }
    SmallVector<DIGlobalVariableExpression *, 1> oldDebug;
    old->getDebugInfo(oldDebug);
    std::vector<std::string> names = memberNames(oldDebug);
    bool iproute2 = names.size() > PinningField && names[IdField] == "id" &&
                    names[PinningField] == "pinning";
    facts.iproute2 |= iproute2;
    bool pinned = false;
    for (unsigned index = ConvertedFields.size(); index < values.size(); ++index) {
      uint32_t value = values[index];
      if (value == 0)
        continue;
      if (iproute2 && index == IdField) {
        auto [other, fresh] = mapsById.emplace(value, name);
        if (!fresh)
          return makeError("{0}: maps '{1}' and '{2}' have the same iproute2 id {3}", path,
                           other->second, name, value);
        continue;
      }
      if (iproute2 && index == PinningField) {
        if (value == uint32_t(Iproute2Pinning::ObjectNs))
          return makeError("{0}: map '{1}' is pinned in iproute2's object namespace "
                           "(PIN_OBJECT_NS), a directory named by a hash of the ELF file "
                           "iproute2 loads; Morpheus builds its own object from the source, "
                           "so it cannot share those pins: use PIN_GLOBAL_NS (2) or "
                           "PIN_NONE (0)",
                           path, name);
        pinned = value == uint32_t(Iproute2Pinning::GlobalNs);
        continue;
      }
      return makeError("{0}: map '{1}' in section \"maps\" sets legacy field {2} to {3} (an "
                       "inner map index or iproute2's inner map): only type, key size, value "
                       "size, max entries, flags, and iproute2's id and pinning are "
                       "converted to a BTF map; define it with SEC(\".maps\") and "
                       "__uint/__array instead",
                       path, name, index, value);
    }
    // The programs iproute2 places in this array from "ID/KEY" sections.
    std::map<uint32_t, Function *> slots;
    if (iproute2 && values[IdField] != 0)
      if (auto found = sections->find(values[IdField]); found != sections->end())
        slots = found->second;
    if (!slots.empty() && values[TypeField] != BPF_MAP_TYPE_PROG_ARRAY)
      return makeError("{0}: section '{1}' names map '{2}' (iproute2 id {3}), which is no "
                       "program array",
                       path, slots.begin()->second->getSection(), name, values[IdField]);
    if (!slots.empty() && slots.rbegin()->first >= values[MaxEntriesField])
      return makeError("{0}: section '{1}' names slot {2} of map '{3}', which has {4}", path,
                       slots.rbegin()->second->getSection(), slots.rbegin()->first, name,
                       values[MaxEntriesField]);

    // One pointer member per field that is set; 0 is libbpf's default.
    SmallVector<Metadata *, 7> members;
    SmallVector<Type *, 7> memberTypes;
    SmallVector<Constant *, 7> initializers;
    DIFile *file = oldDebug.empty() ? unit->getFile() : oldDebug.front()->getVariable()->getFile();
    unsigned line = oldDebug.empty() ? 0 : oldDebug.front()->getVariable()->getLine();
    auto addMember = [&](const char *member, DIType *type, Type *irType, Constant *value,
                         uint64_t size) {
      members.push_back(builder->createMemberType(unit, member, file, line, size, size ? 64 : 0,
                                                  64 * memberTypes.size(), DINode::FlagZero,
                                                  type));
      memberTypes.push_back(irType);
      initializers.push_back(value);
    };
    for (unsigned index = 0; index < ConvertedFields.size(); ++index)
      if (values[index] != 0)
        addMember(ConvertedFields[index], uintMember(*builder, intType, values[index]), pointer,
                  ConstantPointerNull::get(PointerType::getUnqual(context)), 64);
    if (pinned)
      addMember("pinning", uintMember(*builder, intType, LibbpfPinByName), pointer,
                ConstantPointerNull::get(PointerType::getUnqual(context)), 64);
    uint64_t structBits = 64 * memberTypes.size();
    if (!slots.empty()) {
      auto *programs = ArrayType::get(pointer, slots.rbegin()->first + 1);
      std::vector<Constant *> slotValues(programs->getNumElements(),
                                         ConstantPointerNull::get(PointerType::getUnqual(context)));
      for (const auto &[slot, program] : slots)
        slotValues[slot] = program;
      addMember("values", programsMember(*builder, intType), programs,
                ConstantArray::get(programs, slotValues), 0);
    }
    DICompositeType *structure =
        builder->createStructType(unit, "", file, line, structBits, 64, DINode::FlagZero,
                                  nullptr, builder->getOrCreateArray(members));
    auto *type = StructType::get(context, memberTypes);
    auto *map = new GlobalVariable(module, type, /*isConstant=*/false, old->getLinkage(),
                                   ConstantStruct::get(type, initializers), "", old);
    map->setSection(".maps");
    map->setAlignment(Align(8));
    map->addDebugInfo(builder->createGlobalVariableExpression(
        unit, name, name, file, line, structure, old->hasLocalLinkage()));
    old->replaceAllUsesWith(map);
    replaced.append(oldDebug.begin(), oldDebug.end());
    old->eraseFromParent();
    map->setName(name);
  }
  for (const auto &[id, slots] : *sections)
    if (!mapsById.count(id))
      return makeError("{0}: program '{1}' is in section '{2}', iproute2's slot {3} of the "
                       "program array of id {4}, and no map in section \"maps\" has that id",
                       path, slots.begin()->second->getName(),
                       slots.begin()->second->getSection(), slots.begin()->first, id);
  if (!builder)
    return facts;
  builder->finalize();
  // The legacy globals' own debug entries describe globals that are gone.
  SmallVector<Metadata *, 16> kept;
  for (DIGlobalVariableExpression *expression : unit->getGlobalVariables())
    if (!is_contained(replaced, expression))
      kept.push_back(expression);
  unit->replaceGlobalVariables(MDTuple::get(context, kept));
  return facts;
}

} // namespace morpheus::bpf
