//===- ReplayCalls.cpp - the same answers in every compared copy ----------===//
//
// Shadow validation and the fuzzer run the original, a second original (the
// witness) and the specialized version on the same packets and compare what
// they do. A program that draws a random number or reads a clock answers
// differently at each run even when nothing is wrong, and a comparison that
// tells such differences from real ones by chance refuses correct versions
// or misses wrong ones. In the copies that are compared (never in a version
// that runs live), every such call is replaced by a call of a runtime
// function that answers from a state user space writes alike into every
// copy before each run (for eBPF: backend/bpf/dataplane/replay.bpf.c):
//
//   %r = call i32 inttoptr (i64 7 to ptr)()     ; bpf_get_prandom_u32
//     =>
//   %r = call i32 @morpheus_replay_random()
//
// Why the comparison stays fair: the answers replayed are answers the
// replaced call can give (a 32-bit number of a uniform stream; a clock
// reading taken from the kernel in the step's first run), and every copy
// gets the same ones in the same order, so two copies differ only where
// their code does. The call's result type is the program's: a replayer of
// another width is widened (zero, as a helper's 32-bit answer is in its
// 64-bit register) or narrowed to it. Only the call changes: everything else
// is the code under comparison, untouched (the backend inlines the replayer
// without optimizing around it).
//===----------------------------------------------------------------------===//

#include "core/ReplayCalls.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/Module.h>

#include <vector>

using namespace llvm;

namespace morpheus::core {

PreservedAnalyses ReplayCallsPass::run(Module &module, ModuleAnalysisManager &) {
  std::vector<std::pair<CallBase *, Replayer>> calls;
  for (Function &function : module)
    for (Instruction &instruction : instructions(function))
      if (auto *call = dyn_cast<CallBase>(&instruction);
          call && (call->getType()->isIntegerTy() || call->getType()->isVoidTy()))
        if (std::optional<Replayer> replayer = options.replayerOf(*call))
          calls.emplace_back(call, std::move(*replayer));
  for (auto &[call, wanted] : calls) {
    Type *result = call->getType();
    // The runtime's own type when it is linked already, else its declaration.
    Function *replayer = module.getFunction(wanted.function);
    if (!replayer)
      replayer = Function::Create(
          FunctionType::get(Type::getIntNTy(module.getContext(), wanted.bits), false),
          GlobalValue::ExternalLinkage, wanted.function, module);
    IRBuilder<> builder(call);
    CallInst *replay = builder.CreateCall(replayer);
    replay->setDebugLoc(call->getDebugLoc());
    if (!result->isVoidTy()) {
      Value *answer = builder.CreateZExtOrTrunc(replay, result);
      answer->takeName(call);
      call->replaceAllUsesWith(answer);
    }
    call->eraseFromParent();
  }
  if (replaced)
    *replaced = calls.size();
  return calls.empty() ? PreservedAnalyses::all() : PreservedAnalyses::none();
}

} // namespace morpheus::core
