// A program's pristine IR kept as bitcode, from which every version is
// parsed into an LLVMContext of its own.
//
// Why: an LLVMContext owns everything uniqued in it (constants such as the
// value arrays a version inlines, debug-info metadata, which a module's
// clone duplicates, the types of the runtime linked into a version) until
// the context itself is destroyed; destroying a module gives none of it
// back. Versions cloned within the pristine module's context grew a
// long-running optimizer by every version it built (0.1-0.25 MB each),
// forever. A version parsed into a context of its own leaves nothing
// behind once module and context go; a crash while building it cannot
// have touched the pristine module, so the crashed context is abandoned
// alone.
//
// Why it is the same program: the bitcode is written with its use-list
// order, so each parse is the pristine module exactly, as a clone is.
#pragma once

#include "support/Error.h"

#include <llvm/ADT/SmallVector.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <memory>
#include <set>
#include <string>

namespace morpheus::core {

class PristineBitcode {
public:
  PristineBitcode() = default;
  explicit PristineBitcode(const llvm::Module &pristine);

  // A copy of the pristine module in `context` (a fresh one per version;
  // it must outlive the module). The functions named in `bodiless` are
  // declared only: their bodies are never read (a version that leaves
  // those programs out: reading them was most of a partial build's copy).
  Expected<std::unique_ptr<llvm::Module>>
  parse(llvm::LLVMContext &context, const std::set<std::string> &bodiless = {}) const;

  size_t size() const { return bitcode.size(); }

private:
  llvm::SmallVector<char, 0> bitcode;
  std::string identifier;
};

} // namespace morpheus::core
