// IR built for the host (x86-64 here) is retargeted to BPF as `llc
// -march=bpf` does, and only where that changes nothing it means: host
// assembly, host intrinsics, the host's calling conventions and types laid
// out otherwise for BPF refuse it, naming what.
#include "backend/bpf/HostTarget.h"

#include <gtest/gtest.h>
#include <llvm/AsmParser/Parser.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/TargetParser/Triple.h>
#include <llvm/Testing/Support/Error.h>

namespace morpheus::bpf {
namespace {

constexpr const char *X86 =
    "target datalayout = \"e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-"
    "n8:16:32:64-S128\"\ntarget triple = \"x86_64-pc-linux-gnu\"\n";

std::unique_ptr<llvm::Module> parse(llvm::LLVMContext &context, const std::string &text) {
  llvm::SMDiagnostic diagnostic;
  auto module = llvm::parseAssemblyString(text, diagnostic, context);
  EXPECT_NE(module, nullptr) << diagnostic.getMessage().str();
  return module;
}

// What retargeting says of `body` in an x86-64 module: "" when it is
// retargeted, else the error.
std::string refusal(const std::string &body, const char *header = X86) {
  llvm::LLVMContext context;
  auto module = parse(context, header + body);
  if (!module)
    return "unparsed";
  auto retargeted = retargetHostModule(*module, "prog.bc");
  if (!retargeted)
    return llvm::toString(retargeted.takeError());
  EXPECT_TRUE(*retargeted);
  return "";
}

TEST(HostTarget, StructsOfEveryWidthAreRetargetedWithTheHostsCpuDropped) {
  llvm::LLVMContext context;
  auto module = parse(context, std::string(X86) +
                                   "%struct.backend = type { i8, i16, i32, i64 }\n"
                                   "@backends = global %struct.backend zeroinitializer, align 8\n"
                                   "define i32 @prog(ptr %ctx) #0 section \"xdp\" {\n"
                                   "  %p = getelementptr inbounds %struct.backend, ptr @backends,"
                                   " i64 0, i32 3\n  %v = load i64, ptr %p, align 8\n"
                                   "  %t = trunc i64 %v to i32\n  ret i32 %t\n}\n"
                                   "attributes #0 = { nounwind uwtable \"target-cpu\"=\"x86-64\" "
                                   "\"target-features\"=\"+sse2\" \"tune-cpu\"=\"generic\" }\n");
  ASSERT_NE(module, nullptr);
  auto retargeted = retargetHostModule(*module, "prog.bc");
  ASSERT_THAT_EXPECTED(retargeted, llvm::HasValue(true));
  EXPECT_EQ(llvm::Triple(module->getTargetTriple()).getArch(), llvm::Triple::bpfel);
  EXPECT_EQ(module->getDataLayout().getStringRepresentation().find("f80"), std::string::npos)
      << "the host's data layout stayed";
  const llvm::Function &prog = *module->getFunction("prog");
  for (const char *attribute : {"target-cpu", "target-features", "tune-cpu"})
    EXPECT_FALSE(prog.hasFnAttribute(attribute)) << attribute;
  EXPECT_FALSE(prog.hasUWTable());
}

TEST(HostTarget, BpfIrIsLeftAsItIs) {
  llvm::LLVMContext context;
  auto module = parse(context, "target triple = \"bpf\"\n"
                               "define i32 @prog(ptr %ctx) section \"xdp\" { ret i32 2 }\n");
  ASSERT_NE(module, nullptr);
  EXPECT_THAT_EXPECTED(retargetHostModule(*module, "prog.bc"), llvm::HasValue(false));
  EXPECT_EQ(module->getTargetTriple(), "bpf");
}

TEST(HostTarget, HostAssemblyIsRefusedNamingTheFunction) {
  std::string why = refusal("define void @spin() {\n  call void asm sideeffect \"pause\", \"\"()\n"
                            "  ret void\n}\n");
  EXPECT_NE(why.find("prog.bc: LLVM IR for 'x86_64-pc-linux-gnu'"), std::string::npos) << why;
  EXPECT_NE(why.find("function 'spin' has inline assembly for the host ('pause')"),
            std::string::npos)
      << why;
  why = refusal("module asm \"nop\"\n");
  EXPECT_NE(why.find("module-level assembly"), std::string::npos) << why;
}

TEST(HostTarget, HostIntrinsicsAreRefusedNamingTheFunction) {
  std::string why = refusal("declare i64 @llvm.x86.rdtsc()\n"
                            "define i64 @clock() {\n  %t = call i64 @llvm.x86.rdtsc()\n"
                            "  ret i64 %t\n}\n");
  EXPECT_NE(why.find("function 'clock' calls the host's intrinsic 'llvm.x86.rdtsc'"),
            std::string::npos)
      << why;
  // Target-independent intrinsics lower for BPF: retargeted.
  EXPECT_EQ(refusal("declare i32 @llvm.bswap.i32(i32)\n"
                    "define i32 @swap(i32 %x) {\n  %y = call i32 @llvm.bswap.i32(i32 %x)\n"
                    "  ret i32 %y\n}\n"),
            "");
}

TEST(HostTarget, TypesLaidOutOtherwiseForBpfAreRefusedNamingThem) {
  // A 32-bit pointer of x86's address space 270 is 8 bytes for BPF: the
  // struct holding one grows.
  std::string why = refusal("%struct.narrow = type { ptr addrspace(270), i32 }\n"
                            "@narrow = global %struct.narrow zeroinitializer\n");
  EXPECT_NE(why.find("type %struct.narrow (8 bytes for the host, 16 for BPF)"),
            std::string::npos)
      << why;
  why = refusal("define x86_64_sysvcc i32 @f() {\n  ret i32 0\n}\n");
  EXPECT_NE(why.find("function 'f' uses the host's calling convention"), std::string::npos)
      << why;
  // LLVM's own fastcc (O2 gives it to internal functions) is no host's.
  EXPECT_EQ(refusal("define internal fastcc i32 @g() {\n  ret i32 0\n}\n"), "");
  why = refusal("",
                "target datalayout = \"E-m:e-i64:64-n32:64-S128\"\n"
                "target triple = \"powerpc64-unknown-linux-gnu\"\n");
  EXPECT_NE(why.find("big-endian"), std::string::npos) << why;
}

} // namespace
} // namespace morpheus::bpf
