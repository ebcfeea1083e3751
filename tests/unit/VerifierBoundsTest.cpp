#include "backend/bpf/VerifierBounds.h"

#include <gtest/gtest.h>
#include <llvm/AsmParser/Parser.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/raw_ostream.h>

namespace morpheus::bpf {
namespace {

TEST(VerifierBounds, MasksRemaindersByNonPowerOfTwoConstants) {
  llvm::LLVMContext context;
  llvm::SMDiagnostic diagnostic;
  auto module = llvm::parseAssemblyString(R"(
target triple = "bpf"
define i32 @pick(i32 %hash) {
  %three = urem i32 %hash, 3
  %four = urem i32 %hash, 4
  %sum = add i32 %three, %four
  ret i32 %sum
}
)",
                                          diagnostic, context);
  ASSERT_TRUE(module) << diagnostic.getMessage().str();
  EXPECT_TRUE(restoreVerifierBounds(*module));
  std::string text;
  llvm::raw_string_ostream out(text);
  module->print(out, nullptr);
  EXPECT_NE(text.find("%1 = call i32 asm \"\", \"=r,0\"(i32 %three)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("%2 = and i32 %1, 3"), std::string::npos) << text;
  EXPECT_NE(text.find("%sum = add i32 %2, %four"), std::string::npos)
      << "the masked value feeds the old uses: " << text;
  EXPECT_EQ(text.find("(i32 %four)"), std::string::npos) << "x % 4 needs no mask: " << text;
}

} // namespace
} // namespace morpheus::bpf
