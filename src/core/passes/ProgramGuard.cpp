//===- ProgramGuard.cpp - one version check where the kernel enters -------===//
//
// Every specialization of read-only tables assumes their contents as of the
// snapshot. Instead of a guard per table, one program-level guard protects
// them all: the control plane bumps a version word before it changes any
// table (through Morpheus), and specialized code checks, wherever the kernel
// can enter it, that the word still holds the version it was compiled
// against. The roots (program entries and callbacks) and their fallbacks
// are planned by core/GuardPlanning before the table passes; this pass puts
// the check at the start of each guarded root:
//
//   in-program:                             tail call (entries with a ctx):
//   define i32 @prog(ptr %ctx) {            define i32 @prog(ptr %ctx) {
//   morpheus.guard:                         morpheus.guard:
//     %ok = call i32 @holds(i64 V)            %g = call i64 @enter(ptr %ctx, i64 V, i32 SLOT, i32 F)
//     %valid = icmp ne i32 %ok, 0             %valid = icmp slt i64 %g, 0
//     br i1 %valid, label %entry,             br i1 %valid, label %entry,
//                   label %fallback                         label %fallback
//   morpheus.fallback:                      morpheus.fallback:
//     %r = call i32 @prog__morpheus_generic(ptr %ctx)   %r = trunc i64 %g to i32
//     ret i32 %r                              ret i32 %r
//
// Folded globals (fold-read-only-globals) are not covered by the version:
// their writers may bypass Morpheus (mmap). Each folded range is compared
// with the live bytes right there, %same = and of (load volatile == folded
// constant); in-program: %valid = and(%ok != 0, %same); tail call: the
// version passed to enter becomes select(%same, V, ~0), which no guard word
// holds (versions count up from 0), so enter tail-calls the original.
//
// F is what the entry returns when the original cannot be reached (its slot
// empty, the tail-call limit hit): the backend's drop verdict for the
// program type, so such a packet is dropped, never handled by stale code.
// From the moment of the bump every packet, and every callback run later,
// executes generic code, which reads the live tables. Versions only grow,
// so stale code never becomes valid again, with one exception the backend
// makes on purpose: an entry given a version slot reads V from that slot
// of a version array (%v = load volatile i64 from @expected[SLOT], all
// slots V as built) instead of comparing with an immediate. The backend
// rewrites the slot to a later version only after finding every table the
// program reads the same, where it only reads, in that version's snapshot:
// the code is then exactly as valid as a build for that snapshot, and it is
// reused instead of built again (runtime/Optimizer, "reused programs"). The generic copy is always
// inlined: the fallback adds no call and shares the root's stack frame.
// Static allocas stay in the entry block. Runs after the table passes and
// after the backend linked its runtime, so the guard's own table is never
// specialized.
//===----------------------------------------------------------------------===//

#include "core/passes/ProgramGuard.h"

#include "core/passes/TableRewriting.h"

#include <llvm/IR/DebugInfoMetadata.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

using namespace llvm;

namespace morpheus::core {

namespace {

class GuardPlacer {
public:
  GuardPlacer(Module &module, const ProgramGuardOptions &options, const GuardPlan &plan,
              const std::vector<GlobalCheck> &globalChecks)
      : module(module), options(options), plan(plan), globalChecks(globalChecks) {}

  // Places the guard of `root`; an error message when it cannot.
  std::optional<std::string> place(const GuardDecision &root);

private:
  // The entry block split: allocas stay at the top of the new guard block,
  // which branches to the body when the version holds, else to `fallback`.
  struct Split {
    BasicBlock *guard, *body, *fallback;
  };
  Split split(Function &function);
  static void branch(IRBuilder<> &builder, Value *valid, const Split &blocks);
  // Whether every folded global still holds its folded bytes (true when
  // nothing was folded); null when a folded global is missing.
  Value *globalsHold(IRBuilder<> &builder);
  // The version `root`'s guard expects: V, or its version slot's.
  Value *expectedVersion(IRBuilder<> &builder, const GuardDecision &root);

