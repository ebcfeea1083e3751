// In-process code generation: inline asm is assembled, and no input (bad
// asm, an LLVM fatal error, a crash inside LLVM) ends the process.
#include "backend/bpf/Codegen.h"
#include "backend/bpf/Frontend.h"
#include "support/FileCache.h"

#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>
#include <llvm/AsmParser/Parser.h>
#include <llvm/IR/DebugInfo.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Transforms/Utils/Cloning.h>
#include <llvm/ADT/ScopeExit.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/ErrorHandling.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/SourceMgr.h>

#include <cstdlib>
#include <map>
#include <set>

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

// Sections the kernel loads or libbpf reads (code, relocations, maps, BTF),
// by name: all but DWARF. Relocations and symbols by symbol name, as
// libbpf resolves them (their indices shift with the DWARF sections).
std::map<std::string, std::string> loadedSections(const std::vector<char> &elf) {
  auto object = llvm::object::ObjectFile::createObjectFile(
      llvm::MemoryBufferRef(llvm::StringRef(elf.data(), elf.size()), "elf"));
  EXPECT_THAT_EXPECTED(object, llvm::Succeeded());
  std::map<std::string, std::string> sections;
  if (!object)
    return sections;
  auto sectionName = [](const llvm::object::SectionRef &section) {
    llvm::Expected<llvm::StringRef> name = section.getName();
    if (!name) {
      llvm::consumeError(name.takeError());
      return std::string();
    }
    return name->str();
  };
  for (const llvm::object::SectionRef &section : (*object)->sections()) {
    std::string name = sectionName(section);
    if (name.find(".debug_") != std::string::npos || name == ".symtab" || name == ".strtab" ||
        name == ".llvm_addrsig")
      continue;
    llvm::Expected<llvm::object::section_iterator> relocated = section.getRelocatedSection();
    if (!relocated)
      llvm::consumeError(relocated.takeError());
    else if (*relocated != (*object)->section_end()) {
      std::string relocations;
      for (const llvm::object::RelocationRef &relocation : section.relocations()) {
        llvm::Expected<llvm::StringRef> symbol = relocation.getSymbol()->getName();
        std::string symbolName = symbol ? symbol->str() : "";
        if (!symbol)
          llvm::consumeError(symbol.takeError());
        if (symbolName.empty()) { // a section's symbol
          auto in = relocation.getSymbol()->getSection();
          if (!in)
            llvm::consumeError(in.takeError());
          else if (*in != (*object)->section_end())
            symbolName = "section " + sectionName(**in);
        }
        relocations += std::to_string(relocation.getOffset()) + " " +
                       std::to_string(relocation.getType()) + " " + symbolName + "\n";
      }
      sections[name] = relocations;
      continue;
    }
    llvm::Expected<llvm::StringRef> contents = section.getContents();
    if (!contents) {
      llvm::consumeError(contents.takeError());
      continue;
    }
    sections[name] = contents->str();
  }
  std::set<std::string> symbols; // in order of name: indices shift too
  for (const llvm::object::SymbolRef &symbol : (*object)->symbols()) {
    llvm::Expected<llvm::StringRef> name = symbol.getName();
    llvm::Expected<uint64_t> value = symbol.getValue();
    llvm::Expected<llvm::object::section_iterator> in = symbol.getSection();
    if (!name || !value || !in) {
      llvm::consumeError(name.takeError());
      llvm::consumeError(value.takeError());
      llvm::consumeError(in.takeError());
      continue;
    }
    std::string where = *in == (*object)->section_end() ? "" : sectionName(**in);
    if (!name->empty() && where.find(".debug_") == std::string::npos)
      symbols.insert(name->str() + " " + where + " " + std::to_string(*value));
  }
  sections["symbols"] = llvm::join(symbols, "\n");
  return sections;
}

