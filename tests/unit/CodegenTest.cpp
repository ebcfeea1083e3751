// In-process code generation: inline asm is assembled, and no input (bad
// asm, an LLVM fatal error, a crash inside LLVM) ends the process.
#include "backend/bpf/Codegen.h"

#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>
#include <llvm/AsmParser/Parser.h>
#include <llvm/Support/ErrorHandling.h>
#include <llvm/Support/SourceMgr.h>

#include <cstdlib>

namespace morpheus::bpf {
namespace {

Expected<std::vector<char>> compile(const std::string &body) {
  llvm::LLVMContext context;
  llvm::SMDiagnostic diagnostic;
  auto module = llvm::parseAssemblyString("target triple = \"bpf\"\n"
                                          "define i64 @prog(ptr %ctx) section \"xdp\" {\n" +
                                              body + "}\n",
                                          diagnostic, context);
  if (!module)
    return makeError("{0}", diagnostic.getMessage().str());
  auto machine = createTargetMachine(*module);
  if (!machine)
    return machine.takeError();
  return emitObject(*module, **machine);
}

TEST(Codegen, InlineAsmIsAssembledInProcess) {
  auto object = compile("  call void asm sideeffect \"\", \"~{memory}\"()\n"
                        "  %seven = call i64 asm sideeffect \"$0 = 7\", \"=r\"()\n"
                        "  ret i64 %seven\n");
  ASSERT_THAT_EXPECTED(object, llvm::Succeeded());
  EXPECT_FALSE(object->empty());
}

TEST(Codegen, AsmTheAssemblerRejectsIsAnError) {
  auto object = compile("  call void asm sideeffect \"this is not bpf\", \"\"()\n"
                        "  ret i64 0\n");
  ASSERT_FALSE(bool(object));
  EXPECT_NE(llvm::toString(object.takeError()).find("BPF code generation failed"),
            std::string::npos);
}

TEST(Codegen, FatalErrorsAndCrashesInsideLLVMBecomeErrors) {
  Error fatal = runRecoverably("test", [] { llvm::report_fatal_error("no way to select this"); });
  EXPECT_EQ(llvm::toString(std::move(fatal)), "test failed inside LLVM: no way to select this");
  Error aborted = runRecoverably("test", [] { std::abort(); });
  EXPECT_NE(llvm::toString(std::move(aborted)).find("test crashed ("), std::string::npos);
  bool ran = false;
  EXPECT_FALSE(bool(runRecoverably("test", [&] { ran = true; })));
  EXPECT_TRUE(ran);
}

} // namespace
} // namespace morpheus::bpf
