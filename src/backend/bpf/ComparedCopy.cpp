#include "backend/bpf/ComparedCopy.h"

#include "backend/bpf/BpfSignatures.h"
#include "backend/bpf/Frontend.h"
#include "core/ReplayCalls.h"

#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/Transforms/Utils/Cloning.h>
#include <llvm/Transforms/Utils/ModuleUtils.h>

#include <elf.h>

#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

extern "C" const unsigned char morpheus_replay_runtime_start[];
extern "C" const unsigned char morpheus_replay_runtime_end[];

using namespace llvm;

namespace morpheus::bpf {

bool callsReplayedHelpers(const Module &module) {
  for (const Function &function : module)
    for (const Instruction &instruction : instructions(function))
      if (const auto *call = dyn_cast<CallBase>(&instruction))
        if (replayerOfCall(*call))
          return true;
  return false;
}

namespace {

std::vector<const char *> replayerNames() {
  std::vector<const char *> names;
  for (const ReplayedHelper &replayed : ReplayedHelpers)
    names.push_back(replayed.replayer);
  return names;
}

Error linkReplayRuntime(Module &module) {
  StringRef bitcode(reinterpret_cast<const char *>(morpheus_replay_runtime_start),
                    morpheus_replay_runtime_end - morpheus_replay_runtime_start);
  return linkBitcode(module, bitcode, "replay runtime", replayerNames());
}

} // namespace

Expected<unsigned> makeComparedCopy(Module &module) {
  core::ReplayCallsOptions options{replayerOfCall};
  unsigned replaced = 0;
  ModuleAnalysisManager unused;
  core::ReplayCallsPass(options, &replaced).run(module, unused);
  if (!replaced)
    return 0;
  if (Error err = linkReplayRuntime(module))
    return err;
  const std::vector<const char *> functions = replayerNames();
  // Each call inlined where it is, and nothing else touched: the copy is the
  // code under comparison.
  for (const char *name : functions) {
    Function *replayer = module.getFunction(name);
    if (!replayer)
      continue;
    std::vector<CallBase *> calls;
    for (User *user : replayer->users())
      if (auto *call = dyn_cast<CallBase>(user))
        calls.push_back(call);
    for (CallBase *call : calls) {
      InlineFunctionInfo info;
      InlineResult inlined = InlineFunction(*call, info);
      if (!inlined.isSuccess())
        return makeError("{0}: cannot inline {1}: {2}", module.getModuleIdentifier(), name,
                         inlined.getFailureReason());
    }
    if (replayer->use_empty())
      replayer->eraseFromParent();
  }
  return replaced;
}

bool replayedCallsPatchable(const Module &module) {
  for (const Function &function : module)
    for (const Instruction &instruction : instructions(function))
      if (const auto *call = dyn_cast<CallBase>(&instruction)) {
        // Empty asm is a barrier (core/OpaqueValue): no instruction.
        if (const auto *assembly = dyn_cast<InlineAsm>(call->getCalledOperand());
            assembly && !assembly->getAsmString().empty())
          return false;
        if (const Function *callee = call->getCalledFunction();
            callee && callee->getName().starts_with("llvm.bpf.load."))
          return false;
      }
  return true;
}

Error carryReplayRuntime(Module &module) {
  std::set<std::string> called;
  for (Function &function : module)
    for (Instruction &instruction : instructions(function))
      if (auto *call = dyn_cast<CallBase>(&instruction))
        if (std::optional<core::Replayer> replayer = replayerOfCall(*call))
          called.insert(replayer->function);
  if (called.empty())
    return Error::success();
  if (Error err = linkReplayRuntime(module))
    return err;
  std::vector<GlobalValue *> kept;
  for (const char *name : replayerNames()) {
    Function *replayer = module.getFunction(name);
    if (!replayer)
      continue;
    if (!called.count(name)) {
      replayer->eraseFromParent();
      continue;
    }
    replayer->removeFnAttr(Attribute::AlwaysInline);
    replayer->addFnAttr(Attribute::NoInline);
    kept.push_back(replayer);
  }
  // Kept from LLVM's optimizations but not marked retained in the object
  // (llvm.used would give each a section of its own, which libbpf takes for
  // a program's): they stay in .text, where libbpf looks for subprograms.
  appendToCompilerUsed(module, kept);
  return Error::success();
}

namespace {

constexpr size_t InsnSize = 8;
constexpr uint8_t CallOpcode = 0x85; // BPF_JMP | BPF_CALL
constexpr uint8_t PseudoCall = 1;    // src_reg of a bpf-to-bpf call

bool isClassicPacketLoad(uint8_t opcode) {
  uint8_t mode = opcode & 0xe0;
  return (opcode & 0x07) == 0x00 /* BPF_LD */ && (mode == 0x20 || mode == 0x40);
}

// The object as sections, with edits appended: ELF64 little-endian
// relocatable objects, as LLVM's BPF target writes them.
class RelocatableObject {
public:
  static Expected<RelocatableObject> parse(ArrayRef<char> elf) {
    RelocatableObject object;
    object.bytes.assign(elf.begin(), elf.end());
    if (elf.size() < sizeof(Elf64_Ehdr))
      return object.malformed("shorter than an ELF header");
    std::memcpy(&object.header, elf.data(), sizeof(Elf64_Ehdr));
    const Elf64_Ehdr &header = object.header;
    if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) || header.e_ident[EI_CLASS] != ELFCLASS64 ||
        header.e_ident[EI_DATA] != ELFDATA2LSB || header.e_type != ET_REL ||
        header.e_machine != EM_BPF || header.e_shentsize != sizeof(Elf64_Shdr))
      return object.malformed("not a 64-bit little-endian BPF relocatable object");
    if (header.e_shoff > elf.size() ||
        (elf.size() - header.e_shoff) / sizeof(Elf64_Shdr) < header.e_shnum ||
        header.e_shstrndx >= header.e_shnum)
      return object.malformed("section headers out of bounds");
    object.sections.resize(header.e_shnum);
    std::memcpy(object.sections.data(), elf.data() + header.e_shoff,
                header.e_shnum * sizeof(Elf64_Shdr));
    for (const Elf64_Shdr &section : object.sections)
      if (section.sh_type != SHT_NOBITS &&
          (section.sh_offset > elf.size() || elf.size() - section.sh_offset < section.sh_size))
        return object.malformed("a section out of bounds");
    return object;
  }

