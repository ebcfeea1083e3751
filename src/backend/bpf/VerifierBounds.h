// Keeps, in specialized code, the bounds the kernel verifier needs.
#pragma once

#include <llvm/IR/Module.h>

namespace morpheus::bpf {

// Specialization turns values into constants (divisors, table fields), and
// LLVM then proves some of the program's own checks redundant: after
// `x % 10` or `ttl / 26` it knows the result's range and deletes the
// program's `& 15` or `< 16`. The verifier computes no range through some
// instructions (BPF's division and remainder, signed or not, and its byte
// swaps), so the result becomes unbounded and an index built from it is
// rejected. This re-imposes, after every such instruction, the range LLVM
// computed for it (value tracking's known bits, lazy value info's ranges):
// a mask when the range is [0, 2^k - 1], else a clamp (min/max, signed or
// not, which the verifier follows through the branch it compiles to), on
// an opaque copy of the result (core/OpaqueValue.h) so LLVM cannot prove
// it redundant again. The bound holds whenever LLVM's facts do, so it
// changes no value. Run after the O2 pipeline, right before code
// generation. Returns whether it changed anything.
//
// LLVM's range of a quotient or remainder assumes the divisor is not zero
// (and, signed, that nothing overflows), where eBPF defines x / 0 = 0 and
// x % 0 = x: a bound is re-imposed only on a division whose divisor is
// known not to be zero from the divisor alone (a constant, or the safe
// divisor core/passes/DefinedArithmetic makes), signed ones only by a
// constant other than 0 and -1. `assumeNonZeroDivisors` is the fault of
// core::FaultInjection::undefinedArithmetic (tests): every division bounded.
bool restoreVerifierBounds(llvm::Module &module, bool assumeNonZeroDivisors = false);

} // namespace morpheus::bpf
