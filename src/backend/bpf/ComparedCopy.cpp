#include "backend/bpf/ComparedCopy.h"

#include "backend/bpf/BpfSignatures.h"
#include "backend/bpf/Frontend.h"
#include "core/ReplayCalls.h"

#include <llvm/ADT/STLExtras.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/Instructions.h>
#include <llvm/Object/ELF.h>
#include <llvm/Transforms/Utils/Cloning.h>
#include <llvm/Transforms/Utils/ModuleUtils.h>

#include <elf.h>

#include <algorithm>
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
  // Each call inlined where it is, and nothing else touched: the copy is the
  // code under comparison.
  for (const char *name : replayerNames()) {
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

Error malformed(const Twine &why) {
  return makeError("compared copy: the version's object is malformed: {0}", why.str());
}

// An object's bytes and section headers (as LLVM's ELF reader parsed them),
// with edits appended: what a section held before stays in place,
// unreferenced, and the section table is written anew at the end.
class ObjectEdit {
public:
  ObjectEdit(ArrayRef<char> elf, const Elf64_Ehdr &header, ArrayRef<Elf64_Shdr> sections)
      : header(header), sections(sections.begin(), sections.end()),
        bytes(elf.begin(), elf.end()) {}

  char *contents(size_t index) { return bytes.data() + sections[index].sh_offset; }

  // Section `index`'s relocations plus `added`, in the relocation section
  // that applies to it, or in one made for it and named as LLVM names
  // them (".rel" + `name`, the section's).
  void addRelocations(size_t index, StringRef name, size_t symbols, ArrayRef<Elf64_Rel> added) {
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
    std::string relName = (".rel" + name).str();
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

private:
  // Appends `data` at the end of the object and points section `index` at it.
  void moveSection(size_t index, ArrayRef<char> data) {
    bytes.resize((bytes.size() + 7) & ~size_t(7));
    sections[index].sh_offset = bytes.size();
    sections[index].sh_size = data.size();
    bytes.insert(bytes.end(), data.begin(), data.end());
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
  auto file = object::ELF64LEFile::create(StringRef(elf.data(), elf.size()));
  if (!file)
    return malformed(toString(file.takeError()));
  if (file->getHeader().e_type != ET_REL || file->getHeader().e_machine != EM_BPF)
    return malformed("not a BPF relocatable object");
  auto sections = file->sections();
  if (!sections)
    return malformed(toString(sections.takeError()));
  // Every section within the object: the edit reads and moves them.
  for (const auto &section : *sections)
    if (section.sh_type != SHT_NOBITS)
      if (auto contents = file->getSectionContents(section); !contents)
        return malformed(toString(contents.takeError()));
  Elf64_Ehdr header;
  std::memcpy(&header, &file->getHeader(), sizeof header);
  static_assert(sizeof(object::ELF64LE::Shdr) == sizeof(Elf64_Shdr));
  ObjectEdit edit(elf, header,
                  {reinterpret_cast<const Elf64_Shdr *>(sections->data()), sections->size()});
  auto symbolTable = std::find_if(sections->begin(), sections->end(), [](const auto &section) {
    return section.sh_type == SHT_SYMTAB;
  });
  if (symbolTable == sections->end())
    return malformed("no symbol table");
  size_t symbols = symbolTable - sections->begin();
  auto symbolEntries = file->symbols(&*symbolTable);
  auto symbolNames = file->getStringTableForSymtab(*symbolTable);
  if (!symbolEntries)
    return malformed(toString(symbolEntries.takeError()));
  if (!symbolNames)
    return malformed(toString(symbolNames.takeError()));

  // Helper id -> its replayer's symbol.
  std::map<uint64_t, ReplayerSymbol> replayers;
  for (const auto &[index, symbol] : enumerate(*symbolEntries)) {
    if (symbol.getType() != STT_FUNC)
      continue;
    Expected<StringRef> name = symbol.getName(*symbolNames);
    if (!name)
      return malformed(toString(name.takeError()));
    for (const ReplayedHelper &replayed : ReplayedHelpers)
      if (*name == replayed.replayer)
        replayers[replayed.helper] = {uint32_t(index), symbol.st_shndx, symbol.st_value,
                                      symbol.st_size};
  }
  auto insideReplayer = [&](size_t section, uint64_t offset) {
    for (const auto &[helper, replayer] : replayers)
      if (replayer.section == section && offset >= replayer.offset &&
          offset < replayer.offset + replayer.size)
        return true;
    return false;
  };
  auto sectionName = [&](size_t index) {
    Expected<StringRef> name = file->getSectionName((*sections)[index]);
    if (name)
      return name->str();
    consumeError(name.takeError());
    return std::string("#") + std::to_string(index);
  };

  std::map<size_t, std::vector<Elf64_Rel>> added;
  for (size_t index = 0; index < sections->size(); ++index) {
    const auto &section = (*sections)[index];
    if (section.sh_type != SHT_PROGBITS || !(section.sh_flags & SHF_EXECINSTR))
      continue;
    for (uint64_t offset = 0; offset + InsnSize <= section.sh_size; offset += InsnSize) {
      char *insn = edit.contents(index) + offset;
      uint8_t opcode = insn[0];
      if (isClassicPacketLoad(opcode))
        return makeError("compared copy: section '{0}' loads packet bytes the classic way "
                         "(BPF_LD_ABS/IND), which the kernel refuses beside bpf-to-bpf calls",
                         sectionName(index));
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
                         sectionName(index), helper, offset / InsnSize);
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
    edit.addRelocations(index, sectionName(index), symbols, relocations);
  return edit.write();
}

} // namespace morpheus::bpf
