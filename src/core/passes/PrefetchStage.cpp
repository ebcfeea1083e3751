//===- PrefetchStage.cpp - a handler's prefetch stage, derived from it ----===//
//
// Sub-batching (the P4C paper, §2) is loop fission: over a sub-batch of b
// packets, first compute every packet's table key and prefetch its entry,
// then run the lookups, whose misses have had a sub-batch's work to arrive.
// The runtime does the loop (backend/user EventLoop); the first half is a
// function of the packet that prefetches what the handler will look up.
// A developer may write it (MU_PREFETCH); this derives it from the handler.
//
// The stage is a copy of the entry, with the entry's argument, cut on every
// path at the first instruction that is not a pure read:
//   - a key -> value lookup whose key is a constant (TableAccessAnalysis,
//     by MemorySSA: a configuration entry) is kept: the same for every
//     packet, so prefetching it asks for nothing, and what follows may need
//     its value; in a table whose lookups have side effects (an LRU's,
//     which steer its evictions) the path returns before it instead;
//   - a key -> value lookup with a per-packet key becomes a call of the
//     backend's prefetch primitive with the same table and key, and the
//     path returns; any other table access (an update, a getter that may
//     create) returns;
//   - anything that may write memory other than the function's own stack
//     (a store through a table value or into the packet, an update, an
//     atomic, a call that is not known to only read and return) returns
//     before it;
//   - the rest is kept: arithmetic, branches, loads, stack stores (the
//     keys being built), calls of functions that only read and return.
// Blocks no path reaches any more are removed. A stage in which no path
// reaches a prefetch is not made (PrefetchStage::declined).
//
// Why it is correct. The stage writes nothing but its own stack and calls
// nothing that writes (the prefetch primitive reads nothing a program sees),
// so running it changes no verdict, byte or table: the handler runs after
// it exactly as it would have without it. What remains is that the stage
// itself must not fault or hang. Its run on a packet is a prefix of the
// handler's run on that packet, instruction for instruction, taken in the
// state the tables and globals hold when the stage runs: every branch
// decided as the handler decides it, every load one the handler makes,
// after the handler's own checks (packet bounds, null entries), with the
// same values since nothing else runs in between; and that state is one
// the handler itself runs in (the runtime calls stages between handler
// runs, on the loop's thread). A table entry the stage reads through a
// constant-key lookup is read before the stage returns, never kept. So the
// stage faults or hangs only where the handler would on the same packet.
// Stale state can only make it prefetch an entry the handler then does not
// look up, which costs time, not behaviour.
//
// Cut at the first per-packet lookup, a stage prefetches one entry per
// packet: the one every later lookup of the packet tends to follow from
// (a lookup keyed by an earlier answer could only be prefetched after
// waiting for that answer, which is what sub-batching avoids).
//===----------------------------------------------------------------------===//

#include "core/PrefetchStage.h"

#include "support/Error.h"

#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/ValueHandle.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Transforms/Utils/Cloning.h>
#include <llvm/Transforms/Utils/Local.h>

#include <algorithm>
#include <map>

using namespace llvm;

namespace morpheus::core {

namespace {

// What the stage does at an instruction of the entry's copy.
enum class Step {
  Keep,            // runs as in the handler
  Return,          // the path returns before it
  PrefetchReturn,  // the path prefetches its entry and returns
};

bool onOwnStack(const Value *pointer) {
  return isa<AllocaInst>(getUnderlyingObject(pointer));
}

class StageBuilder {
public:
  StageBuilder(const std::map<const CallBase *, const AccessSite *> &sites,
               const TableCatalog &catalog, const std::string &prefetchFunction)
      : sites(sites), catalog(catalog), prefetchFunction(prefetchFunction) {}

  Step step(const Instruction &instruction) const {
    if (auto *store = dyn_cast<StoreInst>(&instruction))
      return !store->isVolatile() && onOwnStack(store->getPointerOperand()) ? Step::Keep
                                                                             : Step::Return;
    if (auto *load = dyn_cast<LoadInst>(&instruction))
      return load->isVolatile() ? Step::Return : Step::Keep;
    if (auto *call = dyn_cast<CallBase>(&instruction))
      return callStep(*call);
    // Atomics, fences and whatever else may write.
    return instruction.mayWriteToMemory() || instruction.mayThrow() ? Step::Return : Step::Keep;
  }

private:
  Step callStep(const CallBase &call) const {
    if (const Function *callee = call.getCalledFunction();
        callee && callee->getName() == prefetchFunction)
      return Step::Keep; // a handler's own prefetch reads nothing
    if (auto site = sites.find(&call); site != sites.end()) {
      const AccessSite &access = *site->second;
      // Only a plain key -> value lookup (not an update, not a getter that
      // may create) is a lookup to run or to prefetch instead.
      if (access.signature.kind != AccessKind::Lookup || !access.signature.rewritable)
        return Step::Return;
      if (!access.key.constantKey)
        return Step::PrefetchReturn; // a prefetch changes nothing, whatever the table
      // Run only where a lookup reads and nothing else (an LRU's steers
      // its evictions).
      auto table = catalog.find(access.table);
      return table != catalog.end() && !table->second.lookupHasSideEffects ? Step::Keep
                                                                            : Step::Return;
    }
    if (auto *memory = dyn_cast<MemIntrinsic>(&call))
      return !memory->isVolatile() && onOwnStack(memory->getDest()) ? Step::Keep : Step::Return;
    if (auto *intrinsic = dyn_cast<IntrinsicInst>(&call))
      if (intrinsic->isLifetimeStartOrEnd() || isa<DbgInfoIntrinsic>(intrinsic) ||
          intrinsic->getIntrinsicID() == Intrinsic::prefetch)
        return Step::Keep;
    // A call that may write, or never return, ends the stage; one that
    // only reads and returns is part of computing the key.
    if (call.onlyReadsMemory() && call.willReturn() && !call.mayThrow())
      return Step::Keep;
    return Step::Return;
  }

