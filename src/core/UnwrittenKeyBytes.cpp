// Why the answer is exact or errs on the safe side: only a key on the
// stack can hold stale bytes (globals start initialised, and packet and
// table memory is the same in every version). A key that is a phi or a
// select of pointers (a value pointer or a stack struct's field: `conn =
// hit ? hit : &fresh`) is each of them in turn. Walking MemorySSA upwards
// from the call, a store, memset or memory copy into the key's stack slot
// at a known offset writes the bytes it covers on that path; the
// function's entry or the slot's lifetime.start reached with bytes still
// pending leaves them unwritten; paths that meet are each followed (for a
// phi's incoming pointer, at the phi's block only the edges it comes in
// on, the last time the path enters it; around a loop, a memory phi met
// again with no fewer bytes pending adds nothing). Any other clobber (a
// call given the slot's address, a store at an unknown offset) cannot be
// told apart from one that skips some byte, so the bytes it may write
// count as possibly unwritten: declining a site is always exact, a rewrite
// of a key whose bytes are stale never is.
#include "core/UnwrittenKeyBytes.h"

#include <llvm/ADT/STLExtras.h>
#include <llvm/ADT/Sequence.h>
#include <llvm/Analysis/AliasAnalysis.h>
#include <llvm/Analysis/CaptureTracking.h>
#include <llvm/Analysis/MemorySSA.h>
#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/Module.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

using namespace llvm;

namespace morpheus::core {

namespace {

// Whether `object` is an argument of a function the module calls: memory
// a caller hands in may be its stack (a program's own context never is).
bool calledArgument(const Value *object) {
  auto *argument = dyn_cast<Argument>(object);
  return argument && any_of(argument->getParent()->users(), [&](const User *user) {
           auto *call = dyn_cast<CallBase>(user);
           return call && call->getCalledOperand() == argument->getParent();
         });
}

// One pointer the key may be, with the phi it comes in through.
struct Candidate {
  Value *pointer;
  PHINode *phi = nullptr;
};

// The pointers the key may be, and the key's displacement from each.
struct Candidates {
  std::vector<Candidate> pointers;
  int64_t displacement = 0;
};

Candidates candidatesOf(Value *key, const DataLayout &dl) {
  APInt keyDisplacement(dl.getIndexTypeSizeInBits(key->getType()), 0);
  Value *merged = key->stripAndAccumulateConstantOffsets(dl, keyDisplacement,
                                                        /*AllowNonInbounds=*/true);
  Candidates candidates;
  candidates.displacement = keyDisplacement.getSExtValue();
  if (auto *phi = dyn_cast<PHINode>(merged); phi && candidates.displacement >= 0) {
    for (Value *incoming : phi->incoming_values())
      candidates.pointers.push_back({incoming, phi});
  } else if (auto *select = dyn_cast<SelectInst>(merged);
             select && candidates.displacement >= 0) {
    candidates.pointers.push_back({select->getTrueValue()});
    candidates.pointers.push_back({select->getFalseValue()});
  } else {
    candidates.pointers.push_back({key});
    candidates.displacement = 0;
  }
  return candidates;
}

// The walk up MemorySSA from the call for one candidate: the stack slot
// `base`, the key at `keyOffset` in it. Bytes some path leaves pending are
// set in `unwritten`; a writer the walk cannot place sets `unknownWriter`.
class SlotWalk {
public:
  SlotWalk(MemorySSA &mssa, BatchAAResults &batch, const DataLayout &dl,
           const Candidate &candidate, Value *base, MemoryLocation location, int64_t keyOffset,
           uint32_t keySize, unsigned &budget, std::vector<bool> &unwritten,
           std::optional<std::string> &unknownWriter)
      : mssa(mssa), batch(batch), dl(dl), candidate(candidate), base(base), location(location),
        keyOffset(keyOffset), keySize(keySize), budget(budget), unwritten(unwritten),
        unknownWriter(unknownWriter),
        keyEscapes(PointerMayBeCaptured(base, /*ReturnCaptures=*/false,
                                        /*StoreCaptures=*/true)) {}

