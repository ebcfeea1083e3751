#include "core/ContextReads.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/DataLayout.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>

#include <optional>
#include <vector>

using namespace llvm;

namespace morpheus::core {

namespace {

// How far pointers are followed into called functions, and values through
// arithmetic: programs pass their context a few calls deep at most, and a
// test of a field sits a few operations after its load.
constexpr unsigned MaxCallDepth = 8;
constexpr unsigned MaxValueDepth = 8;

// One operation between a field and the value a test compares, undone: the
// field value that gives the compared value `c`.
struct Undo {
  enum Kind { ShiftLeft, ShiftRight, Subtract, Xor } kind;
  uint64_t amount;

  uint64_t apply(uint64_t c) const {
    switch (kind) {
    case ShiftLeft:
      return amount < 64 ? c << amount : 0;
    case ShiftRight:
      return amount < 64 ? c >> amount : 0;
    case Subtract:
      return c - amount;
    case Xor:
      return c ^ amount;
    }
    return c;
  }
};

bool isOrdering(CmpInst::Predicate predicate) {
  return !ICmpInst::isEquality(predicate);
}

// What undoes `binary`, the field's value (operand 0 when `first`) with
// `amount`: none when nothing needs undoing (a mask: a constant inside it
// meets the test as it is), nullopt when the result is not followed.
std::optional<std::optional<Undo>> undoOf(const BinaryOperator &binary, bool first,
                                          uint64_t amount) {
  switch (binary.getOpcode()) {
  case Instruction::And:
  case Instruction::Or:
    return std::optional<Undo>();
  case Instruction::Add:
    return std::optional<Undo>(Undo{Undo::Subtract, amount});
  case Instruction::Xor:
    return std::optional<Undo>(Undo{Undo::Xor, amount});
  case Instruction::Sub:
    if (first)
      return std::optional<Undo>(Undo{Undo::Subtract, uint64_t(0) - amount});
    return std::nullopt;
  case Instruction::LShr:
  case Instruction::AShr:
    if (first)
      return std::optional<Undo>(Undo{Undo::ShiftLeft, amount});
    return std::nullopt;
  case Instruction::Shl:
    if (first)
      return std::optional<Undo>(Undo{Undo::ShiftRight, amount});
    return std::nullopt;
  default:
    return std::nullopt;
  }
}

class Finder {
public:
  explicit Finder(const DataLayout &layout) : layout(layout) {}

  void followPointer(const Value *pointer, int64_t offset, unsigned depth);
  ContextReads result() { return std::move(reads); }

private:
  void read(const LoadInst &load, int64_t offset);
  void followValue(const Value *value, ContextRead &field, std::vector<Undo> &undo,
                   unsigned depth);
  void singleOut(ContextRead &field, const std::vector<Undo> &undo, const APInt &compared,
                 bool ordering);
  // The offset `access` (a CO-RE access intrinsic on `pointer`) adds, if
  // constant.
  std::optional<int64_t> accessOffset(const IntrinsicInst &access) const;

