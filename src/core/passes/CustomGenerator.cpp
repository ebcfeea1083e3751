//===- CustomGenerator.cpp - a lookup becomes a custom generator's code ---===//
//
// A lookup in a read-only table a custom generator serves
// (core/LookupGenerator.h: registered by a handler's author or a policy,
// for a named table or a table kind) becomes the code the generator makes
// from the table's current contents: the generator's function, linked
// into the module and inlined, tells for the key which entry of the
// snapshot the table would answer with (its index), or none, or that the
// key is left to the table; a switch on that turns the index into the
// entry's value address in `__morpheus.TABLE.values` (TableRewriting.h),
// the address every table pass hands out, so a hit reads as the table's
// value would and distinct entries keep distinct addresses; a miss is null;
// anything else (a key the generator leaves, an index out of range) calls
// the table's own lookup on that path.
//
// Correctness rests on two things. The table does not change while this
// code runs: the data plane never writes it (whyNotInlinable) and the
// control plane's writes bump the program guard first, so a stale version
// falls back to the generic code from the next packet on, as for every
// table pass. And the generator answers as the table: that is its
// author's claim, the one thing here Morpheus cannot prove; what it can
// check it does: the snapshot holds the whole table, the function has the
// type `i64 (ptr)` and only reads memory (no write, no call but
// intrinsics), so it can do nothing but answer. A generator that fails
// (an error, a function that does not pass those checks, a module that does
// not link) is declined with its reason and the site keeps its lookup.
//
//   %v = call ptr @mu_lookup(ptr @routes, ptr %key)
// becomes
//   %k = call ptr asm "", "=r,0"(ptr %key)
//   %i = call i64 @__morpheus.generated.routes.N(ptr %k)   ; inlined by O2
//   switch i64 %i, label %ask [ i64 -1, %miss; i64 0, %entry0; ... ]
//   %v = phi ptr [ values + 0 * stride, %entry0 ], ..., [ null, %miss ],
//                [ %lookup, %ask ]
//===----------------------------------------------------------------------===//

#include "core/passes/TablePasses.h"

#include <llvm/Analysis/ValueTracking.h>
#include <llvm/ADT/SmallPtrSet.h>
#include <llvm/ADT/Statistic.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Linker/Linker.h>
#include <llvm/Support/raw_ostream.h>

using namespace llvm;

#define DEBUG_TYPE "custom-generator"

ALWAYS_ENABLED_STATISTIC(SitesGenerated, "lookups replaced by a custom generator's code");
ALWAYS_ENABLED_STATISTIC(SitesDeclined, "lookups a generator serves left alone");