  // Follows one path upwards with `pending` the bytes no nearer write on
  // it covers; `entered` once the path has left the candidate's phi block.
  void walk(MemoryAccess *from, std::vector<bool> pending, bool entered) {
    while (!unknownWriter && llvm::is_contained(pending, true)) {
      if (!budget--) {
        unknownWriter = "more writes than the analysis follows";
        return;
      }
      MemoryAccess *clobber = mssa.getWalker()->getClobberingMemoryAccess(from, location, batch);
      if (auto *phi = dyn_cast_or_null<MemoryPhi>(clobber))
        return walkIncoming(*phi, pending, entered);
      auto *def = dyn_cast_or_null<MemoryDef>(clobber);
      if (!def || mssa.isLiveOnEntryDef(def))
        return leaveUnwritten(pending);
      Instruction *writer = def->getMemoryInst();
      if (auto *lifetime = dyn_cast<IntrinsicInst>(writer);
          lifetime && lifetime->getIntrinsicID() == Intrinsic::lifetime_start &&
          getUnderlyingObject(lifetime->getArgOperand(1)) == base)
        return leaveUnwritten(pending);
      if (missesSlot(*writer)) {
        from = def->getDefiningAccess();
        continue;
      }
      if (!markWritten(*writer, pending))
        return;
      from = def->getDefiningAccess();
    }
  }

private:
  void leaveUnwritten(const std::vector<bool> &pending) {
    for (uint32_t byte = 0; byte < keySize; ++byte)
      if (pending[byte])
        unwritten[byte] = true;
  }

  // Each path into `phi`; at the candidate's phi block, before the path
  // has left it, only the edges the candidate comes in on.
  void walkIncoming(MemoryPhi &phi, const std::vector<bool> &pending, bool entered) {
    if (!phisMet.insert({&phi, pending}).second)
      return; // around a loop: nothing this path can add
    bool restricted =
        candidate.phi && !entered && phi.getBlock() == candidate.phi->getParent();
    for (unsigned i = 0; i < phi.getNumIncomingValues(); ++i)
      if (!restricted ||
          candidate.phi->getIncomingValueForBlock(phi.getIncomingBlock(i)) == candidate.pointer)
        walk(phi.getIncomingValue(i), pending, entered || restricted);
  }

  // Whether a write through `pointer` is known to miss the slot. Passing
  // over a write is always safe here (a byte counts as written only where
  // a write to the slot covers it), so this may be generous: a global,
  // another stack slot, memory a function the module does not define
  // returns (a helper's map value, the guard runtime's profile slot that
  // instrument-table-sites copies the key into), or anything else while
  // the slot's address never escapes.
  bool elsewhere(const Value *pointer) const {
    const Value *object = getUnderlyingObject(pointer);
    if (object == base)
      return false;
    if (isa<GlobalValue>(object) || isa<AllocaInst>(object) || !keyEscapes)
      return true;
    auto *source = dyn_cast<CallBase>(object);
    return source &&
           (!source->getCalledFunction() || source->getCalledFunction()->isDeclaration());
  }

  // Whether `writer` is known to leave the slot alone.
  bool missesSlot(Instruction &writer) const {
    Value *atomicPointer = nullptr;
    if (auto *rmw = dyn_cast<AtomicRMWInst>(&writer))
      atomicPointer = rmw->getPointerOperand();
    else if (auto *xchg = dyn_cast<AtomicCmpXchgInst>(&writer))
      atomicPointer = xchg->getPointerOperand();
    if (atomicPointer && elsewhere(atomicPointer))
      return true;
    // A call reaches the slot only through its arguments when the slot's
    // address never escapes (MemorySSA's walker gives up after ~100 steps
    // and names the call it stopped at), and a function the module does
    // not define (a helper, the guard runtime's profile slot) always: the
    // verifier lets a helper write the stack only through its pointer
    // arguments.
    if (auto *other = dyn_cast<CallBase>(&writer);
        other && !isa<MemIntrinsic>(other) &&
        (!keyEscapes || !other->getCalledFunction() ||
         other->getCalledFunction()->isDeclaration()) &&
        none_of(llvm::seq(other->arg_size()), [&](unsigned arg) {
          return other->getArgOperand(arg)->getType()->isPointerTy() &&
                 getUnderlyingObject(other->getArgOperand(arg)) == base &&
                 !other->onlyReadsMemory(arg);
        }))
      return true;
    auto [pointer, size] = writtenRange(writer);
    return pointer && elsewhere(pointer);
  }

