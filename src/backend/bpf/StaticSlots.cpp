#include "backend/bpf/StaticSlots.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/GlobalVariable.h>

namespace morpheus::bpf {

namespace {

// The `values` member of a BTF-defined map's initializer: the last field of
// the struct, an array of pointers. For a program array they point at
// functions (for maps of maps at other maps' globals, which libbpf writes
// only into an outer map it creates itself, never into a re-used one).
const llvm::ConstantArray *slotInitializers(const llvm::GlobalVariable &global) {
  if (global.getSection() != ".maps" || !global.hasInitializer())
    return nullptr;
  auto *fields = llvm::dyn_cast<llvm::ConstantStruct>(global.getInitializer());
  if (!fields || fields->getNumOperands() == 0)
    return nullptr;
  return llvm::dyn_cast<llvm::ConstantArray>(fields->getOperand(fields->getNumOperands() - 1));
}

const llvm::Function *slotProgram(const llvm::Constant *element) {
  return llvm::dyn_cast<llvm::Function>(element->stripPointerCasts());
}

} // namespace

ProgramSlots staticProgramSlots(const llvm::Module &module) {
  ProgramSlots slots;
  for (const llvm::GlobalVariable &global : module.globals()) {
    const llvm::ConstantArray *values = slotInitializers(global);
    if (!values)
      continue;
    for (unsigned index = 0; index < values->getNumOperands(); ++index)
      if (const llvm::Function *program = slotProgram(values->getOperand(index)))
        slots[global.getName().str()][index] = program->getName().str();
  }
  return slots;
}

bool removeStaticProgramSlots(llvm::Module &module) {
  bool removed = false;
  for (llvm::GlobalVariable &global : module.globals()) {
    const llvm::ConstantArray *values = slotInitializers(global);
    if (!values)
      continue;
    bool programs = false;
    for (const llvm::Use &element : values->operands())
      programs |= slotProgram(llvm::cast<llvm::Constant>(element.get())) != nullptr;
    if (!programs)
      continue;
    auto *fields = llvm::cast<llvm::ConstantStruct>(global.getInitializer());
    std::vector<llvm::Constant *> kept;
    for (unsigned i = 0; i + 1 < fields->getNumOperands(); ++i)
      kept.push_back(fields->getOperand(i));
    kept.push_back(llvm::Constant::getNullValue(values->getType()));
    global.setInitializer(llvm::ConstantStruct::get(fields->getType(), kept));
    removed = true;
  }
  return removed;
}

} // namespace morpheus::bpf
