//===- DefinedArithmetic.cpp - the machine's arithmetic, explicit in the IR ===//
//
// LLVM IR leaves some arithmetic undefined that the machine a program runs
// on defines: a division by zero is immediate undefined behaviour, a shift
// by the operand's width or more is poison, and an add, sub, mul or shl
// flagged nsw/nuw (C's signed overflow) or a division or right shift
// flagged exact is poison when the flag does not hold. eBPF defines all of
// it: x / 0 = 0, x % 0 = x, MIN / -1 = MIN, MIN % -1 = 0, a shift count is
// masked to the register's width, and arithmetic wraps.
//
// As long as a divisor or count is a run-time value, the code LLVM emitted
// for the original computes the machine's result. Specialization turns
// run-time values (a table's entry, a global) into constants, and the O2
// pipeline that follows folds `x % 0` to poison, deletes a path it proves
// undefined, or infers from a no-wrap flag a range the machine never
// respected: the specialized program would then do something the original
// never did (a flow spread over `ncpus` CPUs with `ncpus` still 0 passed
// packets the original dropped).
//
// This pass runs on the module before any table pass, so that no folding
// ever sees undefined behaviour the running program does not have:
//
//   %q = udiv i32 %x, %d
// becomes
//   %zero = icmp eq i32 %d, 0
//   %safe = select i1 %zero, i32 1, i32 %d
//   %div = udiv i32 %x, %safe
//   %q = select i1 %zero, i32 0, i32 %div
//
//   %s = shl i32 %x, %n      (narrowRegisterBits 32: ALU32)
// becomes
//   %count = and i32 %n, 31
//   %s = shl i32 %x, %count
//
//   %s = lshr i32 %x, %n     (narrowRegisterBits 64: no ALU32)
// becomes
//   %wide = zext i32 %x to i64
//   %count = and i64 (zext i32 %n to i64), 63
//   %s = trunc i64 (lshr i64 %wide, %count) to i32
//
// Why it is correct: each replacement computes, for every input, what the
// machine computes for the original instruction (the rules above, with the
// operand extended to the register the machine computes it in: zero for
// shl and lshr, sign for ashr, as LLVM's type legalization promotes them),
// and is itself free of undefined behaviour (the divisor it divides by is
// never 0, nor -1 for signed division; the count is below the width it
// shifts). Dropping a flag only makes an instruction defined where it was
// poison, with the wrapping result the machine computes. The module then
// describes the running program's behaviour in every execution, not only
// in those C calls defined, and any folding LLVM does afterwards is sound
// for all of them. The generic copies the guard falls back to are cloned
// after this pass: they compute the same as the original too.
//
// What is left alone: divisions by a constant other than 0 (and, signed,
// other than -1), and shifts by a count known to be below the width (a
// constant, or known bits), which are defined already; integers wider than
// 64 bits (the eBPF backend refuses their division, and the machine's
// lowering of their shifts is not one instruction); and, for a machine
// whose division traps (definedDivision off), divisions: the original
// crashes, and there is no result to keep.
//
// Cost: a compare and a select per division by a run-time value, a mask per
// shift by a run-time count; both fold away when specialization makes the
// divisor or count a constant.
//===----------------------------------------------------------------------===//

#include "core/passes/DefinedArithmetic.h"

#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/Operator.h>
#include <llvm/Support/KnownBits.h>

using namespace llvm;

namespace morpheus::core {

namespace {

class DefinedArithmeticImpl {
public:
  DefinedArithmeticImpl(Module &module, MachineArithmetic machine)
      : layout(module.getDataLayout()), machine(machine) {}

  bool run(Function &function) {
    bool changed = false;
    std::vector<BinaryOperator *> undefinedCases;
    for (Instruction &inst : instructions(function)) {
      changed |= dropAssumedFlags(inst);
      if (auto *op = dyn_cast<BinaryOperator>(&inst); op && mayBeUndefined(*op))
        undefinedCases.push_back(op);
    }
    for (BinaryOperator *op : undefinedCases) {
      IRBuilder<> builder(op);
      Value *defined = op->isShift() ? maskedShift(builder, *op) : definedDivision(builder, *op);
      defined->takeName(op);
      op->replaceAllUsesWith(defined);
      op->eraseFromParent();
    }
    return changed || !undefinedCases.empty();
  }

private:
  // The flags C's rules assert rather than analysis proves: signed overflow
  // (nsw), and the nuw/exact/nneg facts derived under them.
  static bool dropAssumedFlags(Instruction &inst) {
    bool changed = false;
    if (isa<OverflowingBinaryOperator>(inst) &&
        (inst.hasNoSignedWrap() || inst.hasNoUnsignedWrap())) {
      inst.setHasNoSignedWrap(false);
      inst.setHasNoUnsignedWrap(false);
      changed = true;
    }
    if (isa<PossiblyExactOperator>(inst) && inst.isExact()) {
      inst.setIsExact(false);
      changed = true;
    }
    if (isa<PossiblyNonNegInst>(inst) && inst.hasNonNeg()) {
      inst.setNonNeg(false);
      changed = true;
    }
    return changed;
  }

