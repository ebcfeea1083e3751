// Why the answers are exact or err on the safe side: only a key on the
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
// again with no fewer bytes pending adds nothing). A copy from another
// stack slot writes what that slot holds at the copy: the walk goes on
// there, from the copy, for the bytes it covers (stale ones included). Any
// other clobber (a call given the slot's address, a store at an unknown
// offset, a copy from the caller's memory) cannot be told apart from one
// that skips some byte, so the bytes it may write count as possibly
// unwritten: declining a site is always exact, a rewrite of a key whose
// bytes are stale never is.
//
// Constants ride on the same walk: on each path, the nearest write of a
// byte decides what it holds. A store of a constant integer or of null, a
// memset with a constant fill, and a copy from a private constant's
// initializer (clang's `@__const.*` behind a struct initialiser, which
// LLVM folds itself; a named global's bytes its loader may set) give known
// bytes; any other write gives bytes known only at run time. A byte is a
// constant when every path that reaches the call gives it the same known
// value; one some path leaves unwritten, or that a writer the walk cannot
// place may touch, is not. The walk merges
// each byte over every path it takes, so a path it skips at a memory phi
// already met with the same bytes pending would only give those bytes the
// values they were given the first time.
#include "core/KeyBytes.h"

#include <llvm/ADT/STLExtras.h>
#include <llvm/ADT/Sequence.h>
#include <llvm/Analysis/AliasAnalysis.h>
#include <llvm/Analysis/CaptureTracking.h>
#include <llvm/Analysis/ConstantFolding.h>
#include <llvm/Analysis/MemorySSA.h>
#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/Module.h>

#include <set>
#include <string>
#include <vector>

using namespace llvm;

namespace morpheus::core {

std::optional<Bytes> KeyBytes::constantKey() const {
  if (constant.empty() || !all_of(constant, [](const auto &byte) { return byte.has_value(); }))
    return std::nullopt;
  Bytes key;
  for (const std::optional<uint8_t> &byte : constant)
    key.push_back(*byte);
  return key;
}

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

std::string bytesText(uint32_t byte) { return "key byte " + std::to_string(byte); }

// What the walks have found, per key byte, over every path they took.
struct Findings {
  explicit Findings(uint32_t keySize)
      : unwritten(keySize, false), value(keySize), varies(keySize, false) {}

  // Some path writes `held` there (nullopt: a value known only at run
  // time, for the reason `why`).
  void wrote(uint32_t byte, std::optional<uint8_t> held, const std::string &why) {
    if (varies[byte])
      return;
    if (held && (!value[byte] || *value[byte] == *held)) {
      value[byte] = held;
      return;
    }
    varies[byte] = true;
    because(held ? bytesText(byte) + " is written with different values on different paths"
                 : why);
  }
  // Some path leaves it unwritten.
  void leftUnwritten(uint32_t byte) {
    unwritten[byte] = true;
    varies[byte] = true;
    because(bytesText(byte) + " is not written on every path");
  }
  void because(std::string reason) {
    if (notConstant.empty())
      notConstant = std::move(reason);
  }

  std::vector<bool> unwritten;
  std::vector<std::optional<uint8_t>> value;
  std::vector<bool> varies;
  std::optional<std::string> unknownWriter;
  std::string notConstant;
  unsigned budget = 4096;
};

// The walk up MemorySSA from the call for one stack slot `base` that holds
// the key's bytes at `keyOffset` (the key's own slot, or one a copy into it
// read from). Everything it finds goes to `findings`.
class SlotWalk {
public:
  SlotWalk(MemorySSA &mssa, BatchAAResults &batch, const DataLayout &dl,
           const Candidate &candidate, Value *base, MemoryLocation location, int64_t keyOffset,
           uint32_t keySize, Findings &findings)
      : mssa(mssa), batch(batch), dl(dl), candidate(candidate), base(base), location(location),
        keyOffset(keyOffset), keySize(keySize), findings(findings),
        keyEscapes(PointerMayBeCaptured(base, /*ReturnCaptures=*/false,
                                        /*StoreCaptures=*/true)) {}