  Error malformed(const Twine &why) const {
    return makeError("compared copy: the version's object is malformed: {0}", why.str());
  }

  char *contents(size_t index) { return bytes.data() + sections[index].sh_offset; }
  std::string name(size_t index) const {
    const Elf64_Shdr &names = sections[header.e_shstrndx];
    size_t at = sections[index].sh_name;
    if (at >= names.sh_size)
      return "";
    const char *start = bytes.data() + names.sh_offset + at;
    return std::string(start, strnlen(start, names.sh_size - at));
  }

  // Appends `data` at the end of the object and points section `index` at
  // it (the old bytes stay, unreferenced).
  void moveSection(size_t index, ArrayRef<char> data) {
    bytes.resize((bytes.size() + 7) & ~size_t(7));
    sections[index].sh_offset = bytes.size();
    sections[index].sh_size = data.size();
    bytes.insert(bytes.end(), data.begin(), data.end());
  }

  // Section `index`'s relocations plus `added`, in the relocation section
  // that applies to it (made, named as LLVM names them, when it has none).
  void addRelocations(size_t index, size_t symbols, ArrayRef<Elf64_Rel> added) {
    ArrayRef<char> addedBytes(reinterpret_cast<const char *>(added.data()),
                              added.size() * sizeof(Elf64_Rel));
    for (size_t at = 0; at < sections.size(); ++at)
      if (sections[at].sh_type == SHT_REL && sections[at].sh_info == index &&
          sections[at].sh_link == symbols) {
        std::vector<char> grown(contents(at), contents(at) + sections[at].sh_size);
        grown.insert(grown.end(), addedBytes.begin(), addedBytes.end());
        moveSection(at, grown);
        return;
      }
    size_t names = header.e_shstrndx;
    std::vector<char> grownNames(contents(names), contents(names) + sections[names].sh_size);
    Elf64_Shdr relocations{};
    relocations.sh_name = grownNames.size();
    std::string relName = ".rel" + name(index);
    grownNames.insert(grownNames.end(), relName.begin(), relName.end());
    grownNames.push_back('\0');
    moveSection(names, grownNames);
    relocations.sh_type = SHT_REL;
    relocations.sh_flags = SHF_INFO_LINK;
    relocations.sh_link = symbols;
    relocations.sh_info = index;
    relocations.sh_addralign = 8;
    relocations.sh_entsize = sizeof(Elf64_Rel);
    sections.push_back(relocations);
    moveSection(sections.size() - 1, addedBytes);
  }

  std::vector<char> write() {
    bytes.resize((bytes.size() + 7) & ~size_t(7));
    header.e_shoff = bytes.size();
    header.e_shnum = sections.size();
    const char *table = reinterpret_cast<const char *>(sections.data());
    bytes.insert(bytes.end(), table, table + sections.size() * sizeof(Elf64_Shdr));
    std::memcpy(bytes.data(), &header, sizeof(Elf64_Ehdr));
    return std::move(bytes);
  }