  unsigned registerBits(unsigned bits) const {
    return bits <= machine.narrowRegisterBits ? machine.narrowRegisterBits : 64;
  }

  bool mayBeUndefined(const BinaryOperator &op) const {
    auto *type = dyn_cast<IntegerType>(op.getType());
    if (!type || type->getBitWidth() > 64)
      return false;
    // Known bits of the operand alone, without the context of where it is
    // used: facts of every execution, not of those C calls defined.
    KnownBits known = computeKnownBits(op.getOperand(1), layout);
    switch (op.getOpcode()) {
    case Instruction::Shl:
    case Instruction::LShr:
    case Instruction::AShr:
      return known.getMaxValue().uge(type->getBitWidth());
    case Instruction::UDiv:
    case Instruction::URem:
      return machine.definedDivision && !known.isNonZero();
    case Instruction::SDiv:
    case Instruction::SRem:
      // A divisor with a bit known clear is not -1.
      return machine.definedDivision && (!known.isNonZero() || known.Zero.isZero());
    default:
      return false;
    }
  }

  Value *maskedShift(IRBuilder<> &builder, BinaryOperator &op) const {
    Type *type = op.getType();
    unsigned bits = type->getIntegerBitWidth(), wide = registerBits(bits);
    Value *value = op.getOperand(0), *count = op.getOperand(1);
    if (wide == bits)
      return builder.CreateBinOp(op.getOpcode(), value,
                                 builder.CreateAnd(count, wide - 1, "count"));
    Type *registerType = builder.getIntNTy(wide);
    Value *extended = op.getOpcode() == Instruction::AShr
                          ? builder.CreateSExt(value, registerType)
                          : builder.CreateZExt(value, registerType);
    Value *masked = builder.CreateAnd(builder.CreateZExt(count, registerType), wide - 1, "count");
    return builder.CreateTrunc(builder.CreateBinOp(op.getOpcode(), extended, masked), type);
  }

  static Value *definedDivision(IRBuilder<> &builder, BinaryOperator &op) {
    Type *type = op.getType();
    Value *dividend = op.getOperand(0), *divisor = op.getOperand(1);
    Constant *zero = ConstantInt::get(type, 0), *one = ConstantInt::get(type, 1);
    Value *byZero = builder.CreateICmpEQ(divisor, zero, "by.zero");
    // Divide by 1 where the machine's result is not the instruction's: the
    // division itself is then always defined.
    Value *safe = builder.CreateSelect(byZero, one, divisor, "divisor");
    Value *byMinusOne = nullptr;
    if (op.getOpcode() == Instruction::SDiv || op.getOpcode() == Instruction::SRem) {
      byMinusOne = builder.CreateICmpEQ(divisor, Constant::getAllOnesValue(type), "by.minus.one");
      safe = builder.CreateSelect(byMinusOne, one, safe, "divisor");
    }
    Value *result = builder.CreateBinOp(op.getOpcode(), dividend, safe);
    switch (op.getOpcode()) {
    case Instruction::UDiv:
      return builder.CreateSelect(byZero, zero, result);
    case Instruction::SDiv:
      // MIN / -1 wraps to MIN, as negation does.
      return builder.CreateSelect(byZero, zero,
                                  builder.CreateSelect(byMinusOne, builder.CreateNeg(dividend),
                                                       result));
    default:
      // x % 0 = x; x % -1 = 0 = x % 1, already the result.
      return builder.CreateSelect(byZero, dividend, result);
    }
  }

  const DataLayout &layout;
  MachineArithmetic machine;
};

} // namespace

PreservedAnalyses DefinedArithmeticPass::run(Module &module, ModuleAnalysisManager &) {
  DefinedArithmeticImpl impl(module, machine);
  bool changed = false;
  for (Function &function : module)
    if (!function.isDeclaration())
      changed |= impl.run(function);
  return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
}

} // namespace morpheus::core
