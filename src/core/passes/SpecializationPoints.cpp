//===- SpecializationPoints.cpp - assumed points behind their guards -----===//
//
// Lowers the handler's specialization points (core/SpecializationPoints.h)
// for one configuration of the policy. A point the configuration does not
// name, and every point in code that stays generic (the generic copies of
// the in-program fallback, unguarded functions), becomes its input: the
// program is then exactly the one its author wrote without the markers.
//
// A point the configuration assumes with value V (an assumption: its
// condition) becomes a test where the marker stands:
//
//   %n = call i64 @mu_spec_enum(ptr @"rounds", i64 %x, i32 1, i32 4)
// with "rounds" = 4 becomes
//   %hit = icmp eq i64 %x, 4
//   br i1 %hit, label %assumed, label %fallback
// fallback:
//   %r = call i32 @handler.generic(ptr %packet) ; the same arguments
//   ret i32 %r
// assumed:
//   ... every use of %n is the constant 4: the O2 pipeline folds it
//
// Why it is correct: on a hit the input is V, so the constant is the value
// the marker would have returned. On a miss the packet is handed to the
// generic copy of the root (kept by GuardPlanning for the program guard's
// in-program fallback, and never specialized), which runs the handler from
// its start. Re-running from the start gives what the generic handler
// gives only if nothing the packet's processing did before the point is
// visible to it or outside; so a point is assumed only in a root with a
// generic copy and only when no instruction that may run before it may
// write memory other than the function's own stack (a table lookup only
// reads, another point's marker does nothing; any other call, store or
// update declines the point). The
// generic copy begins with its own program guard check too, so a stale
// version still reaches generic code.
//
// Declined (the point stays its input, the log says why): no configuration
// value for it, code that stays generic, a function that is not a guarded
// root, a possible write before the point.
//===----------------------------------------------------------------------===//

#include "core/passes/TablePasses.h"

#include <llvm/ADT/SmallPtrSet.h>
#include <llvm/ADT/Statistic.h>
#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/IntrinsicInst.h>

using namespace llvm;

#define DEBUG_TYPE "specialization-points"

ALWAYS_ENABLED_STATISTIC(PointsAssumed,
                         "specialization points assumed, behind a test that falls back to the generic copy");
ALWAYS_ENABLED_STATISTIC(PointsDeclined, "points the configuration assumes, left as their input");

