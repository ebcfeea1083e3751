#include "core/Globals.h"

#include "core/TableAccessAnalysis.h"

#include <llvm/ADT/SmallPtrSet.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/Operator.h>

using namespace llvm;

namespace morpheus::core {

bool GlobalAccess::writtenAt(uint64_t offset, uint64_t size) const {
  if (writtenAnywhere)
    return true;
  for (auto [start, length] : writes)
    if (offset < start + length && start < offset + size)
      return true;
  return false;
}

namespace {

// A global variable the program declares: not an extern, a private
// constant (a string literal), LLVM's lists or Morpheus's own.
bool programGlobal(const GlobalVariable &global) {
  StringRef name = global.getName();
  return global.hasInitializer() && !global.hasPrivateLinkage() && !name.starts_with("llvm.") &&
         !name.starts_with(".") && !name.contains("morpheus");
}

} // namespace

std::optional<std::string> writableDataSection(const GlobalVariable &global) {
  if (!programGlobal(global) || global.isConstant())
    return std::nullopt;
  if (!global.hasSection())
    return global.getInitializer()->isNullValue() ? ".bss" : ".data";
  StringRef section = global.getSection();
  if (section == ".data" || section == ".bss" || section.starts_with(".data.") ||
      section.starts_with(".bss."))
    return section.str();
  return std::nullopt; // .maps, license, .rodata*, .kconfig, program sections
}

std::optional<std::string> readOnlyDataSection(const GlobalVariable &global) {
  if (!programGlobal(global))
    return std::nullopt;
  StringRef section = global.hasSection() ? global.getSection() : "";
  if (!global.isConstant() && !section.starts_with(".rodata"))
    return std::nullopt;
  return section.empty() ? ".rodata" : section.str();
}

namespace {

// Whether `user` is one of LLVM's lists of used globals (llvm.used,
// llvm.compiler.used): naming a global there neither reads nor writes it.
bool isUsedList(const User *user) {
  if (auto *holder = dyn_cast<GlobalVariable>(user))
    return holder->getName().starts_with("llvm.");
  auto *list = dyn_cast<ConstantAggregate>(user);
  return list && all_of(list->users(), [](const User *holder) {
           return isa<GlobalVariable>(holder) && holder->getName().starts_with("llvm.");
         });
}

GlobalAccess analyze(GlobalVariable &global, std::string section, const DataLayout &dl) {
  GlobalAccess access;
  access.global = &global;
  access.section = std::move(section);
  constexpr int64_t Unknown = INT64_MIN;
  SmallVector<std::pair<Value *, int64_t>, 16> worklist{{&global, 0}};
  SmallPtrSet<Value *, 16> seen{&global};
  auto write = [&](int64_t offset, uint64_t size, const User *user, const char *what) {
    std::string where = what;
    if (auto *inst = dyn_cast<Instruction>(user)) {
      std::string location = locationOf(*inst);
      where += " in " + inst->getFunction()->getName().str() +
               (location.empty() ? "" : " at " + location);
    }
    if (access.firstWrite.empty())
      access.firstWrite = where;
    if (offset == Unknown || offset < 0 || !size)
      access.writtenAnywhere = access.writtenAnywhere.value_or(where);
    else
      access.writes.push_back({uint64_t(offset), size});
  };
  while (!worklist.empty()) {
    auto [pointer, offset] = worklist.pop_back_val();
    for (Use &use : pointer->uses()) {
      User *user = use.getUser();
      if (auto *gep = dyn_cast<GEPOperator>(user); gep && use.getOperandNo() == 0) {
        APInt delta(dl.getIndexTypeSizeInBits(gep->getType()), 0);
        bool known = offset != Unknown && gep->accumulateConstantOffset(dl, delta);
        if (seen.insert(user).second)
          worklist.push_back({user, known ? offset + delta.getSExtValue() : Unknown});
      } else if (isa<BitCastOperator>(user) || isa<AddrSpaceCastOperator>(user)) {
        if (seen.insert(user).second)
          worklist.push_back({user, offset});
      } else if (auto *load = dyn_cast<LoadInst>(user)) {
        if (load->isSimple() && offset != Unknown && offset >= 0)
          access.loads.push_back({load, uint64_t(offset)});
      } else if (auto *store = dyn_cast<StoreInst>(user)) {
        if (use.getOperandNo() == store->getPointerOperandIndex())
          write(offset, dl.getTypeStoreSize(store->getValueOperand()->getType()), user, "store");
        else
          write(Unknown, 0, user, "address stored to memory");
      } else if (auto *rmw = dyn_cast<AtomicRMWInst>(user)) {
        write(offset, dl.getTypeStoreSize(rmw->getValOperand()->getType()), user,
              "atomic update");
      } else if (auto *xchg = dyn_cast<AtomicCmpXchgInst>(user)) {
        write(offset, dl.getTypeStoreSize(xchg->getNewValOperand()->getType()), user,
              "atomic update");
      } else if (auto *transfer = dyn_cast<MemTransferInst>(user);
                 transfer && use.getOperandNo() == 1) {
        // The source of a copy: a read of the bytes it spans.
        auto *length = dyn_cast<ConstantInt>(transfer->getLength());
        if (!transfer->isVolatile() && length && offset != Unknown && offset >= 0)
          access.copies.push_back({transfer, uint64_t(offset), length->getZExtValue()});
      } else if (auto *intrinsic = dyn_cast<IntrinsicInst>(user);
                 intrinsic && (intrinsic->isLifetimeStartOrEnd() ||
                               isa<DbgInfoIntrinsic>(intrinsic))) {
      } else if (isUsedList(user)) {
      } else {
        // A call, a memset, ptrtoint, a phi: anything the analysis cannot
        // confine to known bytes may write all of them.
        write(Unknown, 0, user, "address escapes the analysis");
      }
    }
  }
  return access;
}

} // namespace

std::vector<GlobalAccess> analyzeGlobals(Module &module) {
  std::vector<GlobalAccess> globals;
  for (GlobalVariable &global : module.globals())
    if (std::optional<std::string> section = writableDataSection(global))
      globals.push_back(analyze(global, *section, module.getDataLayout()));
  return globals;
}

bool checksHold(const std::vector<GlobalCheck> &checks, const GlobalValues &values) {
  for (const GlobalCheck &check : checks) {
    auto value = values.find(check.global);
    if (value == values.end() || check.offset + check.bytes.size() > value->second.size() ||
        !std::equal(check.bytes.begin(), check.bytes.end(),
                    value->second.begin() + check.offset))
      return false;
  }
  return true;
}

} // namespace morpheus::core
