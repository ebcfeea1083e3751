// A version's compared copy without a code generation of its own
// (backend/bpf/ComparedCopy): the live object with its calls of replayed
// helpers, and nothing else, made calls of the replayers it carries; and
// the modules the kernel would refuse that for are told apart.
#include "backend/bpf/ComparedCopy.h"
#include "backend/bpf/Codegen.h"

#include <gtest/gtest.h>
#include <llvm/AsmParser/Parser.h>
#include <llvm/Object/ELFObjectFile.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Testing/Support/Error.h>

#include <elf.h>

#include <cstring>
#include <map>

namespace morpheus::bpf {
namespace {

// An entry that reads the clock (no map, no call: its section has no
// relocations until the patch adds one), and one that calls a subprogram
// of its own that draws a random number.
constexpr const char *ClockAndRandom = R"(
target triple = "bpf"
define internal i64 @draw() noinline {
  %n = call i64 inttoptr (i64 7 to ptr)()
  ret i64 %n
}
define i64 @clock(ptr %ctx) section "xdp" {
  %t = call i64 inttoptr (i64 5 to ptr)()
  ret i64 %t
}
define i64 @sample(ptr %ctx) section "tc" {
  %n = call i64 @draw()
  ret i64 %n
}
)";

std::unique_ptr<llvm::Module> parse(llvm::LLVMContext &context, const std::string &text) {
  llvm::SMDiagnostic diagnostic;
  auto module = llvm::parseAssemblyString(text, diagnostic, context);
  EXPECT_TRUE(module) << diagnostic.getMessage().str();
  return module;
}

struct Section {
  std::string bytes;
  std::map<uint64_t, std::pair<unsigned, std::string>> relocations; // offset -> type, symbol
};

std::map<std::string, Section> sectionsOf(const std::vector<char> &elf) {
  std::map<std::string, Section> sections;
  auto object = llvm::object::ObjectFile::createObjectFile(
      llvm::MemoryBufferRef(llvm::StringRef(elf.data(), elf.size()), "elf"));
  EXPECT_THAT_EXPECTED(object, llvm::Succeeded());
  if (!object)
    return sections;
  for (const llvm::object::SectionRef &section : (*object)->sections()) {
    llvm::StringRef name = llvm::cantFail(section.getName());
    auto relocated = llvm::cantFail(section.getRelocatedSection());
    if (relocated != (*object)->section_end()) {
      Section &target = sections[llvm::cantFail(relocated->getName()).str()];
      for (const llvm::object::RelocationRef &relocation : section.relocations())
        target.relocations[relocation.getOffset()] = {
            unsigned(relocation.getType()),
            llvm::cantFail(relocation.getSymbol()->getName()).str()};
    } else if (section.isText()) {
      sections[name.str()].bytes = llvm::cantFail(section.getContents()).str();
    }
  }
  return sections;
}

std::map<std::string, uint64_t> functionOffsets(const std::vector<char> &elf) {
  std::map<std::string, uint64_t> offsets;
  auto object = llvm::cantFail(llvm::object::ObjectFile::createObjectFile(
      llvm::MemoryBufferRef(llvm::StringRef(elf.data(), elf.size()), "elf")));
  for (const llvm::object::SymbolRef &symbol : object->symbols())
    if (llvm::cantFail(symbol.getType()) == llvm::object::SymbolRef::ST_Function)
      offsets[llvm::cantFail(symbol.getName()).str()] = llvm::cantFail(symbol.getValue());
  return offsets;
}

struct Insn {
  uint8_t opcode, registers;
  int32_t imm;
};

Insn insnAt(const std::string &bytes, uint64_t offset) {
  Insn insn;
  insn.opcode = uint8_t(bytes[offset]);
  insn.registers = uint8_t(bytes[offset + 1]);
  std::memcpy(&insn.imm, bytes.data() + offset + 4, sizeof insn.imm);
  return insn;
}

TEST(ComparedCopy, IsTheLiveObjectWithItsReplayedCallsPatched) {
  llvm::LLVMContext context;
  auto module = parse(context, ClockAndRandom);
  ASSERT_TRUE(module);
  ASSERT_TRUE(callsReplayedHelpers(*module));
  ASSERT_TRUE(replayedCallsPatchable(*module));
  ASSERT_THAT_ERROR(carryReplayRuntime(*module), llvm::Succeeded());
  EXPECT_FALSE(module->getFunction(MORPHEUS_REPLAY_JIFFIES)) << "only the replayers called";
  auto machine = createTargetMachine(*module);
  ASSERT_THAT_EXPECTED(machine, llvm::Succeeded());
  auto live = emitObject(*module, **machine);
  ASSERT_THAT_EXPECTED(live, llvm::Succeeded());
  auto compared = patchReplayedCalls(*live);
  ASSERT_THAT_EXPECTED(compared, llvm::Succeeded());

  std::map<std::string, Section> before = sectionsOf(*live), after = sectionsOf(*compared);
  std::map<std::string, uint64_t> functions = functionOffsets(*live);
  ASSERT_TRUE(functions.count(MORPHEUS_REPLAY_KTIME) && functions.count(MORPHEUS_REPLAY_RANDOM))
      << "the live object carries the replayers";
  EXPECT_EQ(functionOffsets(*compared), functions);
  ASSERT_EQ(before.size(), after.size());
  ASSERT_TRUE(before.count("xdp") && before.count("tc") && before.count(".text"));
  EXPECT_EQ(before["tc"].relocations.size(), 1u) << "its call of draw()";
  EXPECT_TRUE(before["xdp"].relocations.empty()) << "premise: the patch makes xdp's relocations";

  unsigned patched = 0;
  for (const auto &[name, section] : before) {
    const Section &copy = after[name];
    ASSERT_EQ(copy.bytes.size(), section.bytes.size()) << name;
    for (uint64_t offset = 0; offset < section.bytes.size(); offset += 8) {
      if (!section.bytes.compare(offset, 8, copy.bytes, offset, 8))
        continue;
      Insn was = insnAt(section.bytes, offset), is = insnAt(copy.bytes, offset);
      ASSERT_EQ(was.opcode, 0x85) << name << " +" << offset << ": only calls change";
      ASSERT_EQ(was.registers, 0) << "a helper call";
      ASSERT_EQ(is.opcode, 0x85);
      ASSERT_EQ(is.registers, 1 << 4) << "a bpf-to-bpf call";
      ++patched;
      if (name == "xdp") {
        EXPECT_EQ(was.imm, 5);
        EXPECT_EQ(is.imm, -1);
        EXPECT_EQ(copy.relocations.at(offset),
                  std::make_pair(unsigned(R_BPF_64_32), std::string(MORPHEUS_REPLAY_KTIME)));
      } else {
        // Within .text the call is relative and unrelocated, as LLVM's own.
        EXPECT_EQ(name, ".text");
        EXPECT_EQ(was.imm, 7);
        EXPECT_EQ(offset + (is.imm + 1) * 8, functions[MORPHEUS_REPLAY_RANDOM]);
        EXPECT_FALSE(copy.relocations.count(offset));
      }
    }
    for (const auto &[offset, relocation] : section.relocations)
      EXPECT_EQ(copy.relocations.at(offset), relocation) << name << ": kept";
  }
  // The entry's clock and the subprogram's random number; the clock
  // replayer's own call of the helper stays a helper call, tc's call of
  // draw() is untouched.
  EXPECT_EQ(patched, 2u);
}

TEST(ComparedCopy, ClassicPacketLoadsAndAssemblyAreBuiltFromIR) {
  llvm::LLVMContext context;
  auto classic = parse(context, R"(
target triple = "bpf"
declare i64 @llvm.bpf.load.byte(ptr, i64)
define i64 @prog(ptr %skb) section "tc" {
  %protocol = call i64 @llvm.bpf.load.byte(ptr %skb, i64 23)
  %t = call i64 inttoptr (i64 5 to ptr)()
  %sum = add i64 %t, %protocol
  ret i64 %sum
}
)");
  ASSERT_TRUE(classic);
  EXPECT_FALSE(replayedCallsPatchable(*classic));
  // Patched anyway, the object is refused with the reason, not handed to
  // a kernel that would refuse it.
  ASSERT_THAT_ERROR(carryReplayRuntime(*classic), llvm::Succeeded());
  auto machine = createTargetMachine(*classic);
  ASSERT_THAT_EXPECTED(machine, llvm::Succeeded());
  auto object = emitObject(*classic, **machine);
  ASSERT_THAT_EXPECTED(object, llvm::Succeeded());
  auto refused = patchReplayedCalls(*object);
  ASSERT_FALSE(bool(refused));
  EXPECT_NE(llvm::toString(refused.takeError()).find("section 'tc' loads packet bytes the "
                                                     "classic way (BPF_LD_ABS/IND)"),
            std::string::npos);

  auto withAsm = [&](const std::string &text) {
    return parse(context, "target triple = \"bpf\"\ndefine i64 @prog(ptr %ctx) section \"xdp\" {\n"
                          "  %t = call i64 inttoptr (i64 5 to ptr)()\n"
                          "  %o = call i64 asm sideeffect \"" +
                              text +
                              "\", \"=r,0\"(i64 %t)\n"
                              "  ret i64 %o\n}\n");
  };
  EXPECT_TRUE(replayedCallsPatchable(*withAsm(""))) << "an empty barrier holds no instruction";
  EXPECT_FALSE(replayedCallsPatchable(*withAsm("$0 += 1")));
}

} // namespace
} // namespace morpheus::bpf
