#pragma once

#include "core/Globals.h"
#include "core/GuardPlanning.h"

#include <llvm/IR/PassManager.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace morpheus::core {

// Places the guard at the start of every root planGuards() decided to
// guard. A guard it cannot place (a runtime function missing, a tail-call
// fallback for a root without a ctx or an integer result, a missing
// generic copy) is recorded in `failure`: the caller must then fail the
// specialization, never ship unguarded code.
class ProgramGuardPass : public llvm::PassInfoMixin<ProgramGuardPass> {
public:
  // `globalChecks`: the global bytes the table passes folded; every guarded
  // root compares them with the live ones too (core/Globals.h).
  ProgramGuardPass(const ProgramGuardOptions &options, const GuardPlan &plan,
                   const std::vector<GlobalCheck> &globalChecks,
                   std::optional<std::string> *failure)
      : options(options), plan(plan), globalChecks(globalChecks), failure(failure) {}
  llvm::PreservedAnalyses run(llvm::Module &module, llvm::ModuleAnalysisManager &mam);

private:
  const ProgramGuardOptions &options;
  const GuardPlan &plan;
  const std::vector<GlobalCheck> &globalChecks;
  std::optional<std::string> *failure;
};

} // namespace morpheus::core
