// Why this is correct: libbpf takes a BTF map's max_entries from one place,
// the element count of the array its `max_entries` member points to, and
// the BPF backend writes BTF from the module's debug types. Replacing that
// member's type (in the map's own struct: clang emits each definition's
// struct as a distinct node, so no other map shares it) changes exactly
// that map's size in every object built from the module, as
// bpf_map__set_max_entries changes it in a loader's, and nothing else: the
// code does not hold the size (bounds come from the kernel at run time).
#include "backend/bpf/MapSizes.h"

#include <llvm/ADT/SmallVector.h>
#include <llvm/BinaryFormat/Dwarf.h>
#include <llvm/IR/DIBuilder.h>
#include <llvm/IR/DebugInfoMetadata.h>

using namespace llvm;

namespace morpheus::bpf {

DIType *uintMember(DIBuilder &builder, DIBasicType *intType, uint32_t value) {
  DINodeArray range = builder.getOrCreateArray({builder.getOrCreateSubrange(0, value)});
  DICompositeType *array = builder.createArrayType(uint64_t(value) * 32, 32, intType, range);
  return builder.createPointerType(array, 64);
}

namespace {

// The struct a map's debug entry describes (typedefs and qualifiers looked
// through), or null.
DICompositeType *definitionOf(const GlobalVariable &map) {
  SmallVector<DIGlobalVariableExpression *, 1> debug;
  map.getDebugInfo(debug);
  if (debug.empty())
    return nullptr;
  DIType *type = debug.front()->getVariable()->getType();
  while (auto *derived = dyn_cast_or_null<DIDerivedType>(type))
    type = derived->getBaseType();
  auto *structure = dyn_cast_or_null<DICompositeType>(type);
  return structure && structure->getTag() == dwarf::DW_TAG_structure_type ? structure : nullptr;
}

} // namespace

Error resizeMaps(Module &module, const std::map<std::string, uint32_t> &sizes,
                 const std::string &path) {
  DIBuilder builder(module);
  for (const auto &[name, size] : sizes) {
    GlobalVariable *map = module.getNamedGlobal(name);
    if (!map || map->getSection() != ".maps")
      return makeError("{0}: --max-entries {1}={2}: the program declares no map '{1}'", path,
                       name, size);
    if (size == 0)
      return makeError("{0}: --max-entries {1}=0: a map holds at least one entry", path, name);
    DICompositeType *structure = definitionOf(*map);
    if (!structure)
      return makeError("{0}: map '{1}' has no BTF definition to size (compile with -g)", path,
                       name);
    SmallVector<Metadata *, 8> members(structure->getElements().begin(),
                                       structure->getElements().end());
    auto found = llvm::find_if(members, [](Metadata *element) {
      auto *member = dyn_cast<DIDerivedType>(element);
      return member && member->getTag() == dwarf::DW_TAG_member &&
             member->getName() == "max_entries";
    });
    if (found == members.end())
      return makeError("{0}: map '{1}' declares no max_entries to change", path, name);
    auto *member = cast<DIDerivedType>(*found);
    // The array's element type: __uint's int.
    auto *pointer = dyn_cast_or_null<DIDerivedType>(member->getBaseType());
    auto *array = pointer ? dyn_cast_or_null<DICompositeType>(pointer->getBaseType()) : nullptr;
    auto *intType = array ? dyn_cast_or_null<DIBasicType>(array->getBaseType()) : nullptr;
    if (!intType)
      return makeError("{0}: map '{1}': max_entries is not declared by __uint()", path, name);
    *found = builder.createMemberType(structure, "max_entries", member->getFile(),
                                      member->getLine(), member->getSizeInBits(),
                                      member->getAlignInBits(), member->getOffsetInBits(),
                                      member->getFlags(), uintMember(builder, intType, size));
    structure->replaceElements(MDTuple::get(module.getContext(), members));
  }
  builder.finalize();
  return Error::success();
}

} // namespace morpheus::bpf
