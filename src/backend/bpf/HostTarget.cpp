#include "backend/bpf/HostTarget.h"

#include "backend/bpf/Codegen.h"

#include <llvm/IR/DataLayout.h>
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/TypeFinder.h>
#include <llvm/TargetParser/Triple.h>

using namespace llvm;

namespace morpheus::bpf {

namespace {

std::string typeName(Type *type) {
  if (auto *named = dyn_cast<StructType>(type); named && named->hasName())
    return "%" + named->getName().str();
  std::string text;
  raw_string_ostream out(text);
  type->print(out);
  return text;
}

// How `type` is laid out differently under `to` than under `from` ("" when
// it is not): its size, its alignment, a field's offset.
std::string layoutDifference(Type *type, const DataLayout &from, const DataLayout &to) {
  if (!type->isSized())
    return "";
  if (from.getTypeAllocSize(type) != to.getTypeAllocSize(type))
    return formatv("{0} bytes for the host, {1} for BPF", uint64_t(from.getTypeAllocSize(type)),
                   uint64_t(to.getTypeAllocSize(type)));
  if (from.getABITypeAlign(type) != to.getABITypeAlign(type) ||
      from.getPrefTypeAlign(type) != to.getPrefTypeAlign(type))
    return formatv("aligned to {0} bytes for the host, {1} for BPF",
                   from.getABITypeAlign(type).value(), to.getABITypeAlign(type).value());
  if (auto *structure = dyn_cast<StructType>(type))
    for (unsigned field = 0; field < structure->getNumElements(); ++field) {
      uint64_t here = from.getStructLayout(structure)->getElementOffset(field);
      uint64_t there = to.getStructLayout(structure)->getElementOffset(field);
      if (here != there)
        return formatv("field {0} at byte {1} for the host, {2} for BPF", field, here, there);
    }
  return "";
}

// The types whose layout decides what `module` does: every struct, and
// the types of globals, allocas, GEPs, loads and stores.
std::vector<Type *> laidOutTypes(const Module &module) {
  std::vector<Type *> types;
  TypeFinder structs;
  structs.run(module, /*onlyNamed=*/false);
  types.insert(types.end(), structs.begin(), structs.end());
  for (const GlobalVariable &global : module.globals())
    types.push_back(global.getValueType());
  for (const Function &function : module)
    for (const Instruction &instruction : instructions(function)) {
      if (auto *alloca = dyn_cast<AllocaInst>(&instruction))
        types.push_back(alloca->getAllocatedType());
      else if (auto *gep = dyn_cast<GetElementPtrInst>(&instruction))
        types.push_back(gep->getSourceElementType());
      else if (auto *load = dyn_cast<LoadInst>(&instruction))
        types.push_back(load->getType());
      else if (auto *store = dyn_cast<StoreInst>(&instruction))
        types.push_back(store->getValueOperand()->getType());
    }
  return types;
}

// What in `function` only the host can run: host assembly, a host
// intrinsic, the host's calling convention ("" when nothing).
std::string hostCode(const Function &function) {
  // fastcc and coldcc are LLVM's own (O2 gives them to internal
  // functions, for BPF too); the rest name a machine's ABI.
  CallingConv::ID convention = function.getCallingConv();
  if (convention != CallingConv::C && convention != CallingConv::Fast &&
      convention != CallingConv::Cold)
    return formatv("function '{0}' uses the host's calling convention {1}", function.getName(),
                   unsigned(function.getCallingConv()));
  for (const Instruction &instruction : instructions(function)) {
    auto *call = dyn_cast<CallBase>(&instruction);
    if (!call)
      continue;
    if (auto *assembly = dyn_cast<InlineAsm>(call->getCalledOperand()))
      return formatv("function '{0}' has inline assembly for the host ('{1}')",
                     function.getName(), assembly->getAsmString());
    const Function *callee = call->getCalledFunction();
    // One this LLVM does not know is no target-independent one either.
    if (callee && callee->getName().starts_with("llvm.") &&
        (callee->getIntrinsicID() == Intrinsic::not_intrinsic || callee->isTargetIntrinsic()))
      return formatv("function '{0}' calls the host's intrinsic '{1}'", function.getName(),
                     callee->getName());
  }
  return "";
}

} // namespace

Expected<bool> retargetHostModule(Module &module, const std::string &path) {
  Triple host(module.getTargetTriple());
  if (host.isBPF())
    return false;
  std::string named = host.str().empty() ? std::string("no target") : "'" + host.str() + "'";
  auto refuse = [&](const std::string &why) {
    return makeError("{0}: LLVM IR for {1} (built for the host: clang -emit-llvm without "
                     "--target=bpf) cannot be lowered for BPF as `llc -march=bpf` would: {2} "
                     "changes what it means there; build it with --target=bpf, or pass the C "
                     "source",
                     path, named, why);
  };
  if (!module.getModuleInlineAsm().empty())
    return refuse("its module-level assembly");
  for (const Function &function : module)
    if (std::string why = hostCode(function); !why.empty())
      return refuse(why);
  DataLayout hostLayout = module.getDataLayout();
  if (hostLayout.isBigEndian())
    return refuse("its big-endian data layout (BPF is little-endian here)");

  module.setTargetTriple(Triple("bpfel", "", "").str());
  for (Function &function : module) {
    // The host's CPU and features are no BPF CPU's: the generic one, as
    // clang --target=bpf without -mcpu gives. Unwind tables have no use
    // in a BPF object.
    for (const char *attribute : {"target-cpu", "target-features", "tune-cpu"})
      function.removeFnAttr(attribute);
    function.setUWTableKind(UWTableKind::None);
  }
  auto machine = createTargetMachine(module);
  if (!machine)
    return machine.takeError();
  DataLayout bpfLayout = (*machine)->createDataLayout();
  for (Type *type : laidOutTypes(module))
    if (std::string why = layoutDifference(type, hostLayout, bpfLayout); !why.empty())
      return refuse("type " + typeName(type) + " (" + why + ")");
  module.setDataLayout(bpfLayout);
  return true;
}

} // namespace morpheus::bpf