// Dropping the variables' locations before code generation (emitObject:
// #dbg_value, #dbg_declare, #dbg_assign and its assignment tracking)
// changes no instruction, relocation, map or BTF byte: the same module
// generated with them (LLVM's own pipeline, as emitObject runs it) gives
// the same bytes.
TEST(Codegen, VariablesLocationsAreDroppedAndNoLoadedByteChanges) {
  llvm::LLVMContext context;
  auto source = loadProgram(std::string(MORPHEUS_SOURCE_DIR) + "/tests/programs/composite_filter.bpf.c",
                            {}, context);
  ASSERT_THAT_EXPECTED(source, llvm::Succeeded());
  std::unique_ptr<llvm::Module> &module = source->module;
  auto records = [](const llvm::Module &of) {
    size_t count = 0;
    for (const llvm::Function &function : of)
      for (const llvm::BasicBlock &block : function)
        for (const llvm::Instruction &instruction : block)
          count += llvm::range_size(instruction.getDbgRecordRange()) +
                   llvm::isa<llvm::DbgInfoIntrinsic>(instruction);
    return count;
  };
  ASSERT_TRUE(llvm::isAssignmentTrackingEnabled(*module)) << "premise: clang -O2 -g tracks";
  ASSERT_GT(records(*module), 0u) << "premise: clang -g locates variables";
  auto machine = createTargetMachine(*module);
  ASSERT_THAT_EXPECTED(machine, llvm::Succeeded());

  std::unique_ptr<llvm::Module> tracked = llvm::CloneModule(*module);
  tracked->setDataLayout((*machine)->createDataLayout());
  llvm::SmallVector<char, 0> reference;
  llvm::raw_svector_ostream stream(reference);
  llvm::legacy::PassManager passes;
  ASSERT_FALSE((*machine)->addPassesToEmitFile(passes, stream, nullptr,
                                               llvm::CodeGenFileType::ObjectFile));
  passes.run(*tracked);

  std::unique_ptr<llvm::Module> dropped = llvm::CloneModule(*module);
  auto object = emitObject(*dropped, **machine);
  ASSERT_THAT_EXPECTED(object, llvm::Succeeded());
  EXPECT_FALSE(llvm::isAssignmentTrackingEnabled(*dropped));
  EXPECT_EQ(records(*dropped), 0u);
  std::map<std::string, std::string> expected =
      loadedSections(std::vector<char>(reference.begin(), reference.end()));
  EXPECT_GT(expected.count(".BTF"), 0u);
  EXPECT_GT(expected.count(".BTF.ext"), 0u);
  EXPECT_EQ(loadedSections(*object), expected);
}

// The object cache: the same module is read back (a planted entry under
// its name is what comes back, so the hit really skips code generation);
// a module that differs in one constant is another entry.
TEST(Codegen, TheSameModuleIsReadBackFromTheObjectCacheAndAnotherIsGenerated) {
  llvm::SmallString<128> cache;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("morpheus-object-cache", cache));
  auto cleanup = llvm::make_scope_exit([&] { llvm::sys::fs::remove_directories(cache); });
  auto emit = [&](int constant) -> Expected<std::vector<char>> {
    llvm::LLVMContext context;
    llvm::SMDiagnostic diagnostic;
    auto module = llvm::parseAssemblyString(
        "target triple = \"bpf\"\ndefine i64 @prog(ptr %ctx) section \"xdp\" {\n  ret i64 " +
            std::to_string(constant) + "\n}\n",
        diagnostic, context);
    if (!module)
      return makeError("{0}", diagnostic.getMessage().str());
    auto machine = createTargetMachine(*module);
    if (!machine)
      return machine.takeError();
    return emitObject(*module, **machine, cache.str().str());
  };
  auto entries = [&] {
    std::vector<std::string> names;
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(cache + "/object", ec), end; !ec && it != end;
         it.increment(ec))
      names.push_back(llvm::sys::path::filename(it->path()).str());
    return names;
  };
  auto first = emit(7);
  ASSERT_THAT_EXPECTED(first, llvm::Succeeded());
  std::vector<std::string> stored = entries();
  ASSERT_EQ(stored.size(), 1u);
  auto again = emit(7);
  ASSERT_THAT_EXPECTED(again, llvm::Succeeded());
  EXPECT_EQ(*again, *first);

  llvm::StringRef name = stored[0];
  ASSERT_TRUE(name.consume_front("object-") && name.consume_back(".o")) << stored[0];
  FileCache(cache.str().str(), "object", ".o").store(name.str(), "planted");
  auto planted = emit(7);
  ASSERT_THAT_EXPECTED(planted, llvm::Succeeded());
  EXPECT_EQ(std::string(planted->begin(), planted->end()), "planted");

  auto other = emit(8);
  ASSERT_THAT_EXPECTED(other, llvm::Succeeded());
  EXPECT_NE(*other, *first);
  EXPECT_EQ(entries().size(), 2u);
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
