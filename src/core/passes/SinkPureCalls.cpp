//===- SinkPureCalls.cpp - pure calls moved to the paths that use them ----===//
//
// clang computes a value where the source wrote it, even when only some
// paths use it, and leaves the program's own functions as BPF-to-BPF calls
// when its static guess of the block's frequency calls the site cold (the
// inliner's threshold for cold sites is 45). nf/lb hashes the 5-tuple for
// every packet, by a call, but uses the hash only when the flow table
// misses (to pick a ring slot) and when the chosen real wants GUE (the
// outer source port): a packet of a known flow to an IP-in-IP real pays a
// call (~8 ns here) and about 55 dependent instructions for nothing.
//
// What moves. A call of a function defined in the module that reads only
// memory its pointer arguments point to (or none), all of it the calling
// function's own stack (allocas: nothing outside the function writes it),
// and cannot write, unwind
// or fail to return (`memory(argmem: read)`, nounwind, willreturn, not
// convergent: clang infers these for such functions), in a function the
// table passes may touch, neither it nor any use in a loop, none of its
// uses in its own block, and at most MaxUseBlocks blocks using it. It is
// cloned right before the first use in each using block (for a phi, at the
// end of the incoming block) and the original is deleted. Nothing moves
// unless every clone passes the check below; debug records of the result
// lose their location.
//
// Why it is correct. The call's result depends only on its operands and on
// the bytes its pointer arguments reach, and calling it has no other
// effect. Each clone takes the same operands (they dominate the call, which
// dominates every use, so they dominate the clones) and runs only on paths
// that went through the original call (the call dominates its uses). The
// bytes are the same at the clone as at the call: no instruction that may
// write memory an argument points to (alias analysis, with the access
// calls' facts that they only read their keys and values) lies on any path
// from the call to the clone — the rest of the call's block, the start of
// the clone's block, and every block reachable from the former that
// reaches the latter, whole. So each clone returns what the call returned,
// and a path that no longer runs the call loses nothing but the time; a
// path through two using blocks computes it twice, with the same result.
//
// What it costs: code (one call per using block) and, on a path through
// several using blocks, the repeated call; the gain is every path that
// uses the value nowhere. A using block that every path from the call
// reaches gains nothing: such calls stay.
//===----------------------------------------------------------------------===//

#include "core/passes/TablePasses.h"

#include <llvm/ADT/SetVector.h>
#include <llvm/ADT/Statistic.h>
#include <llvm/Analysis/AliasAnalysis.h>
#include <llvm/Analysis/LoopInfo.h>
#include <llvm/Analysis/MemoryLocation.h>
#include <llvm/Analysis/PostDominators.h>
#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/CFG.h>
#include <llvm/IR/Dominators.h>
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/Instructions.h>
#include <llvm/Transforms/Utils/Local.h>

using namespace llvm;

#define DEBUG_TYPE "sink-pure-calls"

ALWAYS_ENABLED_STATISTIC(CallsSunk, "pure calls moved to the blocks that use their result");