  // Where a store or a memory intrinsic writes, and how many bytes (0:
  // not known); null for any other writer.
  std::pair<Value *, uint64_t> writtenRange(Instruction &writer) const {
    if (auto *store = dyn_cast<StoreInst>(&writer))
      return {store->getPointerOperand(),
              dl.getTypeStoreSize(store->getValueOperand()->getType())};
    if (auto *intrinsic = dyn_cast<MemIntrinsic>(&writer)) {
      auto *length = dyn_cast<ConstantInt>(intrinsic->getLength());
      return {intrinsic->getDest(), length ? length->getZExtValue() : 0};
    }
    return {nullptr, 0};
  }

  // Clears the bytes `writer`, which writes into the slot, covers in
  // `pending`; false (and `unknownWriter` set) when it cannot be placed.
  bool markWritten(Instruction &writer, std::vector<bool> &pending) {
    auto [pointer, size] = writtenRange(writer);
    // A copy from the stack or the caller's memory may bring stale bytes
    // of its own.
    auto *copy = dyn_cast<MemTransferInst>(&writer);
    const Value *copied = copy ? getUnderlyingObject(copy->getSource()) : nullptr;
    bool staleCopy = copied && (isa<AllocaInst>(copied) || calledArgument(copied));
    int64_t writeOffset = 0;
    if (staleCopy || !pointer || !size ||
        GetPointerBaseWithConstantOffset(pointer, writeOffset, dl) != base) {
      std::string where = locationOf(writer);
      unknownWriter = std::string(staleCopy ? "copied from stack or caller's memory, "
                                              "which may hold stale bytes itself"
                                  : isa<CallBase>(writer)
                                      ? "written by a call given its address"
                                      : "written where the analysis cannot place") +
                      (where.empty() ? std::string() : " at " + where);
      return false;
    }
    for (uint64_t i = 0; i < size; ++i)
      if (int64_t byte = writeOffset + int64_t(i) - keyOffset;
          byte >= 0 && byte < int64_t(keySize))
        pending[byte] = false;
    return true;
  }

  MemorySSA &mssa;
  BatchAAResults &batch;
  const DataLayout &dl;
  const Candidate &candidate;
  Value *base;
  MemoryLocation location;
  int64_t keyOffset;
  uint32_t keySize;
  unsigned &budget;
  std::vector<bool> &unwritten;
  std::optional<std::string> &unknownWriter;
  bool keyEscapes;
  std::set<std::pair<MemoryPhi *, std::vector<bool>>> phisMet;
};

} // namespace

std::optional<UnwrittenKeyBytes> unwrittenKeyBytes(CallBase &call, Value *key, uint32_t keySize,
                                                   FunctionAnalysisManager &fam) {
  if (keySize == 0)
    return std::nullopt;
  auto everyByte = [&](std::string unsure) {
    return UnwrittenKeyBytes{0, keySize - 1, std::move(unsure)};
  };
  Function &function = *call.getFunction();
  const DataLayout &dl = function.getParent()->getDataLayout();
  Candidates candidates = candidatesOf(key, dl);
  MemorySSA &mssa = fam.getResult<MemorySSAAnalysis>(function).getMSSA();
  BatchAAResults batch(fam.getResult<AAManager>(function));
  MemoryUseOrDef *callAccess = mssa.getMemoryAccess(&call);
  std::vector<bool> unwritten(keySize, false);
  std::optional<std::string> unknownWriter;
  unsigned budget = 4096;
  for (const Candidate &candidate : candidates.pointers) {
    const Value *object = getUnderlyingObject(candidate.pointer);
    if (isa<Argument>(object))
      return everyByte("the key is the caller's memory, which the analysis does not follow");
    if (!isa<AllocaInst>(object))
      continue;
    int64_t pointerOffset = 0;
    Value *base = GetPointerBaseWithConstantOffset(candidate.pointer, pointerOffset, dl);
    if (base != object || !callAccess)
      return everyByte("the key is not one stack slot at a known offset");
    MemoryLocation location(candidate.pointer,
                            LocationSize::precise(uint64_t(candidates.displacement) + keySize));
    SlotWalk walk(mssa, batch, dl, candidate, base, location,
                  pointerOffset + candidates.displacement, keySize, budget, unwritten,
                  unknownWriter);
    walk.walk(callAccess->getDefiningAccess(), std::vector<bool>(keySize, true), false);
    if (unknownWriter)
      return everyByte(*unknownWriter);
  }
  auto first = llvm::find(unwritten, true);
  if (first == unwritten.end())
    return std::nullopt;
  uint32_t last = keySize - 1;
  while (!unwritten[last])
    --last;
  return UnwrittenKeyBytes{uint32_t(first - unwritten.begin()), last, ""};
}

} // namespace morpheus::core
