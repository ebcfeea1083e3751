//===- FlowFastPath.cpp - Hot tuples get a copy of the code after the flow -===//
//
// A classifier asks several read-only tables in turn, each keyed by fields
// of the packet (the firewall: source prefix, destination prefix, protocol,
// ports), and combines the answers (an AND over bitmaps). Each site's own
// fast path (heavy-hitter-fast-path) cannot fold the combination: the
// answers of the hot keys merge with the lookups' in phis before it. This
// pass makes the whole region fold for the hot flows, by tail duplication.
//
// The flow. Its first site S1 is a lookup with a non-constant key in a
// read-only table (whyNotInlinable), in a function the passes may touch,
// not inside a loop. The tail is every block reachable from S1 (S1's block
// from S1 on). Every other read-only lookup in the tail whose key bytes can
// be traced back to values from before S1 is part of the flow: the key's
// bytes through the stores that fill its stack object (the nearest writes,
// by MemorySSA, as TableAccessAnalysis proves constant keys), then through
// pure arithmetic, selects, phis of the tail (with the conditions of the
// branches that pick their incoming values) and loads from a flow site's
// result (constant once that site's key is). What the trace reaches from
// before S1 are the tuple's leaves: integers (saddr, daddr, protocol,
// ports, has_ports, the generation). A site whose key depends on anything
// else (a helper's result, memory, a pointer) is not part of the flow, and
// the others stay. With fewer than two sites there is no flow. The leaves,
// packed (each in its store size, in the order found), are the tuple:
// at most ProfileOptions::keyBytes bytes; a site that would make it longer
// is left out.
//
// Instrumented versions (context.profile): at S1 the tuple is recorded as
// instrument-table-sites records keys (emitProfileSample), under the flow's
// own profile site (flowProfileSite), so core/TrafficProfile counts tuples
// as it counts keys; log.profiled says so, with the saving a hit is
// predicted (the flow sites' lookups priced by the cost model).
//
// Versions with hot tuples (context.hotTuples): right before S1 the leaves
// are compared with each hot tuple, hottest first; a match branches into a
// copy of the tail in which every leaf is the tuple's constant (constants
// folded, branches on them resolved, blocks left unreachable removed); a
// miss goes on to the original tail, untouched. The key stores from before
// S1 are repeated at the top of the copy, a leaf's value as the constant,
// so the copy's keys are constants to TableAccessAnalysis and
// constant-key-lookup (which runs after this pass) answers them from the
// snapshot; the AND loop then folds in O2 as far as the program lets it.
//
// Why it is correct. The copy is the same code with values replaced by
// constants equal to them: it is entered only when every leaf equals its
// constant, a leaf is defined before S1 and S1 is in no loop, so no leaf
// changes while the copy runs. A repeated key store writes the value the
// memory already holds: the store was the nearest write of those bytes
// before the lookup (MemorySSA), none of its bytes written since, and its
// value is a constant or a leaf equal to its constant. Whatever the copy
// reads or writes (counters, connection tracking, tables) it reads and writes exactly as
// the original tail would, in the same order; nothing is answered from the
// snapshot here — the folding that makes the copy fast is done by the later
// passes, under the program guard, each with its own argument. Which tuples
// are hot affects only speed: a wrong hot tuple is slower, never wrong.
// The generic copies are never touched.
//
// Each copy adds paths for the kernel's verifier: the pipeline drops hot
// tuples over the entry's budget before the passes run (Pipeline.cpp).
//===----------------------------------------------------------------------===//

#include "core/passes/TablePasses.h"

#include <llvm/ADT/SetVector.h>
#include <llvm/ADT/Statistic.h>
#include <llvm/Analysis/ConstantFolding.h>
#include <llvm/Analysis/MemorySSA.h>
#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/CFG.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/Transforms/Utils/BasicBlockUtils.h>
#include <llvm/Transforms/Utils/Cloning.h>
#include <llvm/Transforms/Utils/Local.h>

#include <map>
#include <optional>
#include <set>

using namespace llvm;

#define DEBUG_TYPE "flow-fast-path"