  // Follows one path upwards with `pending` the bytes no nearer write on
  // it covers; `entered` once the path has left the candidate's phi block.
  void walk(MemoryAccess *from, std::vector<bool> pending, bool entered) {
    while (!findings.unknownWriter && llvm::is_contained(pending, true)) {
      if (!findings.budget--) {
        findings.unknownWriter = "more writes than the analysis follows";
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
      if (!markWritten(*def, pending))
        return;
      from = def->getDefiningAccess();
    }
  }

private:
  void leaveUnwritten(const std::vector<bool> &pending) {
    for (uint32_t byte = 0; byte < keySize; ++byte)
      if (pending[byte])
        findings.leftUnwritten(byte);
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

  // The `size` bytes a store or memset writes, in memory order, when they
  // are constants.
  std::optional<Bytes> constantBytes(Instruction &writer, uint64_t size) const {
    if (auto *set = dyn_cast<MemSetInst>(&writer)) {
      auto *fill = dyn_cast<ConstantInt>(set->getValue());
      if (!fill)
        return std::nullopt;
      return Bytes(size, uint8_t(fill->getZExtValue()));
    }
    auto *store = dyn_cast<StoreInst>(&writer);
    if (!store)
      return std::nullopt;
    auto *value = dyn_cast<Constant>(store->getValueOperand());
    if (!value)
      return std::nullopt;
    // An integer of whole bytes (the bits an i1 or i20 store adds are
    // unspecified).
    if (auto *integer = dyn_cast<ConstantInt>(value);
        integer && integer->getBitWidth() == size * 8) {
      Bytes bytes(size, 0);
      for (uint64_t i = 0; i < size; ++i) {
        uint64_t byte = dl.isLittleEndian() ? i : size - 1 - i;
        bytes[i] = uint8_t(integer->getValue().extractBitsAsZExtValue(8, byte * 8));
      }
      return bytes;
    }
    if (value->isNullValue())
      return Bytes(size, 0); // null, zeroinitializer of any type
    return std::nullopt;
  }

  void unplaced(Instruction &writer, const std::string &what) {
    std::string where = locationOf(writer);
    findings.unknownWriter = what + (where.empty() ? std::string() : " at " + where);
  }

  // The key bytes `def`'s writer, which writes into the slot, covers:
  // written on this path (cleared from `pending`), with what it writes;
  // false (and the writer unplaced) when it cannot be placed.
  bool markWritten(MemoryDef &def, std::vector<bool> &pending) {
    Instruction &writer = *def.getMemoryInst();
    auto [pointer, size] = writtenRange(writer);
    int64_t writeOffset = 0;
    if (!pointer || !size || GetPointerBaseWithConstantOffset(pointer, writeOffset, dl) != base) {
      unplaced(writer, isa<CallBase>(writer) ? "written by a call given its address"
                                             : "written where the analysis cannot place");
      return false;
    }
    // The pending key bytes it covers; where each lies in what it writes is
    // keyOffset + byte - writeOffset.
    std::vector<bool> covered(keySize, false);
    for (uint32_t byte = 0; byte < keySize; ++byte) {
      int64_t at = keyOffset + int64_t(byte) - writeOffset;
      covered[byte] = pending[byte] && at >= 0 && at < int64_t(size);
    }
    if (auto *copy = dyn_cast<MemTransferInst>(&writer)) {
      if (!copied(*copy, def, writeOffset, size, covered))
        return false;
    } else {
      std::optional<Bytes> bytes = constantBytes(writer, size);
      std::string where = locationOf(writer);
      for (uint32_t byte = 0; byte < keySize; ++byte)
        if (covered[byte])
          findings.wrote(byte,
                         bytes ? std::optional<uint8_t>((*bytes)[keyOffset + byte - writeOffset])
                               : std::nullopt,
                         bytesText(byte) + " is written with a value known only at run time" +
                             (where.empty() ? "" : " at " + where));
    }
    for (uint32_t byte = 0; byte < keySize; ++byte)
      if (covered[byte])
        pending[byte] = false;
    return true;
  }

  // The covered key bytes a copy into the slot writes are what its source
  // holds there: a constant global's initializer, what a stack slot holds
  // at the copy (walked in turn), or memory known only at run time (the
  // packet, a map value). False (the copy unplaced) for the caller's
  // memory, which may hold stale bytes the walk cannot see.
  bool copied(MemTransferInst &copy, MemoryDef &def, int64_t writeOffset, uint64_t size,
              const std::vector<bool> &covered) {
    Value *source = copy.getSource();
    int64_t sourceOffset = 0;
    Value *sourceBase = GetPointerBaseWithConstantOffset(source, sourceOffset, dl);
    // Key byte b lies at sourceOffset + (keyOffset + b - writeOffset) in
    // the source.
    int64_t shift = sourceOffset - writeOffset;
    // A private constant is one clang made for an initializer: no loader
    // can name it, and LLVM folds its bytes itself.
    if (auto *global = dyn_cast<GlobalVariable>(sourceBase);
        global && global->isConstant() && global->hasPrivateLinkage() &&
        global->hasDefinitiveInitializer() && !copy.isVolatile() && sourceOffset >= 0) {
      auto *bytes =
          dyn_cast_or_null<ConstantDataArray>(ReadByteArrayFromGlobal(global, sourceOffset));
      for (uint32_t byte = 0; byte < keySize; ++byte)
        if (covered[byte]) {
          uint64_t at = uint64_t(keyOffset + byte - writeOffset);
          findings.wrote(byte,
                         bytes && at < bytes->getNumElements()
                             ? std::optional<uint8_t>(bytes->getElementAsInteger(at))
                             : std::nullopt,
                         bytesText(byte) + " is copied from '" + global->getName().str() +
                             "', whose bytes the analysis cannot read");
        }
      return true;
    }
    if (isa<AllocaInst>(sourceBase)) {
      SlotWalk from(mssa, batch, dl, Candidate{source}, sourceBase,
                    MemoryLocation(source, LocationSize::precise(size)), keyOffset + shift,
                    keySize, findings);
      from.walk(def.getDefiningAccess(), covered, /*entered=*/true);
      return !findings.unknownWriter;
    }
    const Value *object = getUnderlyingObject(source);
    if (isa<AllocaInst>(object) || calledArgument(object)) {
      unplaced(copy, isa<AllocaInst>(object)
                         ? "copied from a stack slot at an offset the analysis does not know"
                         : "copied from the caller's memory, which may hold stale bytes itself");
      return false;
    }
    std::string where = locationOf(copy);
    for (uint32_t byte = 0; byte < keySize; ++byte)
      if (covered[byte])
        findings.wrote(byte, std::nullopt,
                       bytesText(byte) + " is copied from memory known only at run time" +
                           (where.empty() ? "" : " at " + where));
    return true;
  }

  MemorySSA &mssa;
  BatchAAResults &batch;
  const DataLayout &dl;
  Candidate candidate;
  Value *base;
  MemoryLocation location;
  int64_t keyOffset;
  uint32_t keySize;
  Findings &findings;
  bool keyEscapes;
  std::set<std::pair<MemoryPhi *, std::vector<bool>>> phisMet;
};

} // namespace

KeyBytes keyBytes(CallBase &call, Value *key, uint32_t keySize, FunctionAnalysisManager &fam) {
  KeyBytes result;
  result.constant.assign(keySize, std::nullopt);
  if (keySize == 0) {
    result.notConstant = "the key has no bytes";
    return result;
  }
  auto everyByte = [&](std::string unsure) {
    result.unwritten = UnwrittenKeyBytes{0, keySize - 1, std::move(unsure)};
    result.notConstant = "key bytes 0.." + std::to_string(keySize - 1) +
                         " may be left unwritten (" + result.unwritten->unsure + ")";
    return result;
  };
  Function &function = *call.getFunction();
  const DataLayout &dl = function.getParent()->getDataLayout();
  Candidates candidates = candidatesOf(key, dl);
  MemorySSA &mssa = fam.getResult<MemorySSAAnalysis>(function).getMSSA();
  BatchAAResults batch(fam.getResult<AAManager>(function));
  MemoryUseOrDef *callAccess = mssa.getMemoryAccess(&call);
  Findings findings(keySize);
  for (const Candidate &candidate : candidates.pointers) {
    const Value *object = getUnderlyingObject(candidate.pointer);
    if (isa<Argument>(object))
      return everyByte("the key is the caller's memory, which the analysis does not follow");
    if (!isa<AllocaInst>(object)) {
      // The packet, a map value, a global: never stale, not known here (a
      // constant global's initializer is not what the kernel holds when
      // its loader sets .rodata before load).
      std::string where = isa<GlobalVariable>(object)
                              ? "the key is the global '" + object->getName().str() +
                                    "', whose bytes its loader may set before load"
                              : "the key may lie in the packet or a map value";
      for (uint32_t byte = 0; byte < keySize; ++byte)
        findings.wrote(byte, std::nullopt, where);
      continue;
    }
    int64_t pointerOffset = 0;
    Value *base = GetPointerBaseWithConstantOffset(candidate.pointer, pointerOffset, dl);
    if (base != object || !callAccess)
      return everyByte("the key is not one stack slot at a known offset");
    MemoryLocation location(candidate.pointer,
                            LocationSize::precise(uint64_t(candidates.displacement) + keySize));
    SlotWalk walk(mssa, batch, dl, candidate, base, location,
                  pointerOffset + candidates.displacement, keySize, findings);
    walk.walk(callAccess->getDefiningAccess(), std::vector<bool>(keySize, true), false);
    if (findings.unknownWriter)
      return everyByte(*findings.unknownWriter);
  }
  for (uint32_t byte = 0; byte < keySize; ++byte)
    if (!findings.varies[byte])
      result.constant[byte] = findings.value[byte];
  result.notConstant = findings.notConstant;
  auto first = llvm::find(findings.unwritten, true);
  if (first == findings.unwritten.end())
    return result;
  uint32_t last = keySize - 1;
  while (!findings.unwritten[last])
    --last;
  result.unwritten = UnwrittenKeyBytes{uint32_t(first - findings.unwritten.begin()), last, ""};
  return result;
}

} // namespace morpheus::core
