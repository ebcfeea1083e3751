// The calls whose answers differ from run to run (time, randomness),
// replaced in a copy that is compared with others by calls of replayers
// that give every copy the same answers: what a backend runs on such a
// copy. The pass, and why it is correct, is passes/ReplayCalls.cpp.
#pragma once

#include <llvm/IR/InstrTypes.h>
#include <llvm/IR/PassManager.h>

#include <functional>
#include <optional>
#include <string>

namespace morpheus::core {

// A runtime function that replays what a call would answer: it takes no
// arguments and returns an integer of `bits` bits.
struct Replayer {
  std::string function;
  unsigned bits = 64;
};

struct ReplayCallsOptions {
  // The backend's list of calls whose answers differ from run to run: the
  // replayer of `call`, nullopt for any other call.
  std::function<std::optional<Replayer>(const llvm::CallBase &call)> replayerOf;
};

// In a copy that is to be compared with others, replaces every call the
// backend names by a call of its replayer (declared when the module does not
// define it; the backend links the definitions). `replaced` counts them.
class ReplayCallsPass : public llvm::PassInfoMixin<ReplayCallsPass> {
public:
  ReplayCallsPass(const ReplayCallsOptions &options, unsigned *replaced)
      : options(options), replaced(replaced) {}
  llvm::PreservedAnalyses run(llvm::Module &module, llvm::ModuleAnalysisManager &);

private:
  const ReplayCallsOptions &options;
  unsigned *replaced;
};

} // namespace morpheus::core