ALWAYS_ENABLED_STATISTIC(FlowsFound, "flows found: lookups keyed by values from before the first");
ALWAYS_ENABLED_STATISTIC(FlowsSampled, "flows whose tuples are sampled into a profile slot");
ALWAYS_ENABLED_STATISTIC(TailCopies, "copies of the code after a flow, one per hot tuple");
ALWAYS_ENABLED_STATISTIC(SitesDeclined, "lookup sites where no flow starts, or left out of one");

namespace morpheus::core {

namespace {


// A flow found in one function: its sites (S1 first), the leaves, and the
// key stores from before S1 whose value is a leaf.
struct Flow {
  std::vector<const AccessSite *> sites;
  SetVector<Value *> leaves;
  SetVector<StoreInst *> storesBefore;
  uint32_t tupleBytes = 0;
};

class FlowFinder {
public:
  FlowFinder(const AccessSite &first, const DataLayout &dl, MemorySSA &mssa, AAResults &aa,
             uint32_t maxTupleBytes)
      : first(*first.call), dl(dl), mssa(mssa), batch(aa), maxTupleBytes(maxTupleBytes) {
    SmallVector<BasicBlock *, 16> worklist(successors(first.call->getParent()));
    while (!worklist.empty()) {
      BasicBlock *block = worklist.pop_back_val();
      if (tail.insert(block).second)
        append_range(worklist, successors(block));
    }
  }

  // S1's block is reached again from the tail: a leaf may change.
  bool inLoop() const { return tail.count(first.getParent()) > 0; }

  bool inTail(const Instruction &inst) const {
    if (inst.getParent() == first.getParent())
      return &inst == &first || first.comesBefore(&inst);
    return tail.count(inst.getParent()) > 0;
  }

  // Adds `site` to `flow` when its key traces back to leaves within the
  // tuple's size; otherwise says why not.
  std::optional<std::string> add(const AccessSite &site, uint32_t keySize, Flow &flow) {
    Trace trace{flow.leaves, flow.storesBefore, {}, {}};
    if (auto why = traceKey(*site.call, site.call->getArgOperand(*site.signature.keyArg),
                            keySize, trace))
      return why;
    uint32_t bytes = flow.tupleBytes;
    for (Value *leaf : trace.leaves)
      if (!flow.leaves.count(leaf))
        bytes += uint32_t(dl.getTypeStoreSize(leaf->getType()));
    if (bytes > maxTupleBytes)
      return "its key would make the tuple " + std::to_string(bytes) + " bytes (at most " +
             std::to_string(maxTupleBytes) + ")";
    flow.leaves = std::move(trace.leaves);
    flow.storesBefore = std::move(trace.storesBefore);
    flow.tupleBytes = bytes;
    flow.sites.push_back(&site);
    results.insert(site.call);
    return std::nullopt;
  }

private:
  struct Trace {
    SetVector<Value *> leaves;
    SetVector<StoreInst *> storesBefore;
    std::set<Value *> visited;
    std::string why;
  };