namespace morpheus::core {

namespace {

// Why `function` is not a generated lookup the pass may call, or nullopt:
// its type must be i64 (ptr), and it and every function it calls (defined
// in its module) may only read memory and write their own stack.
std::optional<std::string> whyNotALookup(const Function &function) {
  FunctionType *type = function.getFunctionType();
  if (type->isVarArg() || type->getNumParams() != 1 || !type->getParamType(0)->isPointerTy() ||
      type->getReturnType() != Type::getInt64Ty(function.getContext()))
    return "its type is not i64 (ptr key)";
  auto onStack = [](const Value *pointer) {
    return isa<AllocaInst>(getUnderlyingObject(pointer));
  };
  SmallVector<const Function *, 4> worklist{&function};
  SmallPtrSet<const Function *, 4> seen{&function};
  while (!worklist.empty()) {
    const Function &code = *worklist.pop_back_val();
    if (code.isDeclaration())
      return &code == &function ? std::string("it has no body")
                                : "it calls '" + code.getName().str() +
                                      "', not defined in its code";
    for (const Instruction &instruction : instructions(code)) {
      const Value *written = nullptr;
      if (auto *store = dyn_cast<StoreInst>(&instruction))
        written = store->getPointerOperand();
      else if (auto *rmw = dyn_cast<AtomicRMWInst>(&instruction))
        written = rmw->getPointerOperand();
      else if (auto *exchange = dyn_cast<AtomicCmpXchgInst>(&instruction))
        written = exchange->getPointerOperand();
      else if (auto *memory = dyn_cast<MemIntrinsic>(&instruction))
        written = memory->getDest();
      else if (auto *intrinsic = dyn_cast<IntrinsicInst>(&instruction)) {
        if (intrinsic->mayWriteToMemory() && !intrinsic->isLifetimeStartOrEnd() &&
            intrinsic->getIntrinsicID() != Intrinsic::assume)
          return "it calls " + intrinsic->getCalledFunction()->getName().str() +
                 ", which writes memory";
      } else if (auto *call = dyn_cast<CallBase>(&instruction)) {
        const Function *callee = call->getCalledFunction();
        if (!callee)
          return std::string("it calls through a pointer");
        if (seen.insert(callee).second)
          worklist.push_back(callee);
      }
      if (written && !onStack(written))
        return "it writes memory off its stack";
    }
  }
  return std::nullopt;
}

// The generator's module for `table`, checked, linked into `module`; the
// name of its lookup function there, or why not.
Expected<std::string> linkGenerated(Module &module, const LookupGenerator &generator,
                                    const TableInfo &table, const TableContents &contents,
                                    unsigned site) {
  auto generated = generator.generate(table, contents, module.getContext());
  if (!generated)
    return generated.takeError();
  Module &code = **generated;
  Function *function = code.getFunction(generator.function);
  if (!function)
    return makeError("no function '{0}' in its code", generator.function);
  if (auto why = whyNotALookup(*function))
    return makeError("its function '{0}': {1}", generator.function, *why);
  std::string message;
  raw_string_ostream stream(message);
  if (verifyModule(code, &stream))
    return makeError("its code is not valid IR: {0}", message);
  // Only the lookup and what it uses are linked in (LinkOnlyNeeded, from a
  // declaration of its per-site name); all of it stays the module's own
  // (internal: the linker renames what clashes).
  std::string name = "__morpheus.generated." + table.name + "." + std::to_string(site);
  for (GlobalValue &global : code.global_values())
    if (!global.isDeclaration() && &global != function)
      global.setLinkage(GlobalValue::InternalLinkage);
  function->setName(name);
  function->setLinkage(GlobalValue::ExternalLinkage);
  code.setDataLayout(module.getDataLayout());
  code.setTargetTriple(module.getTargetTriple());
  module.getOrInsertFunction(name, function->getFunctionType());
  if (Linker::linkModules(module, std::move(*generated), Linker::Flags::LinkOnlyNeeded))
    return makeError("its code does not link into the handler");
  Function *linked = module.getFunction(name);
  if (!linked)
    return makeError("its function is not in the handler after linking");
  linked->setLinkage(GlobalValue::InternalLinkage);
  linked->addFnAttr(Attribute::AlwaysInline);
  return name;
}

} // namespace

PreservedAnalyses CustomGeneratorPass::run(Module &module, ModuleAnalysisManager &mam) {
  if (context.generators.empty())
    return PreservedAnalyses::all();
  context.declines = &SitesDeclined;
  bool changed = rewriteEligibleLookups(
      module, mam, context,
      [&](const AccessSite &site, const TableInfo &table, const TableContents &contents,
          LookupRewriter &rewriter) {
        const LookupGenerator *generator = generatorFor(context.generators, table);
        if (!generator)
          return false;
        auto decline = [&](SiteOutcome outcome, std::string why) {
          return declineSite(context, site, Decider::CustomGeneratorPass, outcome,
                             "generator '" + generator->name + "': " + std::move(why));
        };
        if (!contents.complete)
          return decline(SiteOutcome::NotReadWhole, "the table was not read whole (more than " +
                         std::to_string(GeneratorReadLimit) + " entries?)");
        auto name = linkGenerated(module, *generator, table, contents, site.id);
        if (!name)
          return decline(SiteOutcome::NoRepresentation, toString(name.takeError()));

        CallBase &lookup = *site.call;
        LLVMContext &llvmContext = module.getContext();
        auto *pointerType = cast<PointerType>(lookup.getType());
        IRBuilder<> builder(llvmContext);
        LookupRewriter::Frame frame = rewriter.openFrame(
            lookup, *site.signature.keyArg, site.table, builder, contents.entries.size() + 2);
        Function *function = frame.head->getParent();
        Value *index = builder.CreateCall(module.getFunction(*name), {frame.keyMemory},
                                          site.table + ".generated");
        BasicBlock *ask =
            BasicBlock::Create(llvmContext, site.table + ".ask.table", function, frame.tail);
        BasicBlock *miss =
            BasicBlock::Create(llvmContext, site.table + ".generated.miss", function, frame.tail);
        SwitchInst *dispatch =
            builder.CreateSwitch(index, ask, unsigned(contents.entries.size() + 1));
        dispatch->addCase(builder.getInt64(uint64_t(GeneratedMiss)), miss);
        builder.SetInsertPoint(miss);
        builder.CreateBr(frame.tail);
        frame.result->addIncoming(ConstantPointerNull::get(pointerType), miss);
        for (size_t i = 0; i < contents.entries.size(); ++i) {
          BasicBlock *hit = BasicBlock::Create(llvmContext, site.table + ".generated.entry",
                                               function, frame.tail);
          dispatch->addCase(builder.getInt64(i), hit);
          builder.SetInsertPoint(hit);
          builder.CreateBr(frame.tail);
          frame.result->addIncoming(rewriter.valuePointer(site.table, contents.entries[i]), hit);
        }
        builder.SetInsertPoint(ask);
        builder.CreateBr(frame.tail);
        LookupRewriter::closeFrame(lookup, frame, LookupRewriter::CallKept::OnMissPath, ask);
        ++SitesGenerated;

        if (context.log) {
          context.log->record(site, Decider::CustomGeneratorPass, SiteOutcome::Applied,
                              "generator '" + generator->name + "' over " +
                                  std::to_string(contents.entries.size()) +
                                  " entries; keys it leaves keep the lookup");
          context.log->inlined[site.table] = contents.entries;
        }
        return true;
      });
  return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
}

} // namespace morpheus::core