namespace morpheus::core {

namespace {

// More using blocks than this: the code grows by a call per block for a
// value most paths likely use anyway.
constexpr unsigned MaxUseBlocks = 4;

// Where a clone must be, for each block using the call's result: before
// the block's first use (a phi's use is at the end of its incoming block).
using Placements = MapVector<BasicBlock *, Instruction *>;

bool isPureCall(const CallBase &call) {
  const Function *callee = call.getCalledFunction();
  if (!callee || callee->isDeclaration() || !call.onlyAccessesArgMemory() ||
      !call.onlyReadsMemory() || !call.doesNotThrow() || !call.willReturn() ||
      call.isConvergent() || call.getType()->isVoidTy())
    return false;
  // The program's own stack only: a map's value or a global may be written
  // by another CPU or by user space between the call and a clone, which no
  // instruction on the path shows.
  return llvm::all_of(call.args(), [](const Use &arg) {
    return !arg->getType()->isPointerTy() || isa<AllocaInst>(getUnderlyingObject(arg.get()));
  });
}

std::optional<Placements> placementsOf(CallBase &call, const DominatorTree &dt) {
  Placements placements;
  for (Use &use : call.uses()) {
    auto *user = cast<Instruction>(use.getUser());
    BasicBlock *block = user->getParent();
    Instruction *before = user;
    if (auto *phi = dyn_cast<PHINode>(user)) {
      block = phi->getIncomingBlock(use);
      before = block->getTerminator();
    }
    if (block == call.getParent() || !dt.isReachableFromEntry(block))
      return std::nullopt;
    auto [it, inserted] = placements.insert({block, before});
    if (!inserted && before->comesBefore(it->second))
      it->second = before;
  }
  if (placements.empty() || placements.size() > MaxUseBlocks)
    return std::nullopt;
  return placements;
}

// The blocks reachable from `start`'s successors (forward), or from which
// one of its predecessors is reachable (backward).
SmallPtrSet<BasicBlock *, 32> reach(BasicBlock *start, bool forward) {
  SmallPtrSet<BasicBlock *, 32> seen;
  SmallVector<BasicBlock *, 32> work;
  auto next = [&](BasicBlock *block) {
    if (forward)
      for (BasicBlock *succ : successors(block))
        work.push_back(succ);
    else
      for (BasicBlock *pred : predecessors(block))
        work.push_back(pred);
  };
  next(start);
  while (!work.empty()) {
    BasicBlock *block = work.pop_back_val();
    if (seen.insert(block).second)
      next(block);
  }
  return seen;
}

// Whether anything on a path from `call` to `clonePoint` may write memory
// one of the call's pointer arguments points to.
bool argumentsMayChange(CallBase &call, Instruction &clonePoint, AAResults &aa) {
  SmallVector<MemoryLocation, 2> read;
  for (Value *arg : call.args())
    if (arg->getType()->isPointerTy())
      read.push_back(MemoryLocation::getBeforeOrAfter(arg));
  if (read.empty())
    return false;
  auto writes = [&](Instruction &inst) {
    if (&inst == &call || !inst.mayWriteToMemory())
      return false;
    return any_of(read, [&](const MemoryLocation &loc) {
      return isModSet(aa.getModRefInfo(&inst, loc));
    });
  };
  auto anyWrite = [&](BasicBlock::iterator begin, BasicBlock::iterator end) {
    return std::any_of(begin, end, writes);
  };
  BasicBlock *from = call.getParent(), *to = clonePoint.getParent();
  SmallPtrSet<BasicBlock *, 32> after = reach(from, /*forward=*/true);
  SmallPtrSet<BasicBlock *, 32> before = reach(to, /*forward=*/false);
  for (BasicBlock *block : after)
    if (before.count(block) && anyWrite(block->begin(), block->end()))
      return true;
  return anyWrite(std::next(call.getIterator()), from->end()) ||
         anyWrite(to->begin(), clonePoint.getIterator());
}

bool sinkCall(CallBase &call, const DominatorTree &dt, const PostDominatorTree &pdt,
              const LoopInfo &loops, AAResults &aa) {
  if (loops.getLoopFor(call.getParent()))
    return false;
  std::optional<Placements> placements = placementsOf(call, dt);
  if (!placements)
    return false;
  for (auto [block, before] : *placements)
    if (loops.getLoopFor(block) || pdt.dominates(block, call.getParent()) ||
        argumentsMayChange(call, *before, aa))
      return false;
  // The clones in the function's block order, the first with the call's name.
  std::string name = call.getName().str();
  call.setName("");
  for (BasicBlock &block : *call.getFunction()) {
    auto placement = placements->find(&block);
    if (placement == placements->end())
      continue;
    Instruction *clone = call.clone();
    clone->setName(name);
    clone->insertBefore(placement->second);
    call.replaceUsesWithIf(clone, [&](Use &use) {
      auto *user = cast<Instruction>(use.getUser());
      if (auto *phi = dyn_cast<PHINode>(user))
        return phi->getIncomingBlock(use) == &block;
      return user->getParent() == &block;
    });
  }
  replaceDbgUsesWithUndef(&call);
  call.eraseFromParent();
  ++CallsSunk;
  return true;
}

} // namespace

PreservedAnalyses SinkPureCallsPass::run(Module &module, ModuleAnalysisManager &mam) {
  auto &fam = mam.getResult<FunctionAnalysisManagerModuleProxy>(module).getManager();
  bool changed = false;
  for (Function &function : module) {
    if (function.isDeclaration() || context.untouchable(function.getName().str()))
      continue;
    SmallVector<CallBase *, 8> calls;
    for (Instruction &inst : instructions(function))
      if (auto *call = dyn_cast<CallBase>(&inst); call && isPureCall(*call))
        calls.push_back(call);
    if (calls.empty())
      continue;
    const DominatorTree &dt = fam.getResult<DominatorTreeAnalysis>(function);
    const PostDominatorTree &pdt = fam.getResult<PostDominatorTreeAnalysis>(function);
    const LoopInfo &loops = fam.getResult<LoopAnalysis>(function);
    AAResults &aa = fam.getResult<AAManager>(function);
    bool sunk = false;
    // Moving a call changes no block, so the trees stay valid.
    for (CallBase *call : calls)
      sunk |= sinkCall(*call, dt, pdt, loops, aa);
    if (sunk) {
      fam.invalidate(function, PreservedAnalyses::none());
      changed = true;
    }
  }
  return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
}

} // namespace morpheus::core