  const DataLayout &layout;
  ContextReads reads;
  std::set<std::pair<const Value *, int64_t>> visited;
};

void Finder::followPointer(const Value *pointer, int64_t offset, unsigned depth) {
  if (!visited.insert({pointer, offset}).second)
    return;
  if (offset < 0 || depth > MaxCallDepth) {
    reads.escapes = true;
    return;
  }
  for (const User *user : pointer->users()) {
    if (const auto *gep = dyn_cast<GetElementPtrInst>(user)) {
      APInt added(layout.getIndexTypeSizeInBits(gep->getType()), 0);
      if (gep->getPointerOperand() == pointer && gep->accumulateConstantOffset(layout, added))
        followPointer(gep, offset + added.getSExtValue(), depth);
      else
        reads.escapes = true; // cb[i]: a field chosen at run time
    } else if (const auto *load = dyn_cast<LoadInst>(user)) {
      read(*load, offset);
    } else if (const auto *store = dyn_cast<StoreInst>(user)) {
      if (store->getValueOperand() == pointer)
        reads.escapes = true; // kept in memory: read back where we do not look
      // A store into the context is a write, which no sample needs to set.
    } else if (const auto *access = dyn_cast<IntrinsicInst>(user)) {
      std::optional<int64_t> added = accessOffset(*access);
      if (added && access->getArgOperand(0) == pointer)
        followPointer(access, offset + *added, depth);
      else if (!access->isAssumeLikeIntrinsic() && !isa<DbgInfoIntrinsic>(access))
        reads.escapes = true;
    } else if (const auto *call = dyn_cast<CallBase>(user)) {
      // The program's own functions read what they are passed; helpers
      // (calls of a constant address) and kfuncs (declarations) read the
      // context themselves, which is not a field a sample sets.
      const Function *callee = call->getCalledFunction();
      if (!callee || callee->isDeclaration())
        continue;
      for (unsigned i = 0; i < call->arg_size() && i < callee->arg_size(); ++i)
        if (call->getArgOperand(i) == pointer)
          followPointer(callee->getArg(i), offset, depth + 1);
    } else if (isa<BitCastInst>(user) || isa<AddrSpaceCastInst>(user)) {
      followPointer(user, offset, depth);
    } else {
      reads.escapes = true; // a phi, a select, a conversion to an integer
    }
  }
}

std::optional<int64_t> Finder::accessOffset(const IntrinsicInst &access) const {
  switch (access.getIntrinsicID()) {
  case Intrinsic::preserve_struct_access_index: {
    auto *type = dyn_cast_or_null<StructType>(access.getParamElementType(0));
    auto *index = dyn_cast<ConstantInt>(access.getArgOperand(1));
    if (!type || !index || index->getZExtValue() >= type->getNumElements())
      return std::nullopt;
    return int64_t(layout.getStructLayout(type)->getElementOffset(index->getZExtValue()));
  }
  case Intrinsic::preserve_array_access_index: {
    auto *type = dyn_cast_or_null<ArrayType>(access.getParamElementType(0));
    auto *index = dyn_cast<ConstantInt>(access.getArgOperand(2));
    if (!type || !index)
      return std::nullopt;
    return int64_t(index->getZExtValue() * layout.getTypeAllocSize(type->getElementType()));
  }
  case Intrinsic::preserve_union_access_index:
    return 0;
  default:
    return std::nullopt;
  }
}

void Finder::read(const LoadInst &load, int64_t offset) {
  uint64_t width = layout.getTypeStoreSize(load.getType());
  ContextRead &field = reads.fields[uint32_t(offset)];
  field.offset = uint32_t(offset);
  field.width = std::max<uint32_t>(field.width, uint32_t(width));
  if (!load.getType()->isIntegerTy())
    return; // a pointer (the packet's bounds): nothing a test singles out
  std::vector<Undo> undo;
  followValue(&load, field, undo, 0);
}

void Finder::followValue(const Value *value, ContextRead &field, std::vector<Undo> &undo,
                         unsigned depth) {
  if (depth > MaxValueDepth)
    return;
  for (const User *user : value->users()) {
    if (isa<ZExtInst>(user) || isa<SExtInst>(user) || isa<TruncInst>(user) ||
        isa<FreezeInst>(user)) {
      followValue(user, field, undo, depth + 1);
    } else if (const auto *binary = dyn_cast<BinaryOperator>(user)) {
      bool first = binary->getOperand(0) == value;
      auto *constant = dyn_cast<ConstantInt>(binary->getOperand(first ? 1 : 0));
      if (!constant)
        continue;
      std::optional<std::optional<Undo>> step = undoOf(*binary, first, constant->getZExtValue());
      if (!step)
        continue;
      if (*step)
        undo.push_back(**step);
      followValue(binary, field, undo, depth + 1);
      if (*step)
        undo.pop_back();
    } else if (const auto *compare = dyn_cast<ICmpInst>(user)) {
      const Value *other = compare->getOperand(compare->getOperand(0) == value ? 1 : 0);
      if (const auto *constant = dyn_cast<ConstantInt>(other))
        singleOut(field, undo, constant->getValue(), isOrdering(compare->getPredicate()));
    } else if (const auto *choice = dyn_cast<SwitchInst>(user)) {
      if (choice->getCondition() == value)
        for (const auto &arm : choice->cases())
          singleOut(field, undo, arm.getCaseValue()->getValue(), false);
    }
  }
}

void Finder::singleOut(ContextRead &field, const std::vector<Undo> &undo, const APInt &compared,
                       bool ordering) {
  if (compared.getBitWidth() > 64)
    return;
  uint64_t c = compared.getZExtValue();
  std::vector<uint64_t> values = {c};
  if (ordering) // either side of the bound
    values.insert(values.end(), {c - 1, c + 1});
  uint64_t mask = field.width >= 8 ? ~0ull : (1ull << (8 * field.width)) - 1;
  for (uint64_t value : values) {
    for (auto step = undo.rbegin(); step != undo.rend(); ++step)
      value = step->apply(value);
    field.singledOut.insert(value & mask);
  }
}

} // namespace

ContextReads contextReads(const Function &entry) {
  if (entry.arg_empty() || !entry.getArg(0)->getType()->isPointerTy())
    return {};
  Finder finder(entry.getParent()->getDataLayout());
  finder.followPointer(entry.getArg(0), 0, 0);
  return finder.result();
}

} // namespace morpheus::core