  Module &module;
  const ProgramGuardOptions &options;
  const GuardPlan &plan;
  const std::vector<GlobalCheck> &globalChecks;
  GlobalVariable *versionArray = nullptr; // made for the first slotted root
};

Value *GuardPlacer::expectedVersion(IRBuilder<> &builder, const GuardDecision &root) {
  if (!root.versionSlot)
    return builder.getInt64(options.version);
  if (!versionArray) {
    unsigned slots = 0;
    for (const GuardDecision &other : plan.roots)
      if (other.versionSlot)
        slots = std::max(slots, *other.versionSlot + 1);
    ArrayType *type = ArrayType::get(builder.getInt64Ty(), slots);
    SmallVector<Constant *, 16> built(slots, builder.getInt64(options.version));
    versionArray = new GlobalVariable(module, type, /*isConstant=*/false,
                                      GlobalValue::ExternalLinkage,
                                      ConstantArray::get(type, built), options.versionArray);
    versionArray->setSection(options.versionArraySection);
    versionArray->setAlignment(Align(8));
  }
  Value *at = builder.CreateConstInBoundsGEP2_64(versionArray->getValueType(), versionArray, 0,
                                                 *root.versionSlot);
  return builder.CreateLoad(builder.getInt64Ty(), at, /*isVolatile=*/true,
                            "morpheus.expected");
}

Value *GuardPlacer::globalsHold(IRBuilder<> &builder) {
  Value *same = nullptr;
  for (const GlobalCheck &check : globalChecks) {
    GlobalVariable *global = module.getGlobalVariable(check.global);
    if (!global)
      return nullptr;
    Type *type = builder.getIntNTy(unsigned(check.bytes.size() * 8));
    Constant *expected = constantAt(type, check.bytes, 0, module.getDataLayout());
    if (!expected)
      return nullptr;
    Value *at = builder.CreateConstInBoundsGEP1_64(builder.getInt8Ty(), global, check.offset);
    LoadInst *live = builder.CreateLoad(type, at, /*isVolatile=*/true, "morpheus.global");
    Value *equal = builder.CreateICmpEQ(live, expected);
    same = same ? builder.CreateAnd(same, equal) : equal;
  }
  return same ? same : builder.getTrue();
}

GuardPlacer::Split GuardPlacer::split(Function &function) {
  LLVMContext &context = module.getContext();
  BasicBlock *body = &function.getEntryBlock();
  BasicBlock *guard = BasicBlock::Create(context, "morpheus.guard", &function, body);
  BasicBlock *fallback = BasicBlock::Create(context, "morpheus.fallback", &function, body);
  while (!body->empty() && isa<AllocaInst>(body->front()))
    body->front().moveBefore(*guard, guard->end());
  return {guard, body, fallback};
}

void GuardPlacer::branch(IRBuilder<> &builder, Value *valid, const Split &blocks) {
  builder.CreateCondBr(valid, blocks.body, blocks.fallback);
  builder.SetInsertPoint(blocks.fallback);
}

std::optional<std::string> GuardPlacer::place(const GuardDecision &root) {
  std::string where = "guard of '" + root.function + "': ";
  Function *function = module.getFunction(root.function);
  if (!function || function->isDeclaration())
    return where + "no such function in the module";
  const std::string &runtimeName =
      root.fallback == Fallback::InProgram ? options.holdsFunction : options.enterFunction;
  Function *runtime = module.getFunction(runtimeName);
  if (!runtime)
    return where + "the guard runtime '" + runtimeName + "' is not linked in";
  if (root.fallback == Fallback::TailCall &&
      (function->arg_empty() || !function->getArg(0)->getType()->isPointerTy() ||
       !function->getReturnType()->isIntegerTy()))
    return where + "a tail-call fallback needs a ctx parameter and an integer result";
  Function *generic = nullptr;
  if (root.fallback == Fallback::InProgram) {
    auto copy = plan.genericCopy.find(root.function);
    generic = copy == plan.genericCopy.end() ? nullptr : module.getFunction(copy->second);
    if (!generic)
      return where + "its generic copy is missing";
  }

  Split blocks = split(*function);
  IRBuilder<> builder(blocks.guard);
  // The guard is inlined; calls to inlinable functions need a location
  // when the caller has debug info.
  if (DISubprogram *subprogram = function->getSubprogram())
    builder.SetCurrentDebugLocation(
        DILocation::get(module.getContext(), subprogram->getLine(), 0, subprogram));
  Value *same = globalsHold(builder);
  if (!same)
    return where + "a folded global is missing from the module";
  if (root.fallback == Fallback::InProgram) {
    Value *holds = builder.CreateCall(runtime, {expectedVersion(builder, root)});
    Value *valid = builder.CreateIsNotNull(holds);
    if (!globalChecks.empty())
      valid = builder.CreateAnd(valid, same);
    branch(builder, valid, blocks);
    std::vector<Value *> arguments;
    for (Argument &argument : function->args())
      arguments.push_back(&argument);
    CallInst *result = builder.CreateCall(generic, arguments);
    if (function->getReturnType()->isVoidTy())
      builder.CreateRetVoid();
    else
      builder.CreateRet(result);
  } else {
    Value *version = expectedVersion(builder, root);
    if (!globalChecks.empty())
      version = builder.CreateSelect(same, version, builder.getInt64(UINT64_MAX));
    Value *verdict = builder.CreateCall(
        runtime, {function->getArg(0), version,
                  builder.getInt32(root.slot), builder.getInt32(root.failureVerdict)});
    branch(builder, builder.CreateICmpSLT(verdict, builder.getInt64(0)), blocks);
    builder.CreateRet(builder.CreateTrunc(verdict, function->getReturnType()));
  }
  return std::nullopt;
}

} // namespace

PreservedAnalyses ProgramGuardPass::run(Module &module, ModuleAnalysisManager &) {
  GuardPlacer placer(module, options, plan, globalChecks);
  bool changed = false;
  for (const GuardDecision &root : plan.roots) {
    if (!plan.guarded(root))
      continue;
    if (std::optional<std::string> error = placer.place(root)) {
      if (failure && !*failure)
        *failure = std::move(*error);
      continue;
    }
    changed = true;
  }
  return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
}

} // namespace morpheus::core
