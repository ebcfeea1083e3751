// A copy of a value the optimizer cannot see through: an empty inline-asm
// statement that returns its operand in a register ("=r,0"), marked as not
// touching memory. LLVM then knows nothing about the copy (not its value,
// not its range, not which object a copied pointer points to), so facts it
// proved about the original cannot delete code written against the copy.
// It costs nothing at run time: the asm is empty and the register is the
// same. Used where a specialization must keep something LLVM would fold
// away: key bytes read as memory holds them (TableRewriting), an index the
// verifier must not see multiplied into constants (TableRewriting), bounds
// the verifier needs (backend VerifierBounds, region-as-table's columns).
#pragma once

#include <llvm/IR/ConstantRange.h>
#include <llvm/IR/IRBuilder.h>

namespace morpheus::core {

llvm::Value *opaqueCopy(llvm::IRBuilderBase &builder, llvm::Value *value,
                        const llvm::Twine &name = "");

// Whether `value` is a copy opaqueCopy made: the same value as its operand
// (the table analysis follows a copied pointer as the pointer itself).
bool isOpaqueCopy(const llvm::Value &value);

// Whether `call` is an empty asm statement that returns its one operand in
// a register ("=r,0"): opaqueCopy's, or a program's own barrier
// (`asm volatile("" : "+r"(x))`, which BPF code uses to keep clang from
// rewriting a bound the verifier must see). Its result is its operand:
// the statement is empty, whatever LLVM may assume of it.
bool isEmptyAsmCopy(const llvm::CallBase &call);

// `value` (an integer) through an opaque copy, clamped into `range`: a
// mask when the range is [0, 2^k - 1], else a minimum and a maximum
// (signed or not, as `isSigned` says which bounds of `range` to keep),
// which the verifier follows through the branch it compiles to. Where a
// value always lies in `range` the result is that value; LLVM cannot prove
// the clamp redundant (it knows nothing of the copy), so the bound reaches
// the verifier whatever LLVM knew of `value`.
llvm::Value *boundedCopy(llvm::IRBuilderBase &builder, llvm::Value *value,
                         const llvm::ConstantRange &range, bool isSigned,
                         const llvm::Twine &name = "");

} // namespace morpheus::core