  // The nearest writes of the key's bytes, each traced.
  std::optional<std::string> traceKey(CallBase &call, Value *key, uint32_t keySize,
                                      Trace &trace) {
    int64_t keyOffset = 0;
    Value *base = GetPointerBaseWithConstantOffset(key, keyOffset, dl);
    if (!isa<AllocaInst>(base) || keySize == 0)
      return std::string("its key is not on the stack");
    MemoryUseOrDef *access = mssa.getMemoryAccess(&call);
    if (!access)
      return std::string("its key's writes are not known");
    MemoryLocation location(key, LocationSize::precise(keySize));
    std::vector<bool> known(keySize, false);
    unsigned remaining = keySize;
    MemoryAccess *from = access->getDefiningAccess();
    for (unsigned budget = 64; remaining; --budget) {
      if (!budget)
        return std::string("its key has too many writes");
      auto *def = dyn_cast_or_null<MemoryDef>(
          mssa.getWalker()->getClobberingMemoryAccess(from, location, batch));
      if (!def || mssa.isLiveOnEntryDef(def))
        return std::string("its key bytes are not written by one store each");
      auto *store = dyn_cast<StoreInst>(def->getMemoryInst());
      int64_t writeOffset = 0;
      if (!store || !store->isSimple() ||
          GetPointerBaseWithConstantOffset(store->getPointerOperand(), writeOffset, dl) != base)
        return std::string("its key bytes are not written by one store each");
      uint64_t size = dl.getTypeStoreSize(store->getValueOperand()->getType());
      uint64_t added = 0;
      for (uint64_t i = 0; i < size; ++i) {
        int64_t byte = writeOffset + int64_t(i) - keyOffset;
        if (byte < 0 || byte >= int64_t(keySize) || known[byte])
          continue;
        known[byte] = true;
        ++added;
      }
      remaining -= unsigned(added);
      bool allNew = added == size;
      from = def->getDefiningAccess();
      if (!added)
        continue; // every byte it wrote was written again before the lookup
      Value *value = store->getValueOperand();
      if (!inTail(*store)) {
        // Repeated at the top of each copy (with the constant), constants
        // too: TableAccessAnalysis proves the copy's key constant from the
        // nearest writes, and must not meet the original stores of leaves.
        // Only a store whose every byte is the key's and still holds what
        // it wrote.
        if (!allNew)
          return std::string("a key store from before the flow overlaps another write");
        trace.storesBefore.insert(store);
      }
      if (!traceValue(value, trace, 0))
        return trace.why;
    }
    return std::nullopt;
  }

  bool traceValue(Value *value, Trace &trace, unsigned depth) {
    if (isa<Constant>(value) || !trace.visited.insert(value).second)
      return true;
    if (depth > 32) {
      trace.why = "its key is computed too deep to trace";
      return false;
    }
    auto *inst = dyn_cast<Instruction>(value);
    if (!inst || !inTail(*inst)) {
      if (!value->getType()->isIntegerTy() || dl.getTypeStoreSize(value->getType()) > 8) {
        trace.why = "its key depends on a value from before the flow that is not an integer";
        return false;
      }
      trace.leaves.insert(value);
      return true;
    }
    if (auto *phi = dyn_cast<PHINode>(inst)) {
      for (unsigned i = 0; i < phi->getNumIncomingValues(); ++i) {
        BasicBlock *from = phi->getIncomingBlock(i);
        if (!tail.count(from) && from != first.getParent())
          continue; // not an edge of the copy
        if (!traceValue(phi->getIncomingValue(i), trace, depth + 1))
          return false;
        if (auto *branch = dyn_cast<BranchInst>(from->getTerminator());
            branch && branch->isConditional() &&
            !traceValue(branch->getCondition(), trace, depth + 1))
          return false;
      }
      return true;
    }
    if (auto *load = dyn_cast<LoadInst>(inst)) {
      const Value *object = getUnderlyingObject(load->getPointerOperand());
      if (load->isSimple() && results.count(object))
        return true; // constant once that site's key is
      trace.why = "its key depends on memory other than a flow lookup's answer";
      return false;
    }
    if (inst->mayHaveSideEffects() || inst->mayReadFromMemory() ||
        (isa<CallBase>(inst) && !isa<IntrinsicInst>(inst))) {
      trace.why = "its key depends on a call or a memory access";
      return false;
    }
    for (Value *operand : inst->operands())
      if (!traceValue(operand, trace, depth + 1))
        return false;
    return true;
  }

