#include "core/PristineBitcode.h"

#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/Bitcode/BitcodeWriter.h>
#include <llvm/Support/raw_ostream.h>

namespace morpheus::core {

PristineBitcode::PristineBitcode(const llvm::Module &pristine)
    : identifier(pristine.getModuleIdentifier()) {
  llvm::raw_svector_ostream stream(bitcode);
  llvm::WriteBitcodeToFile(pristine, stream, /*ShouldPreserveUseListOrder=*/true);
}

Expected<std::unique_ptr<llvm::Module>>
PristineBitcode::parse(llvm::LLVMContext &context, const std::set<std::string> &bodiless) const {
  llvm::MemoryBufferRef buffer(llvm::StringRef(bitcode.data(), bitcode.size()), identifier);
  auto cannotRead = [&](Error err) {
    return withContext(std::move(err), identifier + ": cannot read the pristine IR back");
  };
  if (bodiless.empty()) {
    auto parsed = llvm::parseBitcodeFile(buffer, context);
    if (!parsed)
      return cannotRead(parsed.takeError());
    return std::move(*parsed);
  }
  // Lazily: a function body is read when materialized. Those dropped
  // before are declarations, which reading the rest passes over.
  auto lazy = llvm::getLazyBitcodeModule(buffer, context);
  if (!lazy)
    return cannotRead(lazy.takeError());
  for (const std::string &name : bodiless)
    if (llvm::Function *function = (*lazy)->getFunction(name))
      function->deleteBody();
  if (Error err = (*lazy)->materializeAll())
    return cannotRead(std::move(err));
  return std::move(*lazy);
}

} // namespace morpheus::core
