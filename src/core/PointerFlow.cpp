// Pointers through BPF-to-BPF calls (see PointerFlow.h).
//
// Why the reads found are every read of the stored bytes: the bytes lie in
// allocas (the walk up from the store's address accepts nothing else: a
// static function's parameter stands for what each of its calls passes).
// An alloca's memory is reached only through pointers derived from it, and
// the walk down follows every one of them (GEPs, casts, phis, selects, and
// into static functions through the parameter they are passed as), so
// every instruction that may touch the slot is one it inspects. It accepts
// only those that read nothing (stores into the slot, memset, the
// destination of a copy, lifetime and debug markers, pointer compares) and
// loads, which it lists; whatever else could read the slot or hand its
// address on fails the walk.
#include "core/PointerFlow.h"

#include <llvm/ADT/DenseSet.h>
#include <llvm/ADT/SmallVector.h>
#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/DataLayout.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>

#include <map>

using namespace llvm;

namespace morpheus::core {

std::optional<std::vector<CallBase *>> onlyDirectCalls(const Function &function) {
  if (!function.hasLocalLinkage() || function.isDeclaration())
    return std::nullopt;
  std::vector<CallBase *> calls;
  for (const Use &use : function.uses()) {
    auto *call = dyn_cast<CallBase>(use.getUser());
    if (!call || !call->isCallee(&use) ||
        call->getFunctionType() != function.getFunctionType())
      return std::nullopt;
    calls.push_back(const_cast<CallBase *>(call));
  }
  return calls;
}

namespace {

constexpr int64_t Unknown = INT64_MIN;

struct Slot {
  AllocaInst *alloca;
  int64_t stored; // where the stored bytes start in it, or Unknown
};

class SlotWalk {
public:
  SlotWalk(const DataLayout &dl) : dl(dl) {}

  // The slots `pointer` (at `offset` from where the store writes) may
  // point into; false when it may point elsewhere.
  bool findSlots(Value *pointer, int64_t offset) {
    int64_t delta = 0;
    Value *base = GetPointerBaseWithConstantOffset(pointer, delta, dl);
    if (!isa<AllocaInst>(base) && !isa<Argument>(base)) {
      // A variable index, a phi or a select: each object the pointer may
      // be, at an offset the walk does not know.
      SmallVector<const Value *, 4> objects;
      getUnderlyingObjects(pointer, objects);
      for (const Value *object : objects)
        if ((!isa<AllocaInst>(object) && !isa<Argument>(object)) ||
            !findSlots(const_cast<Value *>(object), Unknown))
          return false;
      return true;
    }
    if (offset != Unknown)
      offset += delta;
    if (auto *alloca = dyn_cast<AllocaInst>(base)) {
      slots.push_back({alloca, offset});
      return true;
    }
    auto *parameter = cast<Argument>(base);
    auto [seen, inserted] = parameters.try_emplace(parameter, offset);
    if (!inserted)
      return seen->second == offset;
    std::optional<std::vector<CallBase *>> calls = onlyDirectCalls(*parameter->getParent());
    if (!calls)
      return false;
    for (CallBase *call : *calls)
      if (!findSlots(call->getArgOperand(parameter->getArgNo()), offset))
        return false;
    return true;
  }

  // Lists the loads of `slot` that may read the `size` stored bytes;
  // false when anything else may read them.
  bool collectReads(const Slot &slot, uint64_t size, std::vector<SlotRead> &reads) {
    SmallVector<std::pair<Value *, int64_t>, 16> worklist{{slot.alloca, 0}};
    DenseSet<std::pair<Value *, int64_t>> seen{{slot.alloca, 0}};
    auto push = [&](Value *next, int64_t at) {
      if (seen.insert({next, at}).second)
        worklist.push_back({next, at});
    };
    int64_t stored = slot.stored;
    while (!worklist.empty()) {
      auto [pointer, at] = worklist.pop_back_val();
      for (Use &use : pointer->uses()) {
        auto *user = cast<Instruction>(use.getUser());
        if (auto *gep = dyn_cast<GetElementPtrInst>(user)) {
          APInt delta(dl.getIndexTypeSizeInBits(gep->getType()), 0);
          bool known = at != Unknown && use.getOperandNo() == 0 &&
                       gep->accumulateConstantOffset(dl, delta);
          push(gep, known ? at + delta.getSExtValue() : Unknown);
        } else if (isa<BitCastInst>(user) || isa<AddrSpaceCastInst>(user) ||
                   isa<PHINode>(user) || (isa<SelectInst>(user) && use.getOperandNo() != 0)) {
          push(user, at);
        } else if (auto *load = dyn_cast<LoadInst>(user)) {
          uint64_t bytes = dl.getTypeStoreSize(load->getType());
          bool unknown = at == Unknown || stored == Unknown;
          if (!unknown && (at >= stored + int64_t(size) || stored >= at + int64_t(bytes)))
            continue; // other bytes of the slot
          reads.push_back({load, !unknown && at == stored && bytes == size});
        } else if (auto *store = dyn_cast<StoreInst>(user)) {
          if (use.getOperandNo() != store->getPointerOperandIndex())
            return false; // the slot's address is stored
        } else if (isa<ICmpInst>(user)) {
          // Compares addresses; reads nothing.
        } else if (auto *intrinsic = dyn_cast<IntrinsicInst>(user);
                   intrinsic && (intrinsic->isLifetimeStartOrEnd() ||
                                 isa<DbgInfoIntrinsic>(intrinsic))) {
        } else if (auto *memory = dyn_cast<MemIntrinsic>(user);
                   memory && use.getOperandNo() == 0) {
          // memset, or the destination of a copy: writes the slot.
        } else if (auto *call = dyn_cast<CallBase>(user)) {
          Function *callee = call->getCalledFunction();
          if (!callee || !call->isArgOperand(&use) || !callee->hasLocalLinkage() ||
              callee->isDeclaration() || callee->isVarArg() ||
              call->getFunctionType() != callee->getFunctionType())
            return false;
          push(callee->getArg(call->getArgOperandNo(&use)), at);
        } else {
          return false;
        }
      }
    }
    return true;
  }

  std::vector<Slot> slots;

private:
  const DataLayout &dl;
  std::map<const Argument *, int64_t> parameters;
};

} // namespace

std::optional<std::vector<SlotRead>> readsOfStoredBytes(StoreInst &store, const DataLayout &dl) {
  SlotWalk walk(dl);
  if (!walk.findSlots(store.getPointerOperand(), 0))
    return std::nullopt;
  uint64_t size = dl.getTypeStoreSize(store.getValueOperand()->getType());
  std::vector<SlotRead> reads;
  for (const Slot &slot : walk.slots)
    if (!walk.collectReads(slot, size, reads))
      return std::nullopt;
  return reads;
}

} // namespace morpheus::core
