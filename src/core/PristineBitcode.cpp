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
PristineBitcode::parse(llvm::LLVMContext &context) const {
  auto parsed = llvm::parseBitcodeFile(
      llvm::MemoryBufferRef(llvm::StringRef(bitcode.data(), bitcode.size()), identifier),
      context);
  if (!parsed)
    return withContext(parsed.takeError(), identifier + ": cannot read the pristine IR back");
  return std::move(*parsed);
}

} // namespace morpheus::core
