#include "backend/bpf/EmittedCode.h"

#include <llvm/Object/ELFObjectFile.h>
#include <llvm/Object/ObjectFile.h>

namespace morpheus::bpf {

Expected<std::map<std::string, FunctionCode>> functionCode(llvm::ArrayRef<char> elf) {
  llvm::MemoryBufferRef buffer(llvm::StringRef(elf.data(), elf.size()), "object");
  auto object = llvm::object::ObjectFile::createELFObjectFile(buffer);
  if (!object)
    return makeError("not a BPF object: {0}", llvm::toString(object.takeError()));
  // Each function's range: section index, start, size.
  struct Range {
    uint64_t section, start, size;
  };
  std::map<std::string, Range> ranges;
  std::map<std::string, FunctionCode> code;
  for (const llvm::object::SymbolRef &symbol : (*object)->symbols()) {
    auto type = symbol.getType();
    if (!type)
      return type.takeError();
    if (*type != llvm::object::SymbolRef::ST_Function)
      continue;
    auto name = symbol.getName();
    auto section = symbol.getSection();
    auto address = symbol.getAddress();
    if (!name)
      return name.takeError();
    if (!section)
      return section.takeError();
    if (!address)
      return address.takeError();
    if (*section == (*object)->section_end())
      continue;
    uint64_t size = llvm::object::ELFSymbolRef(symbol).getSize();
    auto contents = (*section)->getContents();
    if (!contents)
      return contents.takeError();
    if (*address + size > contents->size())
      return makeError("function '{0}' lies beyond its section", *name);
    ranges[name->str()] = {(*section)->getIndex(), *address, size};
    code[name->str()].instructions = contents->substr(*address, size).str();
  }
  for (const llvm::object::SectionRef &relocations : (*object)->sections()) {
    auto target = relocations.getRelocatedSection();
    if (!target)
      return target.takeError();
    if (*target == (*object)->section_end())
      continue;
    uint64_t section = (*target)->getIndex();
    for (const llvm::object::RelocationRef &relocation : relocations.relocations()) {
      std::string named;
      if (auto symbol = relocation.getSymbol(); symbol != (*object)->symbol_end()) {
        auto name = symbol->getName();
        if (!name)
          return name.takeError();
        named = name->str();
        // A section symbol has no name of its own: the section's.
        if (named.empty()) {
          auto symbolSection = symbol->getSection();
          if (!symbolSection)
            return symbolSection.takeError();
          if (*symbolSection != (*object)->section_end()) {
            auto sectionName = (*symbolSection)->getName();
            if (!sectionName)
              return sectionName.takeError();
            named = sectionName->str();
          }
        }
      }
      for (auto &[name, range] : ranges)
        if (range.section == section && relocation.getOffset() >= range.start &&
            relocation.getOffset() < range.start + range.size)
          code[name].relocations.emplace_back(relocation.getOffset() - range.start,
                                              uint32_t(relocation.getType()), named);
    }
  }
  return code;
}

Expected<std::set<std::string>> unchangedFunctions(llvm::ArrayRef<char> version,
                                                   llvm::ArrayRef<char> original) {
  auto now = functionCode(version);
  if (!now)
    return now.takeError();
  auto was = functionCode(original);
  if (!was)
    return was.takeError();
  std::set<std::string> unchanged;
  for (const auto &[function, code] : *now)
    if (auto before = was->find(function); before != was->end() && before->second == code)
      unchanged.insert(function);
  return unchanged;
}

} // namespace morpheus::bpf
