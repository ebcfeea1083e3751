#include "backend/bpf/ComparedCopy.h"

#include "backend/bpf/BpfSignatures.h"
#include "backend/bpf/Frontend.h"
#include "core/ReplayCalls.h"

#include <llvm/IR/InstIterator.h>
#include <llvm/IR/Instructions.h>
#include <llvm/Transforms/Utils/Cloning.h>

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

Expected<unsigned> makeComparedCopy(Module &module) {
  core::ReplayCallsOptions options{replayerOfCall};
  unsigned replaced = 0;
  ModuleAnalysisManager unused;
  core::ReplayCallsPass(options, &replaced).run(module, unused);
  if (!replaced)
    return 0;
  const std::vector<const char *> functions = {
      MORPHEUS_REPLAY_RANDOM, MORPHEUS_REPLAY_KTIME,  MORPHEUS_REPLAY_JIFFIES,
      MORPHEUS_REPLAY_BOOT,   MORPHEUS_REPLAY_COARSE, MORPHEUS_REPLAY_TAI};
  StringRef bitcode(reinterpret_cast<const char *>(morpheus_replay_runtime_start),
                    morpheus_replay_runtime_end - morpheus_replay_runtime_start);
  if (Error err = linkBitcode(module, bitcode, "replay runtime", functions))
    return err;
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

} // namespace morpheus::bpf
