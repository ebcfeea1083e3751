#pragma once

#include "core/Globals.h"
#include "core/GuardPlanning.h"

#include <llvm/IR/PassManager.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace morpheus::core {

struct ProgramGuardOptions {
  // Provided by the backend's runtime:
  //   i32 holds(i64 version): non-zero while code built for `version` may run;
  //   i64 enter(ptr ctx, i64 version, i32 slot, i32 failure): negative when
  //       it may run; otherwise it tail-calls the original and, when that
  //       cannot run, returns `failure` (the entry's failureVerdict).
  std::string holdsFunction;
  std::string enterFunction;
  uint64_t version = 0; // what the guard word must still hold
  // The backend's fallback per program entry (GuardPlanning.h).
  std::vector<EntryFallback> entries;
};

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