  const std::map<const CallBase *, const AccessSite *> &sites;
  const TableCatalog &catalog;
  const std::string &prefetchFunction;
};

// A copy of `entry` as `void NAME(ptr)`: the same blocks on the same
// argument, its returns still to be replaced.
Function *copyAsStage(Function &entry, const PrefetchStageOptions &options,
                      ValueToValueMapTy &copied) {
  Module &module = *entry.getParent();
  LLVMContext &context = module.getContext();
  Function *copy = CloneFunction(&entry, copied);
  auto *type = FunctionType::get(Type::getVoidTy(context), {entry.getArg(0)->getType()}, false);
  Function *stage = Function::Create(type, GlobalValue::ExternalLinkage, options.name, module);
  stage->setAttributes(
      AttributeList::get(context, copy->getAttributes().getFnAttrs(), {}, {}));
  if (!options.section.empty())
    stage->setSection(options.section);
  stage->splice(stage->begin(), copy);
  copy->getArg(0)->replaceAllUsesWith(stage->getArg(0));
  stage->setSubprogram(copy->getSubprogram());
  copy->setSubprogram(nullptr);
  copy->eraseFromParent();
  for (BasicBlock &block : *stage)
    if (auto *ret = dyn_cast<ReturnInst>(block.getTerminator())) {
      IRBuilder<>(ret).CreateRetVoid()->setDebugLoc(ret->getDebugLoc());
      ret->eraseFromParent();
    }
  return stage;
}

} // namespace

Expected<PrefetchStage> derivePrefetchStage(Function &entry, const TableAccessInfo &info,
                                            const TableCatalog &catalog,
                                            const PrefetchStageOptions &options) {
  if (entry.arg_size() != 1 || !entry.getArg(0)->getType()->isPointerTy())
    return makeError("{0}: the prefetch stage of '{1}' needs its one pointer argument",
                     entry.getParent()->getModuleIdentifier(), entry.getName());
  ValueToValueMapTy copied;
  Function *stage = copyAsStage(entry, options, copied);

  // The entry's sites, as their copies in the stage.
  std::map<const CallBase *, const AccessSite *> sites;
  for (const AccessSite &site : info.sites)
    if (site.call && site.call->getFunction() == &entry)
      if (auto found = copied.find(site.call); found != copied.end())
        sites[cast<CallBase>(found->second)] = &site;

  // Each block's first instruction that is not a pure read, and what it
  // becomes (found before any block is split).
  StageBuilder builder(sites, catalog, options.prefetchFunction);
  std::vector<std::pair<Instruction *, Step>> cuts;
  for (BasicBlock &block : *stage)
    for (Instruction &instruction : block)
      if (Step step = builder.step(instruction); step != Step::Keep) {
        cuts.emplace_back(&instruction, step);
        break;
      }

  Module &module = *entry.getParent();
  LLVMContext &context = module.getContext();
  // Each prefetch placed, with its table: those left on no path once the
  // cuts are made go with their blocks.
  std::vector<std::pair<WeakTrackingVH, std::string>> prefetches;
  for (auto [instruction, step] : cuts) {
    if (step == Step::PrefetchReturn) {
      const AccessSite &site = *sites.at(cast<CallBase>(instruction));
      auto *call = cast<CallBase>(instruction);
      PointerType *pointer = PointerType::getUnqual(context);
      FunctionCallee prefetch = module.getOrInsertFunction(
          options.prefetchFunction, Type::getVoidTy(context), pointer, pointer);
      IRBuilder<> builder(instruction);
      prefetches.emplace_back(
          builder.CreateCall(prefetch, {call->getArgOperand(site.signature.tableArg),
                                        call->getArgOperand(*site.signature.keyArg)}),
          site.table.empty() ? "?" : site.table);
    }
    // The rest of the block is left to no path, and removed below.
    BasicBlock *block = instruction->getParent();
    block->splitBasicBlock(instruction);
    Instruction *jump = block->getTerminator();
    IRBuilder<>(jump).CreateRetVoid()->setDebugLoc(instruction->getDebugLoc());
    jump->eraseFromParent();
  }
  removeUnreachableBlocks(*stage);

  PrefetchStage result;
  for (const auto &[call, table] : prefetches) {
    if (!call)
      continue;
    ++result.sites;
    if (std::find(result.tables.begin(), result.tables.end(), table) == result.tables.end())
      result.tables.push_back(table);
  }
  if (result.sites == 0) {
    stage->eraseFromParent();
    result.declined = "no path reaches a lookup with a per-packet key before the handler "
                      "writes memory, calls a function that may, or runs a lookup with side "
                      "effects";
    return result;
  }
  std::string broken;
  raw_string_ostream problems(broken);
  if (verifyFunction(*stage, &problems)) {
    stage->eraseFromParent();
    return makeError("the prefetch stage derived from '{0}' is not valid IR: {1}",
                     entry.getName(), broken);
  }
  result.function = stage;
  return result;
}

} // namespace morpheus::core