  Elf64_Ehdr header;
  std::vector<Elf64_Shdr> sections;
  std::vector<char> bytes;
};

struct ReplayerSymbol {
  uint32_t index;  // in the symbol table
  uint16_t section;
  uint64_t offset; // of its first instruction in its section
  uint64_t size;
};

} // namespace

Expected<std::vector<char>> patchReplayedCalls(ArrayRef<char> elf) {
  auto parsed = RelocatableObject::parse(elf);
  if (!parsed)
    return parsed.takeError();
  RelocatableObject &object = *parsed;
  size_t symbols = 0;
  for (size_t index = 0; index < object.sections.size(); ++index)
    if (object.sections[index].sh_type == SHT_SYMTAB)
      symbols = index;
  const Elf64_Shdr &symbolTable = object.sections[symbols];
  if (!symbols || symbolTable.sh_link >= object.sections.size() ||
      symbolTable.sh_entsize != sizeof(Elf64_Sym))
    return object.malformed("no symbol table");
  const Elf64_Shdr &symbolNames = object.sections[symbolTable.sh_link];

  // Helper id -> its replayer's symbol.
  std::map<uint64_t, ReplayerSymbol> replayers;
  for (uint32_t index = 0; index < symbolTable.sh_size / sizeof(Elf64_Sym); ++index) {
    Elf64_Sym symbol;
    std::memcpy(&symbol, object.contents(symbols) + index * sizeof(Elf64_Sym), sizeof symbol);
    if (ELF64_ST_TYPE(symbol.st_info) != STT_FUNC || symbol.st_name >= symbolNames.sh_size ||
        symbol.st_shndx >= object.sections.size())
      continue;
    const char *start = object.bytes.data() + symbolNames.sh_offset + symbol.st_name;
    std::string name(start, strnlen(start, symbolNames.sh_size - symbol.st_name));
    for (const ReplayedHelper &replayed : ReplayedHelpers)
      if (name == replayed.replayer)
        replayers[replayed.helper] = {index, symbol.st_shndx, symbol.st_value, symbol.st_size};
  }
  auto insideReplayer = [&](size_t section, uint64_t offset) {
    for (const auto &[helper, replayer] : replayers)
      if (replayer.section == section && offset >= replayer.offset &&
          offset < replayer.offset + replayer.size)
        return true;
    return false;
  };

  std::map<size_t, std::vector<Elf64_Rel>> added;
  for (size_t index = 0; index < object.sections.size(); ++index) {
    const Elf64_Shdr &section = object.sections[index];
    if (section.sh_type != SHT_PROGBITS || !(section.sh_flags & SHF_EXECINSTR))
      continue;
    for (uint64_t offset = 0; offset + InsnSize <= section.sh_size; offset += InsnSize) {
      char *insn = object.contents(index) + offset;
      uint8_t opcode = insn[0];
      if (isClassicPacketLoad(opcode))
        return makeError("compared copy: section '{0}' loads packet bytes the classic way "
                         "(BPF_LD_ABS/IND), which the kernel refuses beside bpf-to-bpf calls",
                         object.name(index));
      int32_t helper;
      std::memcpy(&helper, insn + 4, sizeof helper);
      uint8_t sourceRegister = uint8_t(insn[1]) >> 4;
      if (opcode != CallOpcode || sourceRegister != 0 || !replayerOf(uint32_t(helper)) ||
          insideReplayer(index, offset))
        continue;
      auto replayer = replayers.find(uint32_t(helper));
      if (replayer == replayers.end())
        return makeError("compared copy: section '{0}' calls helper {1} at instruction {2}, "
                         "and the object carries no replayer for it",
                         object.name(index), helper, offset / InsnSize);
      insn[1] = char((PseudoCall << 4) | (insn[1] & 0x0f));
      int32_t target;
      if (replayer->second.section == index) {
        // Within one section libbpf takes the call as relative, unrelocated.
        target = int32_t((int64_t(replayer->second.offset) - int64_t(offset)) / InsnSize - 1);
      } else {
        // Across sections the relocation names the replayer; libbpf calls
        // the symbol's instruction + imm + 1.
        target = -1;
        added[index].push_back({offset, ELF64_R_INFO(replayer->second.index, R_BPF_64_32)});
      }
      std::memcpy(insn + 4, &target, sizeof target);
    }
  }
  for (const auto &[index, relocations] : added)
    object.addRelocations(index, symbols, relocations);
  return object.write();
}

} // namespace morpheus::bpf
