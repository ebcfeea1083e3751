#include "backend/bpf/LegacyMaps.h"

#include <llvm/ADT/SmallVector.h>
#include <llvm/BinaryFormat/Dwarf.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/DIBuilder.h>
#include <llvm/IR/DebugInfoMetadata.h>
#include <llvm/IR/DerivedTypes.h>

#include <array>
#include <vector>

using namespace llvm;

namespace morpheus::bpf {

namespace {

// The fields both legacy layouts share, as libbpf's BTF map definitions
// name them.
constexpr std::array<const char *, 5> ConvertedFields = {"type", "key_size", "value_size",
                                                         "max_entries", "map_flags"};

// The debug type __uint(name, value) gives a member: a pointer to an array
// of `value` ints.
DIType *uintMember(DIBuilder &builder, DIBasicType *intType, uint32_t value) {
  DINodeArray range = builder.getOrCreateArray({builder.getOrCreateSubrange(0, value)});
  DICompositeType *array = builder.createArrayType(uint64_t(value) * 32, 32, intType, range);
  return builder.createPointerType(array, 64);
}

} // namespace

Error convertLegacyMaps(Module &module, const std::string &path) {
  std::vector<GlobalVariable *> legacy;
  for (GlobalVariable &global : module.globals())
    if (global.hasSection() && global.getSection() == "maps")
      legacy.push_back(&global);
  if (legacy.empty())
    return Error::success();
  auto units = module.debug_compile_units();
  if (units.empty())
    return makeError("{0}: map '{1}' is a legacy definition (section \"maps\") and the "
                     "module has no debug info to describe it as a BTF map: compile with -g",
                     path, legacy.front()->getName());
  DICompileUnit *unit = *units.begin();
  LLVMContext &context = module.getContext();
  Type *pointer = PointerType::getUnqual(context);
  SmallVector<DIGlobalVariableExpression *, 4> replaced;
  DIBuilder builder(module, /*AllowUnresolved=*/true, unit);
  DIBasicType *intType = builder.createBasicType("int", 32, dwarf::DW_ATE_signed);
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
    for (unsigned index = ConvertedFields.size(); index < values.size(); ++index)
      if (values[index] != 0)
        return makeError("{0}: map '{1}' in section \"maps\" sets legacy field {2} to {3} (an "
                         "inner map index, or iproute2's id, pinning or inner map): only type, "
                         "key size, value size, max entries and flags are converted to a BTF "
                         "map; define it with SEC(\".maps\") and __uint/__array instead",
                         path, name, index, values[index]);

    // One pointer member per field that is set; 0 is libbpf's default.
    SmallVector<Metadata *, 5> members;
    SmallVector<Type *, 5> memberTypes;
    SmallVector<DIGlobalVariableExpression *, 1> oldDebug;
    old->getDebugInfo(oldDebug);
    DIFile *file = oldDebug.empty() ? unit->getFile() : oldDebug.front()->getVariable()->getFile();
    unsigned line = oldDebug.empty() ? 0 : oldDebug.front()->getVariable()->getLine();
    for (unsigned index = 0; index < ConvertedFields.size(); ++index) {
      if (values[index] == 0)
        continue;
      members.push_back(builder.createMemberType(unit, ConvertedFields[index], file, line, 64,
                                                 64, 64 * memberTypes.size(),
                                                 DINode::FlagZero,
                                                 uintMember(builder, intType, values[index])));
      memberTypes.push_back(pointer);
    }
    DICompositeType *structure = builder.createStructType(
        unit, "", file, line, 64 * memberTypes.size(), 64, DINode::FlagZero, nullptr,
        builder.getOrCreateArray(members));
    auto *type = StructType::get(context, memberTypes);
    auto *map = new GlobalVariable(module, type, /*isConstant=*/false, old->getLinkage(),
                                   Constant::getNullValue(type), "", old);
    map->setSection(".maps");
    map->setAlignment(Align(8));
    map->addDebugInfo(builder.createGlobalVariableExpression(
        unit, name, name, file, line, structure, old->hasLocalLinkage()));
    old->replaceAllUsesWith(map);
    replaced.append(oldDebug.begin(), oldDebug.end());
    old->eraseFromParent();
    map->setName(name);
  }
  builder.finalize();
  // The legacy globals' own debug entries describe globals that are gone.
  SmallVector<Metadata *, 16> kept;
  for (DIGlobalVariableExpression *expression : unit->getGlobalVariables())
    if (!is_contained(replaced, expression))
      kept.push_back(expression);
  unit->replaceGlobalVariables(MDTuple::get(context, kept));
  return Error::success();
}

} // namespace morpheus::bpf
