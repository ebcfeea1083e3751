#pragma once

#include <llvm/IR/PassManager.h>

#include <cstdint>
#include <string>
#include <vector>

namespace morpheus::core {

struct ProgramGuardOptions {
  // `i64 guard(ptr ctx, i64 version, i32 slot)`, provided by the backend's
  // runtime: returns a negative value when the specialized code may run,
  // otherwise the verdict to return (after falling back to the original).
  std::string guardFunction;
  uint64_t version = 0;             // what the guard word must still hold
  // Guarded program entry functions; slot = index. An empty name leaves
  // that slot unused (a program that could not get a fallback).
  std::vector<std::string> entries;
};

class ProgramGuardPass : public llvm::PassInfoMixin<ProgramGuardPass> {
public:
  explicit ProgramGuardPass(ProgramGuardOptions options)
      : options(std::move(options)) {}
  llvm::PreservedAnalyses run(llvm::Module &module,
                              llvm::ModuleAnalysisManager &mam);

private:
  ProgramGuardOptions options;
};

} // namespace morpheus::core
