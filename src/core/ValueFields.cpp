#include "core/ValueFields.h"

#include "core/TableAccessAnalysis.h"

#include <llvm/BinaryFormat/Dwarf.h>
#include <llvm/IR/DebugInfoMetadata.h>

using namespace llvm;

namespace morpheus::core {

namespace {

const DIType *stripTypedefs(const DIType *type) {
  while (auto *derived = dyn_cast_or_null<DIDerivedType>(type)) {
    if (derived->getTag() != dwarf::DW_TAG_typedef && derived->getTag() != dwarf::DW_TAG_const_type &&
        derived->getTag() != dwarf::DW_TAG_volatile_type)
      break;
    type = derived->getBaseType();
  }
  return type;
}

void flatten(const DIType *type, const std::string &prefix, uint64_t base,
             std::vector<ValueField> &into, unsigned depth) {
  auto *composite = dyn_cast_or_null<DICompositeType>(stripTypedefs(type));
  if (!composite || depth > 4 ||
      (composite->getTag() != dwarf::DW_TAG_structure_type &&
       composite->getTag() != dwarf::DW_TAG_union_type)) {
    if (!prefix.empty() && type)
      into.push_back({prefix, base, type->getSizeInBits() / 8});
    return;
  }
  for (const DINode *element : composite->getElements()) {
    auto *member = dyn_cast<DIDerivedType>(element);
    if (!member || member->getTag() != dwarf::DW_TAG_member)
      continue;
    std::string name = prefix.empty() ? member->getName().str()
                                      : prefix + "." + member->getName().str();
    uint64_t offset = base + member->getOffsetInBits() / 8;
    const DIType *memberType = stripTypedefs(member->getBaseType());
    if (isa_and_nonnull<DICompositeType>(memberType) &&
        (memberType->getTag() == dwarf::DW_TAG_structure_type ||
         memberType->getTag() == dwarf::DW_TAG_union_type))
      flatten(memberType, name, offset, into, depth + 1);
    else
      into.push_back({name, offset, member->getSizeInBits() / 8});
  }
}

} // namespace

std::vector<ValueField> valueFields(const Module &module, const std::string &table) {
  std::vector<ValueField> fields;
  const GlobalVariable *global = module.getNamedGlobal(table);
  if (!global)
    return fields;
  SmallVector<DIGlobalVariableExpression *, 1> expressions;
  global->getDebugInfo(expressions);
  for (DIGlobalVariableExpression *expression : expressions) {
    auto *definition =
        dyn_cast_or_null<DICompositeType>(stripTypedefs(expression->getVariable()->getType()));
    if (!definition)
      continue;
    for (const DINode *element : definition->getElements()) {
      auto *member = dyn_cast<DIDerivedType>(element);
      if (!member || member->getName() != "value")
        continue;
      // __type(value, T) declares `T *value`.
      auto *pointer = dyn_cast_or_null<DIDerivedType>(member->getBaseType());
      if (pointer && pointer->getTag() == dwarf::DW_TAG_pointer_type)
        flatten(pointer->getBaseType(), "", 0, fields, 0);
    }
  }
  return fields;
}

std::string describeValueBytes(const std::vector<ValueField> &fields, uint64_t offset,
                               uint64_t size) {
  if (size == ValueWrite::WholeValue)
    return "the whole value";
  std::string names;
  uint64_t covered = 0;
  for (const ValueField &field : fields)
    if (field.offset < offset + size && offset < field.offset + field.size) {
      names += (names.empty() ? "`" : ", `") + field.name + "`";
      covered += std::min(offset + size, field.offset + field.size) -
                 std::max(offset, field.offset);
    }
  std::string bytes = "bytes " + std::to_string(offset) + ".." + std::to_string(offset + size - 1);
  if (names.empty())
    return bytes;
  return (covered == size ? "field" : "part of field") +
         std::string(names.find(',') == std::string::npos ? " " : "s ") + names + " (" + bytes +
         ")";
}

} // namespace morpheus::core