namespace morpheus::core {

namespace {

// Whether `instruction` leaves memory outside its function's stack as it
// was: no write, or a write into an alloca, or a table lookup.
bool writesNothingShared(const Instruction &instruction, const TableAccessInfo &info) {
  if (!instruction.mayWriteToMemory())
    return true;
  if (const auto *store = dyn_cast<StoreInst>(&instruction))
    return !store->isVolatile() &&
           isa<AllocaInst>(getUnderlyingObject(store->getPointerOperand()));
  if (const auto *intrinsic = dyn_cast<IntrinsicInst>(&instruction)) {
    switch (intrinsic->getIntrinsicID()) {
    case Intrinsic::lifetime_start:
    case Intrinsic::lifetime_end:
    case Intrinsic::assume:
    case Intrinsic::experimental_noalias_scope_decl:
      return true;
    default:
      break;
    }
    if (const auto *transfer = dyn_cast<MemIntrinsic>(intrinsic))
      return !transfer->isVolatile() && isa<AllocaInst>(getUnderlyingObject(transfer->getDest()));
    return false;
  }
  if (const auto *call = dyn_cast<CallBase>(&instruction)) {
    if (const Function *callee = call->getCalledFunction(); callee && isPointMarker(*callee))
      return true; // another point: a marker does nothing
    if (const AccessSite *site = info.siteFor(call))
      return site->signature.kind == AccessKind::Lookup;
  }
  return false;
}

// The first instruction that may run before `point` (in its function) and
// write shared memory, or null.
const Instruction *writeBefore(const CallInst &point, const TableAccessInfo &info) {
  const BasicBlock *home = point.getParent();
  for (const Instruction &instruction : *home) {
    if (&instruction == &point)
      break;
    if (!writesNothingShared(instruction, info))
      return &instruction;
  }
  // Every block from which the point's block can be reached (itself
  // included when it is in a loop: then all of it may run first).
  SmallPtrSet<const BasicBlock *, 16> before;
  SmallVector<const BasicBlock *, 16> work(pred_begin(home), pred_end(home));
  while (!work.empty()) {
    const BasicBlock *block = work.pop_back_val();
    if (!before.insert(block).second)
      continue;
    work.append(pred_begin(block), pred_end(block));
  }
  for (const BasicBlock *block : before)
    for (const Instruction &instruction : *block)
      if (!writesNothingShared(instruction, info))
        return &instruction;
  return nullptr;
}

std::string describe(const Instruction &instruction) {
  if (const auto *call = dyn_cast<CallBase>(&instruction))
    if (const Function *callee = call->getCalledFunction())
      return "a call to " + callee->getName().str();
  return std::string("a ") + instruction.getOpcodeName();
}

void assume(const PointCall &point, int64_t value, Function &generic) {
  CallInst &call = *point.call;
  Function &root = *call.getFunction();
  BasicBlock *head = call.getParent();
  BasicBlock *assumed = head->splitBasicBlock(&call, "spec." + point.label);
  BasicBlock *fallback =
      BasicBlock::Create(root.getContext(), "spec." + point.label + ".miss", &root);
  head->getTerminator()->eraseFromParent();
  IRBuilder<> builder(head);
  Value *holds =
      point.kind == PointKind::Assume
          ? builder.CreateICmpNE(point.input, ConstantInt::get(point.input->getType(), 0))
          : builder.CreateICmpEQ(point.input, ConstantInt::get(point.input->getType(), value,
                                                               /*isSigned=*/true));
  builder.CreateCondBr(holds, assumed, fallback);

  builder.SetInsertPoint(fallback);
  SmallVector<Value *, 4> arguments;
  for (Argument &argument : root.args())
    arguments.push_back(&argument);
  CallInst *genericResult = builder.CreateCall(&generic, arguments);
  if (root.getReturnType()->isVoidTy())
    builder.CreateRetVoid();
  else
    builder.CreateRet(genericResult);

  call.replaceAllUsesWith(ConstantInt::get(
      call.getType(), point.kind == PointKind::Assume ? 1 : value, /*isSigned=*/true));
  call.eraseFromParent();
}

} // namespace

PreservedAnalyses SpecializationPointsPass::run(Module &module, ModuleAnalysisManager &mam) {
  auto calls = pointCalls(module);
  if (!calls) {
    // matchPointCall's errors are reported when the space is read
    // (specializationSpace); here the markers are left as they are and
    // the JIT names the unresolved marker.
    consumeError(calls.takeError());
    return PreservedAnalyses::all();
  }
  if (calls->empty())
    return PreservedAnalyses::all();
  const TableAccessInfo &info = mam.getResult<TableAccessAnalysis>(module);
  // Decide every point before changing any code: the write test reads the
  // function as its author wrote it.
  struct Plan {
    PointCall point;
    std::optional<int64_t> value;
    Function *generic = nullptr;
  };
  std::vector<Plan> plans;
  for (const PointCall &point : *calls) {
    Plan plan{point, std::nullopt, nullptr};
    std::string function = point.call->getFunction()->getName().str();
    PointDecision decision{point.label, function, false, 0, ""};
    auto chosen = context.points.find(point.label);
    auto copy = context.genericCopy.find(function);
    if (context.genericFunctions.count(function)) {
      plans.push_back(plan); // the fallback's twin: not logged
      continue;
    }
    if (chosen == context.points.end())
      decision.detail = "not assumed by this configuration";
    else if (auto why = context.unguardedFunctions.find(function);
             why != context.unguardedFunctions.end())
      decision.detail = why->second;
    else if (auto kept = context.framesKept.find(function); kept != context.framesKept.end())
      decision.detail = kept->second;
    else if (copy == context.genericCopy.end() || !module.getFunction(copy->second))
      decision.detail = "not in a root with a generic copy to fall back to (no guard, or "
                        "the point is in a function the root calls)";
    else if (const Instruction *write = writeBefore(*point.call, info))
      decision.detail = describe(*write) + " may write memory before the point: the "
                                           "generic handler could not start over";
    else {
      plan.value = chosen->second;
      plan.generic = module.getFunction(copy->second);
      decision.applied = true;
      decision.value = point.kind == PointKind::Assume ? 1 : chosen->second;
      decision.detail = point.kind == PointKind::Assume
                            ? "assumed true, guarded (a miss runs the generic handler)"
                            : "assumed " + std::to_string(chosen->second) +
                                  ", guarded (a miss runs the generic handler)";
    }
    if (decision.applied)
      ++PointsAssumed;
    else if (chosen != context.points.end())
      ++PointsDeclined;
    if (context.log)
      context.log->points.push_back(std::move(decision));
    plans.push_back(std::move(plan));
  }
  for (const Plan &plan : plans) {
    if (plan.value)
      assume(plan.point, *plan.value, *plan.generic);
    else
      disablePoint(plan.point);
  }
  eraseUnusedMarkers(module);
  return PreservedAnalyses::none();
}

} // namespace morpheus::core
