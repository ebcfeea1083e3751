#include "core/Pipeline.h"

#include "core/passes/TablePasses.h"

#include <llvm/Analysis/AliasAnalysis.h>
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Transforms/Utils/ModuleUtils.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <set>

using namespace llvm;

namespace morpheus::core {

namespace {

// Holds the analysis managers wired the way the new pass manager wants.
struct Managers {
  LoopAnalysisManager lam;
  FunctionAnalysisManager fam;
  CGSCCAnalysisManager cgam;
  ModuleAnalysisManager mam;
  PassBuilder builder;

  Managers(const AccessSignatureTable &sigs, const TableCatalog &catalog,
           TargetMachine *tm)
      : builder(tm) {
    fam.registerPass([&] { return builder.buildDefaultAAPipeline(); });
    builder.registerModuleAnalyses(mam);
    builder.registerCGSCCAnalyses(cgam);
    builder.registerFunctionAnalyses(fam);
    builder.registerLoopAnalyses(lam);
    builder.crossRegisterProxies(lam, fam, cgam, mam);
    mam.registerPass([&] { return TableAccessAnalysis(sigs, &catalog); });
  }
};

// Global data is state shared with every other version of the program (the
// backend hands all versions the same maps), so its layout must not change:
// nothing may be dropped, merged or turned into a constant.
void pinSharedGlobals(Module &module) {
  std::set<GlobalValue *> used;
  SmallVector<GlobalValue *, 16> existing;
  collectUsedGlobalVariables(module, existing, /*CompilerUsed=*/true);
  used.insert(existing.begin(), existing.end());
  std::vector<GlobalValue *> add;
  for (GlobalVariable &global : module.globals())
    if (global.hasInitializer() && !global.getName().starts_with("llvm.") &&
        !used.count(&global))
      add.push_back(&global);
  appendToCompilerUsed(module, add);
}

// Program entries the guard does not cover, and everything they call:
// specialized code there could run after its assumptions broke.
std::set<std::string> reachableFromUnguardedPrograms(Module &module,
                                                     const AccessSignatureTable &sigs,
                                                     const ProgramGuardOptions &guard) {
  std::set<std::string> reached;
  std::vector<Function *> worklist;
  for (Function &function : module)
    if (sigs.isProgramEntry(function) &&
        std::find(guard.entries.begin(), guard.entries.end(), function.getName()) ==
            guard.entries.end())
      worklist.push_back(&function);
  while (!worklist.empty()) {
    Function *function = worklist.back();
    worklist.pop_back();
    if (!reached.insert(function->getName().str()).second)
      continue;
    for (Instruction &inst : instructions(*function))
      if (auto *call = dyn_cast<CallBase>(&inst))
        if (Function *callee = call->getCalledFunction(); callee && !callee->isDeclaration())
          worklist.push_back(callee);
  }
  return reached;
}

Error verify(Module &module, const char *stage) {
  std::string message;
  raw_string_ostream stream(message);
  if (verifyModule(module, &stream))
    return makeError("internal error: invalid IR after {0}: {1}", stage,
                     stream.str());
  return Error::success();
}

// TEST-ONLY: MORPHEUS_TEST_CRASH_PASS=segv|abort crashes the pipeline right
// after the table passes (a store through a null pointer, or abort()), as a
// broken pass would, so tests can prove that a crash costs one cycle and not
// the daemon (ProgramSpec::specialize recovers it). Never set it elsewhere.
void crashIfAskedForTests() {
  const char *how = std::getenv("MORPHEUS_TEST_CRASH_PASS");
  if (!how)
    return;
  if (std::string_view(how) == "abort")
    std::abort();
  if (std::string_view(how) == "segv") {
    int *nowhere = nullptr;
    asm volatile("" : "+r"(nowhere)); // hides the null, so the store is emitted
    *nowhere = 1;
  }
}

} // namespace

std::vector<std::string> tablePassNames() {
  return {
#define MORPHEUS_TABLE_PASS(NAME, CLASS) NAME,
#include "core/passes/Passes.def"
  };
}

TableAccessInfo analyzeModule(Module &module, const AccessSignatureTable &sigs,
                              const TableCatalog &catalog) {
  Managers managers(sigs, catalog, nullptr);
  return managers.mam.getResult<TableAccessAnalysis>(module);
}

ReadPlan planReads(const TableAccessInfo &info, const TableCatalog &catalog,
                   uint32_t inlineLimit) {
  ReadPlan plan;
  for (const AccessSite &site : info.sites) {
    if (whyNotInlinable(site, info, catalog))
      continue;
    TableReadRequest &request = plan[site.table];
    request.wholeTableLimit = inlineLimit;
    if (site.key.constantKey)
      request.keys.push_back(*site.key.constantKey);
  }
  return plan;
}

Expected<SpecializationLog> specializeModule(Module &module,
                                             const AccessSignatureTable &sigs,
                                             const TableCatalog &catalog,
                                             const TableSnapshot &snapshot,
                                             const SpecializationOptions &options) {
  Managers managers(sigs, catalog, options.targetMachine);
  SpecializationLog log;
  TablePassContext context{&catalog, &snapshot, &log, options.constantSection,
                           options.inlineLimit, {}};
  if (options.guard)
    context.unguardedFunctions = reachableFromUnguardedPrograms(module, sigs, *options.guard);

  // Sites no pass may touch get their reason once, up front.
  {
    const TableAccessInfo &info =
        managers.mam.getResult<TableAccessAnalysis>(module);
    for (const AccessSite &site : info.sites)
      if (std::optional<std::string> why = whyNotInlinable(site, info, catalog))
        log.record(site, "analysis", false, *why);
      else if (context.unguardedFunctions.count(site.function))
        log.record(site, "analysis", false,
                   "runs in a program without a guard (no fallback slot)");
      else if (!snapshot.count(site.table))
        log.record(site, "analysis", false, "table contents not read");
  }

  pinSharedGlobals(module);
  std::vector<std::string> names =
      options.tablePasses ? *options.tablePasses : tablePassNames();
  ModulePassManager passes;
  for (const std::string &name : names) {
    bool known = false;
#define MORPHEUS_TABLE_PASS(NAME, CLASS)                                       \
    if (name == NAME) {                                                        \
      passes.addPass(CLASS(context));                                          \
      known = true;                                                            \
    }
#include "core/passes/Passes.def"
    if (!known)
      return makeError("unknown pass '{0}'", name);
  }
  passes.run(module, managers.mam);
  crashIfAskedForTests();
  if (Error err = verify(module, "table passes"))
    return err;

  if (options.guard) {
    if (options.linkGuardRuntime)
      if (Error err = options.linkGuardRuntime(module))
        return err;
    ModulePassManager guard;
    guard.addPass(ProgramGuardPass(*options.guard));
    guard.run(module, managers.mam);
    if (Error err = verify(module, "program guard"))
      return err;
  }

  if (options.optimize) {
    ModulePassManager o2 =
        managers.builder.buildPerModuleDefaultPipeline(OptimizationLevel::O2);
    o2.run(module, managers.mam);
    if (Error err = verify(module, "O2 pipeline"))
      return err;
  }
  return log;
}

} // namespace morpheus::core
