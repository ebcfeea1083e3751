// backend/bpf/VerifierBounds: after every instruction whose result the
// verifier cannot bound, the range LLVM knows is re-imposed behind an
// opaque copy: a mask for [0, 2^k - 1], the tightest clamp otherwise.
#include "backend/bpf/VerifierBounds.h"

#include <gtest/gtest.h>
#include <llvm/AsmParser/Parser.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/raw_ostream.h>

namespace morpheus::bpf {
namespace {

// Runs restoreVerifierBounds on `body` (the instructions of
// `define i64 @f(i8 %byte, i64 %any)`) and returns the printed function.
std::string bounded(const std::string &body, bool *changed = nullptr,
                    bool assumeNonZeroDivisors = false) {
  llvm::LLVMContext context;
  llvm::SMDiagnostic diagnostic;
  auto module = llvm::parseAssemblyString(
      "target triple = \"bpf\"\n"
      "declare i64 @llvm.bswap.i64(i64)\n"
      "define i64 @f(i8 %byte, i64 %any) {\n" + body + "}\n",
      diagnostic, context);
  if (!module) {
    ADD_FAILURE() << diagnostic.getMessage().str();
    return "";
  }
  bool modified = restoreVerifierBounds(*module, assumeNonZeroDivisors);
  if (changed)
    *changed = modified;
  std::string text;
  llvm::raw_string_ostream out(text);
  module->getFunction("f")->print(out);
  return text;
}

bool contains(const std::string &text, const std::string &what) {
  return text.find(what) != std::string::npos;
}

// ttl / 26 with ttl a byte: at most 9 (LLVM knows it from the dividend's
// range; the verifier knows nothing after BPF_DIV).
TEST(VerifierBounds, ClampsAQuotientToItsTightestRange) {
  std::string text = bounded("  %wide = zext i8 %byte to i64\n"
                             "  %q = udiv i64 %wide, 26\n"
                             "  %use = add i64 %q, 1\n"
                             "  ret i64 %use\n");
  EXPECT_TRUE(contains(text, "= call i64 asm \"\", \"=r,0\"(i64 %q)")) << text;
  EXPECT_TRUE(contains(text, "call i64 @llvm.umin.i64(i64 %1, i64 9)")) << text;
  EXPECT_TRUE(contains(text, "%use = add i64 %2, 1")) << "uses read the bound value: " << text;
}

TEST(VerifierBounds, MasksWhenTheRangeIsAPowerOfTwo) {
  std::string text = bounded("  %r = urem i64 %any, 16\n"
                             "  ret i64 %r\n");
  EXPECT_TRUE(contains(text, "and i64 %1, 15")) << text;
  EXPECT_FALSE(contains(text, "umin")) << text;
}

// x % 10 is at most 9: the mask a power of two allows (15) would let an
// index reach a 10-entry array's end.
TEST(VerifierBounds, RemainderByTenIsClampedToNineNotMaskedToFifteen) {
  std::string text = bounded("  %r = urem i64 %any, 10\n"
                             "  ret i64 %r\n");
  EXPECT_TRUE(contains(text, "call i64 @llvm.umin.i64(i64 %1, i64 9)")) << text;
  EXPECT_FALSE(contains(text, "and i64")) << text;
}

TEST(VerifierBounds, SignedDivisionAndRemainderGetSignedClamps) {
  std::string text = bounded("  %s = sext i8 %byte to i64\n"
                             "  %q = sdiv i64 %s, 13\n"
                             "  %r = srem i64 %s, 7\n"
                             "  %sum = add i64 %q, %r\n"
                             "  ret i64 %sum\n");
  EXPECT_TRUE(contains(text, "@llvm.smin.i64(i64 %1, i64 9)")) << text;
  EXPECT_TRUE(contains(text, "@llvm.smax.i64(i64 %2, i64 -9)")) << text;
  EXPECT_TRUE(contains(text, "i64 6)")) << text;
  EXPECT_TRUE(contains(text, "i64 -6)")) << text;
}

TEST(VerifierBounds, ByteSwapsOfNarrowValuesAreBounded) {
  std::string text = bounded("  %wide = zext i8 %byte to i64\n"
                             "  %swapped = call i64 @llvm.bswap.i64(i64 %wide)\n"
                             "  ret i64 %swapped\n");
  EXPECT_TRUE(contains(text, "(i64 %swapped)")) << text;
  EXPECT_TRUE(contains(text, "@llvm.umin.i64(i64 %1, i64 -72057594037927936)")) << text;
}

// Nothing to restore: a quotient that may be anything, and arithmetic the
// verifier follows on its own.
TEST(VerifierBounds, LeavesUnboundedAndTrackedResultsAlone) {
  bool changed = true;
  std::string text = bounded("  %q = udiv i64 %any, %any\n"
                             "  %m = and i64 %any, 7\n"
                             "  %sum = add i64 %q, %m\n"
                             "  ret i64 %sum\n",
                             &changed);
  EXPECT_FALSE(changed) << text;
  EXPECT_FALSE(contains(text, "asm")) << text;
}

// LLVM's range of x % (byte & 7), [0, 6], assumes the divisor is not 0;
// eBPF's x % 0 is x. No bound may be imposed from it: it would change the
// value (a remainder by 0 of 200 would become 6). Before 2026-12-02 it was
// (the fault keeps that behaviour, and shows the test can fail).
TEST(VerifierBounds, ARemainderByAPossiblyZeroDivisorIsNotBounded) {
  std::string body = "  %wide = zext i8 %byte to i64\n"
                     "  %divisor = and i64 %any, 7\n"
                     "  %r = urem i64 %wide, %divisor\n"
                     "  ret i64 %r\n";
  bool changed = true;
  std::string text = bounded(body, &changed);
  EXPECT_FALSE(changed) << text;
  std::string assumed = bounded(body, nullptr, /*assumeNonZeroDivisors=*/true);
  EXPECT_TRUE(contains(assumed, "@llvm.umin.i64(i64 %1, i64 6)")) << assumed;
}

// The safe divisor core/passes/DefinedArithmetic makes (1 where the
// divisor is 0) is never 0: the remainder's range holds, and is imposed.
TEST(VerifierBounds, ARemainderByADefinedDivisorIsBounded) {
  std::string text = bounded("  %wide = zext i8 %byte to i64\n"
                             "  %divisor = and i64 %any, 7\n"
                             "  %zero = icmp eq i64 %divisor, 0\n"
                             "  %safe = select i1 %zero, i64 1, i64 %divisor\n"
                             "  %r = urem i64 %wide, %safe\n"
                             "  %defined = select i1 %zero, i64 %wide, i64 %r\n"
                             "  ret i64 %defined\n");
  EXPECT_TRUE(contains(text, "@llvm.umin.i64(i64 %1, i64 6)")) << text;
  EXPECT_TRUE(contains(text, "select i1 %zero, i64 %wide, i64 %2")) << text;
}

// A signed division is bounded only by a constant other than 0 and -1
// (LLVM's range also assumes MIN / -1 does not happen; eBPF gives MIN).
TEST(VerifierBounds, SignedDivisionsByARunTimeDivisorAreNotBounded) {
  bool changed = true;
  std::string text = bounded("  %s = sext i8 %byte to i64\n"
                             "  %divisor = or i64 %any, 1\n"
                             "  %q = sdiv i64 %s, %divisor\n"
                             "  ret i64 %q\n",
                             &changed);
  EXPECT_FALSE(changed) << text;
}

} // namespace
} // namespace morpheus::bpf