  CallBase &first;
  const DataLayout &dl;
  MemorySSA &mssa;
  BatchAAResults batch;
  uint32_t maxTupleBytes;
  std::set<const BasicBlock *> tail;
  std::set<const Value *> results; // the flow sites' calls
};

// The constant `leaf` holds in `tuple` at `offset` (its store size, the
// target's byte order).
Constant *leafConstant(Value *leaf, const Bytes &tuple, uint32_t offset, const DataLayout &dl) {
  auto *type = cast<IntegerType>(leaf->getType());
  uint32_t size = uint32_t(dl.getTypeStoreSize(type));
  APInt bits(size * 8, 0);
  for (uint32_t i = 0; i < size; ++i) {
    unsigned byte = dl.isLittleEndian() ? i : size - 1 - i;
    bits.insertBits(APInt(8, tuple[offset + i]), byte * 8);
  }
  return ConstantInt::get(type, bits.trunc(type->getBitWidth()));
}

// Folds what the constants made constant in `blocks` and resolves their
// branches on constants; blocks left unreachable are removed by the caller.
void foldConstants(const std::vector<BasicBlock *> &blocks, const DataLayout &dl) {
  for (bool changed = true; changed;) {
    changed = false;
    for (BasicBlock *block : blocks) {
      if (block->getParent() == nullptr)
        continue;
      for (Instruction &inst : make_early_inc_range(*block)) {
        if (isa<PHINode>(inst) && cast<PHINode>(inst).hasConstantValue()) {
          inst.replaceAllUsesWith(cast<PHINode>(inst).hasConstantValue());
          inst.eraseFromParent();
          changed = true;
        } else if (Constant *folded = ConstantFoldInstruction(&inst, dl)) {
          inst.replaceAllUsesWith(folded);
          inst.eraseFromParent();
          changed = true;
        }
      }
      changed |= ConstantFoldTerminator(block, /*DeleteDeadConditions=*/true);
    }
  }
}

// Right before the flow's first lookup: the leaves compared with each hot
// tuple, a match entering a copy of the tail with the tuple's constants.
void cloneTailPerTuple(const Flow &flow, const std::vector<Bytes> &tuples, const DataLayout &dl) {
  CallBase &first = *flow.sites.front()->call;
  Function &function = *first.getFunction();
  LLVMContext &llvmContext = function.getContext();
  BasicBlock *head = first.getParent();
  BasicBlock *rest = SplitBlock(head, &first, static_cast<DominatorTree *>(nullptr), nullptr, nullptr, "flow.miss");
  std::vector<BasicBlock *> tail;
  {
    std::set<BasicBlock *> seen{rest};
    SmallVector<BasicBlock *, 16> worklist{rest};
    while (!worklist.empty()) {
      BasicBlock *block = worklist.pop_back_val();
      tail.push_back(block);
      for (BasicBlock *next : successors(block))
        if (seen.insert(next).second)
          worklist.push_back(next);
    }
  }
  head->getTerminator()->eraseFromParent();
  BasicBlock *compare = head;
  for (size_t t = 0; t < tuples.size(); ++t) {
    const Bytes &tuple = tuples[t];
    std::string name = "flow.hot" + std::to_string(t);
    IRBuilder<> builder(compare);
    builder.SetCurrentDebugLocation(first.getDebugLoc());
    std::map<Value *, Constant *> constants;
    Value *match = nullptr;
    uint32_t offset = 0;
    for (Value *leaf : flow.leaves) {
      Constant *constant = leafConstant(leaf, tuple, offset, dl);
      offset += uint32_t(dl.getTypeStoreSize(leaf->getType()));
      constants[leaf] = constant;
      Value *equal = builder.CreateICmpEQ(leaf, constant, name + ".equal");
      match = match ? builder.CreateAnd(match, equal, name + ".match") : equal;
    }
    BasicBlock *copy = BasicBlock::Create(llvmContext, name, &function);
    BasicBlock *next = BasicBlock::Create(llvmContext, name + ".next", &function);
    builder.CreateCondBr(match, copy, next);

    IRBuilder<> top(copy);
    for (StoreInst *store : flow.storesBefore) {
      Value *value = store->getValueOperand();
      top.CreateAlignedStore(isa<Constant>(value) ? cast<Constant>(value) : constants.at(value),
                             store->getPointerOperand(), store->getAlign());
    }
    ValueToValueMapTy map;
    for (auto &[leaf, constant] : constants)
      map[leaf] = constant;
    std::vector<BasicBlock *> clones;
    for (BasicBlock *block : tail) {
      BasicBlock *clone = CloneBasicBlock(block, map, "." + name, &function);
      map[block] = clone;
      clones.push_back(clone);
    }
    top.CreateBr(cast<BasicBlock>(map[rest]));
    remapInstructionsInBlocks(SmallVector<BasicBlock *, 16>(clones.begin(), clones.end()), map);
    // Phi edges from outside the tail are not edges of the copy; the copy's
    // first block is entered from `copy` only.
    std::set<BasicBlock *> cloned(clones.begin(), clones.end());
    for (BasicBlock *clone : clones)
      for (PHINode &phi : make_early_inc_range(clone->phis()))
        for (unsigned i = phi.getNumIncomingValues(); i-- > 0;)
          if (!cloned.count(phi.getIncomingBlock(i)))
            phi.removeIncomingValue(i, /*DeletePHIIfEmpty=*/false);
    foldConstants(clones, dl);
    compare = next;
  }
  BranchInst::Create(rest, compare);
  removeUnreachableBlocks(function);
}

} // namespace

PreservedAnalyses FlowFastPathPass::run(Module &module, ModuleAnalysisManager &mam) {
  context.declines = &SitesDeclined;
  const TableAccessInfo &info = mam.getResult<TableAccessAnalysis>(module);
  auto &fam = mam.getResult<FunctionAnalysisManagerModuleProxy>(module).getManager();
  const DataLayout &dl = module.getDataLayout();
  unsigned flowSite = flowProfileSite(module);
  auto hot = context.hotTuples.find(flowSite);
  bool record = context.profile.has_value();
  if (!record && hot == context.hotTuples.end())
    return PreservedAnalyses::all();
  uint32_t maxTupleBytes = context.profile ? context.profile->keyBytes : 32;
  if (record && flowSite >= context.profile->sites)
    record = false; // no slot for it: the flow is not recorded

  auto readOnlyLookup = [&](const AccessSite &site) {
    return site.signature.kind == AccessKind::Lookup && !site.key.constantKey &&
           !site.table.empty() && !context.untouchable(site.function) &&
           !LookupRewriter::keptOnMissPath(*site.call) &&
           !whyNotInlinable(site, info, *context.catalog);
  };
  // One flow per program: the first site, in program order, from which a
  // second read-only lookup traces.
  for (Function &function : module) {
    if (function.isDeclaration() || context.untouchable(function.getName().str()))
      continue;
    std::vector<const AccessSite *> candidates;
    for (Instruction &inst : instructions(function))
      if (auto *call = dyn_cast<CallBase>(&inst))
        if (const AccessSite *site = info.siteFor(call); site && readOnlyLookup(*site))
          candidates.push_back(site);
    MemorySSA &mssa = fam.getResult<MemorySSAAnalysis>(function).getMSSA();
    AAResults &aa = fam.getResult<AAManager>(function);
    for (size_t s = 0; s < candidates.size(); ++s) {
      const AccessSite &first = *candidates[s];
      FlowFinder finder(first, dl, mssa, aa, maxTupleBytes);
      if (finder.inLoop()) {
        declineSite(context, first, Decider::FlowFastPathPass, SiteOutcome::NoFlow,
                    "in a loop: no flow starts here");
        continue;
      }
      Flow flow;
      if (auto why = finder.add(first, context.catalog->at(first.table).keySize, flow)) {
        declineSite(context, first, Decider::FlowFastPathPass, SiteOutcome::NoFlow,
                    "no flow starts here: " + *why);
        continue;
      }
      std::vector<std::pair<const AccessSite *, std::string>> left;
      for (size_t n = s + 1; n < candidates.size(); ++n)
        if (finder.inTail(*candidates[n]->call))
          if (auto why = finder.add(*candidates[n], context.catalog->at(candidates[n]->table).keySize,
                                    flow))
            left.emplace_back(candidates[n], *why);
      if (flow.sites.size() < 2) {
        declineSite(context, first, Decider::FlowFastPathPass, SiteOutcome::NoFlow,
                    "no other read-only lookup of the tail traces back to before it" +
                        (left.empty() ? std::string()
                                      : " (site " + std::to_string(left.front().first->id) +
                                            ": " + left.front().second + ")"));
        continue;
      }
      for (auto &[site, why] : left)
        declineSite(context, *site, Decider::FlowFastPathPass, SiteOutcome::NoFlow,
                    "not part of the flow from site " + std::to_string(first.id) + ": " + why);
      ++FlowsFound;
      double savingNs = 0;
      std::string tables;
      for (const AccessSite *site : flow.sites) {
        const TableInfo &table = context.catalog->at(site->table);
        auto contents = context.snapshot->find(site->table);
        savingNs += context.costModel.originalLookupNs(
            table.match, contents == context.snapshot->end() ? table.maxEntries
                                                             : contents->second.entries.size());
        tables += (tables.empty() ? "" : ", ") + site->table;
      }
      std::string shape = std::to_string(flow.sites.size()) + " lookups (" + tables + "), " +
                          std::to_string(flow.leaves.size()) + " leaves in a " +
                          std::to_string(flow.tupleBytes) + "-byte tuple";
      bool changed = false;
      if (record) {
        // Before the compares, so hits are counted too.
        emitProfileSample(*first.call, *context.profile, flowSite, "flow",
                          [&](IRBuilderBase &builder, Value *slot) {
                            uint32_t offset = 0;
                            for (Value *leaf : flow.leaves) {
                              Value *stored = leaf->getType()->isIntegerTy(1)
                                                  ? builder.CreateZExt(leaf, builder.getInt8Ty())
                                                  : leaf;
                              builder.CreateStore(stored,
                                                  builder.CreateConstInBoundsGEP1_32(
                                                      builder.getInt8Ty(), slot, offset));
                              offset += uint32_t(dl.getTypeStoreSize(leaf->getType()));
                            }
                          });
        if (context.log) {
          context.log->record(first, Decider::FlowFastPathPass, SiteOutcome::Applied,
                              "flow tuples sampled into profile slot " +
                                  std::to_string(flowSite) + ": " + shape);
          context.log->profiled[flowSite] = {first.table, flow.tupleBytes, savingNs};
        }
        changed = true;
        ++FlowsSampled;
      } else if (context.profile && context.log) {
        declineSite(context, first, Decider::FlowFastPathPass, SiteOutcome::NoProfileSlot,
                    "flow site id " + std::to_string(flowSite) + " beyond the profile map's " +
                        std::to_string(context.profile->sites) + " sites: not recorded");
      }
      std::string budget =
          context.hotTuplesOverBudget
              ? "; " + std::to_string(context.hotTuplesOverBudget) +
                    " colder hot tuples dropped over the verifier budget"
              : std::string();
      if (hot != context.hotTuples.end() && !hot->second.empty() && context.noCompareChains) {
        declineSite(context, first, Decider::FlowFastPathPass, SiteOutcome::CompareChainsOff,
                    *context.noCompareChains + ": no copies");
      } else if (hot != context.hotTuples.end() && !hot->second.empty()) {
        std::vector<Bytes> tuples;
        for (const Bytes &tuple : hot->second)
          if (tuple.size() == flow.tupleBytes)
            tuples.push_back(tuple);
        if (!tuples.empty()) {
          cloneTailPerTuple(flow, tuples, dl);
          changed = true;
          TailCopies += tuples.size();
          if (context.log)
            context.log->record(first, Decider::FlowFastPathPass, SiteOutcome::Applied,
                                std::to_string(tuples.size()) +
                                    " hot tuples, each with a copy of the code after the flow: " +
                                    shape + budget);
        } else {
          declineSite(context, first, Decider::FlowFastPathPass, SiteOutcome::NoHotKey,
                      "no hot tuple of the flow's size: " + shape);
        }
      } else if (context.hotTuplesOverBudget) {
        declineSite(context, first, Decider::FlowFastPathPass, SiteOutcome::OverVerifierBudget,
                    "every hot tuple over the verifier budget: " + shape + budget);
      }
      return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
    }
  }
  return PreservedAnalyses::all();
}

} // namespace morpheus::core
