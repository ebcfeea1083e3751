#include "core/Pipeline.h"

#include "core/CleanupPipeline.h"
#include "core/Globals.h"

#include "core/GuardPlanning.h"
#include "core/PhaseClock.h"
#include "core/passes/DefinedArithmetic.h"
#include "core/passes/ProgramGuard.h"
#include "core/passes/TablePasses.h"

#include <llvm/Analysis/AliasAnalysis.h>
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/ErrorHandling.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Transforms/Utils/ModuleUtils.h>

#include <algorithm>
#include <cstdlib>
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

// Whether this build checks its assertions (NDEBUG unset): a debug build.
#ifdef NDEBUG
constexpr bool BuiltWithAssertions = false;
#else
constexpr bool BuiltWithAssertions = true;
#endif

Error verify(Module &module, StringRef stage) {
  std::string message;
  raw_string_ostream stream(message);
  if (verifyModule(module, &stream))
    return makeError("internal error: invalid IR after {0}: {1}", stage,
                     stream.str());
  return Error::success();
}

// Whether a table pass may rewrite the lookup at `site` (it may still
// decline for reasons only the pass checks).
// An inner-map site resolve-inner-table names a table for is specialized
// too (it depends on what the outer table holds).
bool mayRewrite(const AccessSite &site, const TableAccessInfo &info,
                const TableCatalog &catalog, const TableSnapshot &snapshot) {
  if (resolveInnerTable(site, info, snapshot).table)
    return true;
  return !whyNotInlinable(site, info, catalog) && snapshot.count(site.table);
}

// Whether fold-read-only-fields may fold loads through the lookup at `site`.
bool mayFoldFields(const AccessSite &site, const TableAccessInfo &info,
                   const TableCatalog &catalog, const TableSnapshot &snapshot) {
  return !whyNoFieldFolding(site, info, catalog) && snapshot.count(site.table);
}

// Whether key-set-filter, when it runs (`runs`), may answer the keys the
// table at `site` does not hold without the lookup.
bool mayFilterKeys(const AccessSite &site, const TableAccessInfo &info,
                   const TableCatalog &catalog, const TableSnapshot &snapshot, bool runs) {
  return runs && !whyNoKeySetFilter(site, info, catalog) && snapshot.count(site.table);
}

// Whether heavy-hitter-fast-path may put hot keys in front of the lookup
// at `site`.
// `writeGuarded`: the tables whose writes guard-table-writes counts.
bool mayFastPath(const AccessSite &site, const TableAccessInfo &info,
                 const TableCatalog &catalog, const TableSnapshot &snapshot,
                 const TablePassContext &context, const std::set<std::string> &writeGuarded) {
  auto hot = context.hotKeys.find(site.id);
  bool anyHot = (hot != context.hotKeys.end() && !hot->second.empty()) ||
                context.perCpuHotKeys.count(site.id);
  return anyHot &&
         !whyNotInlinable(site, info, catalog, writeGuarded.count(site.table) > 0) &&
         snapshot.count(site.table);
}

// The table the table passes see at `site`: its own, or, for an inner-map
// site, the one resolve-inner-table names for it (which runs first; the
// site keeps its id). Empty when there is none.
std::string servedTable(const AccessSite &site, const TableAccessInfo &info,
                        const TableSnapshot &snapshot) {
  return site.table.empty() ? resolveInnerTable(site, info, snapshot).table.value_or("")
                            : site.table;
}

// The compare chains inline-small-table would build, by site id, with
// their lengths.
std::map<unsigned, size_t> plannedChains(const TableAccessInfo &info,
                                         const TableCatalog &catalog,
                                         const TableSnapshot &snapshot,
                                         const TablePassContext &context) {
  std::map<unsigned, size_t> chains;
  if (context.noCompareChains)
    return chains;
  for (const AccessSite &original : info.sites) {
    // An inner-map site counts as the access to the table it resolves to.
    AccessSite site = original;
    site.table = servedTable(original, info, snapshot);
    if (site.table.empty() || whyNotInlinable(site, info, catalog) ||
        !snapshot.count(site.table) || context.untouchable(site.function))
      continue;
    const TableContents &contents = snapshot.at(site.table);
    if (site.key.constantKey && contents.known(*site.key.constantKey))
      continue; // constant-key-lookup's (a trie's too: read whole or its key probed)
    if (contents.complete && !contents.entries.empty() &&
        contents.entries.size() <= context.inlineLimit)
      chains[site.id] = contents.entries.size();
  }
  return chains;
}

// The names of the functions `entry` reaches, through calls and taken
// addresses: the code the verifier walks for that entry.
std::set<std::string> namesReachedFrom(Function &entry) {
  std::set<std::string> reached;
  for (Function *function : reachableFrom(&entry, /*throughAddresses=*/true))
    reached.insert(function->getName().str());
  return reached;
}

// The verifier explores a program path by path; chains in sequence
// multiply its paths by (entries + 1) each when entries yield constants
// (distinct states while what they yield is live), by about 2 when they
// yield an index (entries look alike once loaded). Per entry, the longest
// constant chains become index chains until the estimate fits the budget.
std::set<unsigned> chainsOverBudget(Module &module, const AccessSignatureTable &sigs,
                                    const TableAccessInfo &info,
                                    const std::map<unsigned, size_t> &chains,
                                    const std::map<std::string, uint64_t> &budget) {
  std::set<unsigned> lowered;
  for (const auto &[entryName, paths] : budget) {
    Function *entry = module.getFunction(entryName);
    if (!entry || !paths)
      continue;
    std::set<std::string> reached = namesReachedFrom(*entry);
    std::vector<std::pair<size_t, unsigned>> mine; // (length, site)
    for (const AccessSite &site : info.sites)
      if (auto chain = chains.find(site.id);
          chain != chains.end() && reached.count(site.function))
        mine.emplace_back(chain->second, site.id);
    std::sort(mine.rbegin(), mine.rend());
    auto estimate = [&] {
      double product = 1;
      for (auto [length, id] : mine)
        product *= lowered.count(id) ? 2.0 : double(length + 1);
      return product;
    };
    for (auto [length, id] : mine) {
      if (estimate() <= double(paths))
        break;
      lowered.insert(id);
    }
  }
  return lowered;
}

// How many of `keys` heavy-hitter-fast-path would answer with a value
// (hotKeyAnswer: an entry the snapshot holds). Only those multiply the verifier's
// paths: each hit yields a constant copy of a different value, a state the
// verifier cannot prune against the lookup's (nor against another hit's)
// while what it yields is live. A key the table does not hold is answered
// null (written tables) or left to the lookup: the null joins the lookup's
// own null once the program checks it (the verifier turns a checked null
// into the same scalar 0), so its compares add instructions, not paths.
// A table the snapshot does not name: every key counts.
size_t keysAnsweredWithValues(const AccessSite &site, const TableAccessInfo &info,
                              const std::vector<Bytes> &keys, const TablePassContext &context,
                              const TableSnapshot &snapshot, bool littleEndian) {
  std::string table = servedTable(site, info, snapshot);
  auto contents = snapshot.find(table);
  if (contents == snapshot.end())
    return keys.size();
  return std::count_if(keys.begin(), keys.end(), [&](const Bytes &key) {
    std::optional<const TableEntry *> answer =
        hotKeyAnswer(contents->second, context.catalog->at(table), key,
                     !info.isReadOnly(table), littleEndian);
    return answer && *answer;
  });
}

// How many verifier paths the fast paths at `site` multiply the entry's by
// (1: none): a chain by the keys it answers with a value + 1
// (keysAnsweredWithValues; conservative: the verifier may prune some once
// the value is dead, which cannot be predicted here). Per-CPU chains by the
// keys any of their arms (the other CPUs' chain among them) answers with a
// value + 1: the arms meet where the call was, and there, as at a chain's
// join, a state is the answer, whichever arm gave it — the CPU number is
// dead by then, so the switch adds instructions, not states (as null
// answers do). Disjoint hot sets count their sum, equal ones the largest.
size_t fastPathPaths(const AccessSite &site, const TableAccessInfo &info,
                     const TablePassContext &context, const TableSnapshot &snapshot,
                     bool littleEndian) {
  std::set<Bytes> compared;
  if (auto hot = context.hotKeys.find(site.id); hot != context.hotKeys.end())
    compared.insert(hot->second.begin(), hot->second.end());
  if (auto perCpu = context.perCpuHotKeys.find(site.id); perCpu != context.perCpuHotKeys.end())
    for (const auto &[cpu, keys] : perCpu->second)
      compared.insert(keys.begin(), keys.end());
  return keysAnsweredWithValues(site, info, std::vector<Bytes>(compared.begin(), compared.end()),
                                context, snapshot, littleEndian) +
         1;
}

// Fast paths are optional: per entry, the verifier's paths through the
// compare chains (each chain multiplies them by its entries + 1, as in
// chainsOverBudget, before any index lowering) with the fast paths added
// (fastPathPaths) must fit the budget; keys answered null add no path. The
// fast paths multiplying most go first until the rest fit. Returns the
// sites whose fast paths go.
// A flow's hot tuples (flow-fast-path), under the flow's profile site:
// each copies the code after the flow, which the verifier then walks once
// more, so the tuples + 1 must fit the budget (in every entry with a
// budget: where the flow is is not known before the pass). Not multiplied
// by the chains' paths: chains over the budget are index-lowered
// (chainsOverBudget), adding up instead of multiplying, and in a copy the
// flow's lookups have constant keys. A flow over the budget keeps the
// hottest tuples that fit, their number in `tuplesThatFit`; a kernel that
// refuses the version anyway gets one without copies in the same cycle
// (noCompareChains, which flow-fast-path honours).
std::set<unsigned> fastPathsOverBudget(Module &module, const TableAccessInfo &info,
                                       const std::map<unsigned, size_t> &chains,
                                       const TablePassContext &context,
                                       const TableSnapshot &snapshot,
                                       const std::map<std::string, uint64_t> &budget,
                                       std::map<unsigned, size_t> &tuplesThatFit) {
  std::set<unsigned> dropped;
  for (const auto &[entryName, paths] : budget) {
    Function *entry = module.getFunction(entryName);
    if (!entry || !paths)
      continue;
    std::set<std::string> reached = namesReachedFrom(*entry);
    double product = 1;
    std::vector<std::pair<size_t, unsigned>> fast; // (paths multiplied by, site)
    for (const AccessSite &site : info.sites) {
      if (!reached.count(site.function))
        continue;
      if (auto chain = chains.find(site.id); chain != chains.end())
        product *= double(chain->second + 1);
      else if (size_t multiplied = fastPathPaths(site, info, context, snapshot,
                                                 module.getDataLayout().isLittleEndian());
               multiplied > 1)
        fast.emplace_back(multiplied, site.id);
    }
    std::sort(fast.begin(), fast.end()); // fewest first: kept first
    for (auto [multiplied, id] : fast) {
      if (product * double(multiplied) > double(paths))
        dropped.insert(id);
      else
        product *= double(multiplied);
    }
    for (const auto &[flow, tuples] : context.hotTuples)
      if (tuples.size() + 1 > paths) {
        size_t kept = size_t(paths) - 1;
        auto known = tuplesThatFit.find(flow);
        tuplesThatFit[flow] = known == tuplesThatFit.end() ? kept : std::min(known->second, kept);
      }
  }
  return dropped;
}

// TEST-ONLY (FaultInjection::crashAfterTablePasses): crashes as a broken
// pass would, so tests can prove that a crash costs one cycle and not the
// daemon (the backend runs the pipeline under crash recovery).
void crashForTests(FaultInjection::Crash crash) {
  switch (crash) {
  case FaultInjection::Crash::None:
    return;
  case FaultInjection::Crash::Abort:
    std::abort();
  case FaultInjection::Crash::FatalError:
    report_fatal_error("test-only fatal error after the table passes");
  case FaultInjection::Crash::Segv: {
    int *nowhere = nullptr;
    asm volatile("" : "+r"(nowhere)); // hides the null, so the store is emitted
    *nowhere = 1;
    return;
  }
  }
}

} // namespace

std::vector<std::string> tablePassNames() {
  return {
#define MORPHEUS_TABLE_PASS(NAME, CLASS) NAME,
#include "core/Passes.def"
  };
}

std::vector<std::string> tablePassesWithout(const std::vector<std::string> &leftOut) {
  std::vector<std::string> passes;
  for (const std::string &pass : tablePassNames())
    if (std::find(leftOut.begin(), leftOut.end(), pass) == leftOut.end())
      passes.push_back(pass);
  return passes;
}

TableAccessInfo analyzeModule(Module &module, const AccessSignatureTable &sigs,
                              const TableCatalog &catalog) {
  Managers managers(sigs, catalog, nullptr);
  return managers.mam.getResult<TableAccessAnalysis>(module);
}

Expected<SpecializationLog> specializeModule(Module &module,
                                             const AccessSignatureTable &sigs,
                                             const TableCatalog &catalog,
                                             const TableSnapshot &snapshot,
                                             const SpecializationOptions &options) {
  SpecializationLog log;
  PhaseClock clock(log.phases);
  Managers managers(sigs, catalog, options.targetMachine);
  // First, before any analysis or folding: the generic copies the guard
  // plan makes and every table pass then work on the machine's arithmetic.
  if (options.arithmetic && !options.faults.undefinedArithmetic) {
    ModulePassManager defined;
    defined.addPass(DefinedArithmeticPass(*options.arithmetic));
    defined.run(module, managers.mam);
    clock.end("defined arithmetic");
  }
  TablePassContext context;
  context.catalog = &catalog;
  context.snapshot = &snapshot;
  context.log = &log;
  context.constantSection = options.constantSection;
  context.indexedValueSection = options.indexedValueSection;
  context.inlineLimit = options.inlineLimit;
  context.noCompareChains = options.noCompareChains;
  context.noRegions = options.noRegions;
  context.faults = options.faults;
  context.profile = options.profile;
  context.hotKeys = options.hotKeys;
  context.perCpuHotKeys = options.perCpuHotKeys;
  context.hotTuples = options.hotTuples;
  context.writeGuards = options.writeGuards;
  context.writeCounts = options.writeCounts;
  bool keySetFilterRuns = !options.tablePasses || llvm::is_contained(*options.tablePasses,
                                                                     "key-set-filter");
  std::set<std::string> writeGuarded;
  if (options.writeGuards)
    writeGuarded = writeGuardedTables(managers.mam.getResult<TableAccessAnalysis>(module),
                                      catalog, *options.writeGuards);
  context.points = options.points;
  context.costModel = options.costModel;
  context.generators = options.generators;
  if (options.guard && !options.globals.empty())
    context.globals = &options.globals;

  context.framesKept = managers.mam.getResult<TableAccessAnalysis>(module).framesKept;
  GuardPlan plan;
  if (options.guard) {
    const TableAccessInfo &info = managers.mam.getResult<TableAccessAnalysis>(module);
    std::set<const Function *> specializable;
    for (const AccessSite &site : info.sites)
      if (mayRewrite(site, info, catalog, snapshot) ||
          mayFoldFields(site, info, catalog, snapshot) ||
          mayFilterKeys(site, info, catalog, snapshot, keySetFilterRuns) ||
          mayFastPath(site, info, catalog, snapshot, context, writeGuarded))
        specializable.insert(site.call->getFunction());
    // A function with an assumed point is specialized code too: its points'
    // guards fall back to its generic copy.
    auto points = pointCalls(module);
    if (!points)
      return points.takeError();
    for (const PointCall &point : *points)
      if (options.points.count(point.label))
        specializable.insert(point.call->getFunction());
    if (context.globals)
      for (const GlobalAccess &access : analyzeGlobals(module))
        if (options.globals.count(access.global->getName().str())) {
          for (const GlobalLoad &load : access.loads)
            if (!access.writtenAt(load.offset,
                                  module.getDataLayout().getTypeStoreSize(load.load->getType())))
              specializable.insert(load.load->getFunction());
          for (const GlobalCopy &copy : access.copies)
            if (copy.size <= MaxFoldedGlobalCopy && !access.writtenAt(copy.offset, copy.size))
              specializable.insert(copy.copy->getFunction());
        }
    clock.end("planning: what is specializable (analysis, globals)");
    auto planned = planGuards(module, sigs, options.guard->entries, [&](const Function &f) {
      return specializable.count(&f) > 0 && !context.framesKept.count(f.getName().str());
    });
    if (!planned)
      return planned.takeError();
    plan = std::move(*planned);
    if (!plan.genericFunctions.empty()) // the copies' sites: analysed again
      managers.mam.invalidate(module, PreservedAnalyses::none());
    context.unguardedFunctions = plan.unguarded;
    context.genericFunctions = plan.genericFunctions;
    context.genericCopy = plan.genericCopy;
    log.guards = plan.roots;
    clock.end("planning: guard plan (generic copies)");
  }

  // Sites no pass may touch get their reason once, up front. Sites in
  // generic copies are the originals' twins: not logged.
  const TableAccessInfo &info = managers.mam.getResult<TableAccessAnalysis>(module);
  clock.end("planning: analysis of the planned module");
  for (const AccessSite &site : info.sites) {
    if (context.genericFunctions.count(site.function))
      continue;
    if ((!site.outerTables.empty() || !site.mergedTables.empty()) && site.table.empty()) {
      InnerTableResolution resolved = resolveInnerTable(site, info, snapshot);
      if (!resolved.table)
        log.record(site, Decider::Analysis, SiteOutcome::InnerTableUnresolved, resolved.why);
      else if (auto unguarded = context.unguardedFunctions.find(site.function);
               unguarded != context.unguardedFunctions.end())
        log.record(site, Decider::Analysis, SiteOutcome::Unguarded, unguarded->second);
      continue; // resolve-inner-table logs what it names
    }
    std::optional<LookupDecline> why =
        whyNotInlinable(site, info, catalog, options.writeGuards.has_value());
    if (why && (mayFastPath(site, info, catalog, snapshot, context, writeGuarded) ||
                mayFilterKeys(site, info, catalog, snapshot, keySetFilterRuns)))
      continue; // heavy-hitter-fast-path or key-set-filter decides
    if (why && whyNoFieldFolding(site, info, catalog))
      log.record(site, Decider::Analysis, SiteOutcome::NotReplaceable, why->detail);
    else if (why && !snapshot.count(site.table))
      log.record(site, Decider::Analysis, SiteOutcome::TableNotRead, "table contents not read");
    else if (auto unguarded = context.unguardedFunctions.find(site.function);
             unguarded != context.unguardedFunctions.end())
      log.record(site, Decider::Analysis, SiteOutcome::Unguarded, unguarded->second);
    else if (!snapshot.count(site.table))
      log.record(site, Decider::Analysis, SiteOutcome::TableNotRead, "table contents not read");
  }
  // A tail-call fallback runs the original program, whose writes are not
  // counted: hot keys of written tables may then change unseen.
  if (any_of(plan.roots, [](const GuardDecision &root) {
        return root.fallback == Fallback::TailCall;
      }))
    for (const AccessSite &site : info.sites)
      if (writeGuarded.count(site.table) && !info.isReadOnly(site.table) &&
          (context.hotKeys.erase(site.id) + context.perCpuHotKeys.erase(site.id)))
        log.record(site, Decider::HeavyHitterFastPathPass, SiteOutcome::WritesNotCounted,
                   "the tail-call fallback runs the original program, whose writes of " +
                       site.table + " are not counted");
  clock.end("planning: reasons");
  std::map<unsigned, size_t> chains = plannedChains(info, catalog, snapshot, context);
  // Per-CPU chains over the budget give way to one chain for every CPU
  // first; what is still over then loses its keys answered with values.
  std::map<unsigned, size_t> tuplesThatFit;
  std::set<unsigned> overBudget = fastPathsOverBudget(module, info, chains, context, snapshot,
                                                      options.verifierPathBudget, tuplesThatFit);
  bool perCpuDropped = false;
  for (const AccessSite &site : info.sites)
    if (overBudget.count(site.id) && context.perCpuHotKeys.erase(site.id)) {
      perCpuDropped = true;
      log.record(site, Decider::HeavyHitterFastPathPass, SiteOutcome::OverVerifierBudget,
                 "per-CPU chains over the verifier budget: one chain for every CPU");
    }
  if (perCpuDropped)
    overBudget = fastPathsOverBudget(module, info, chains, context, snapshot,
                                     options.verifierPathBudget, tuplesThatFit);
  for (unsigned id : overBudget) {
    context.perCpuHotKeys.erase(id);
    for (const AccessSite &site : info.sites) {
      if (site.id != id)
        continue;
      // The keys answered null (hotKeyAnswer: a written table known not
      // to hold them) cost no path: they stay.
      std::vector<Bytes> &keys = context.hotKeys[id];
      std::string table = servedTable(site, info, snapshot);
      auto contents = snapshot.find(table);
      std::erase_if(keys, [&](const Bytes &key) {
        if (contents == snapshot.end())
          return true;
        std::optional<const TableEntry *> answer =
            hotKeyAnswer(contents->second, catalog.at(table), key, !info.isReadOnly(table),
                         module.getDataLayout().isLittleEndian());
        return !answer || *answer;
      });
      if (keys.empty()) {
        context.hotKeys.erase(id);
        log.record(site, Decider::HeavyHitterFastPathPass, SiteOutcome::OverVerifierBudget,
                   "over the verifier budget with the compare chains already planned");
      }
    }
  }
  for (auto [flow, fit] : tuplesThatFit) {
    std::vector<Bytes> &tuples = context.hotTuples[flow];
    context.hotTuplesOverBudget = tuples.size() - fit;
    tuples.resize(fit);
  }
  context.indexLoweredSites =
      chainsOverBudget(module, sigs, info, chains, options.verifierPathBudget);
  for (const AccessSite &site : info.sites)
    if (context.indexLoweredSites.count(site.id))
      context.indexLoweredTables.insert(servedTable(site, info, snapshot));
  clock.end("planning: verifier budgets");

  pinSharedGlobals(module);
  std::vector<std::string> names =
      options.tablePasses ? *options.tablePasses : tablePassNames();
  // The passes are constructed with a copy of the context: complete it first.
  context.enabledPasses.insert(names.begin(), names.end());
  // One pass manager per pass, so that each pass's time is its own (a pass
  // manager invalidates what a pass did not preserve after each pass either
  // way).
  std::vector<ModulePassManager> passes(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    bool known = false;
#define MORPHEUS_TABLE_PASS(NAME, CLASS)                                       \
    if (names[i] == NAME) {                                                    \
      passes[i].addPass(CLASS(context));                                       \
      known = true;                                                            \
    }
#include "core/Passes.def"
    if (!known)
      return makeError("unknown pass '{0}'", names[i]);
  }
  std::optional<CodeImage> beforeTablePasses;
  if (options.guard)
    beforeTablePasses = imageOf(module);
  clock.end("planning: the image before the table passes");
  // Verified after each table pass, so that an invalid module names the pass
  // that made it, in builds with assertions (the build developers change
  // passes in) and when the caller asks (morpheus-opt, the driver of the
  // pass tests, always does). Otherwise the passes' output is verified once,
  // after all of them (after the program guard in a guarded build): invalid
  // IR still goes no further than this cycle, unnamed, and a developer
  // reruns it in morpheus-opt to learn the pass.
  // Each verification walks the whole module: 0.2-0.3 ms for nf/router or
  // nf/firewall as compiled, 3-5 ms once lpm-as-code has made 500 prefixes
  // code (28,000 lines of IR); after each of the nine passes that follow it,
  // 30-45 ms more, a sixth of that specialization's 260 ms (lpm-as-code
  // and O2 in morpheus-opt), paid every cycle for a name only a developer
  // reads.
  // A guarded build verifies once, after the program guard, what the
  // table passes, the guards' elision, the runtime and the guard did
  // together (each verification walks the whole module, its debug info
  // included). What LLVM's passes (O2 or the clean-up) make of a valid
  // module is LLVM's: verified only with the passes.
  bool verifyEachPass = options.verifyEachPass || BuiltWithAssertions;
  if (verifyEachPass)
    if (Error err = verify(module, "planning, before the table passes"))
      return err;
  for (size_t i = 0; i < names.size(); ++i) {
    passes[i].run(module, managers.mam);
    if (verifyEachPass)
      if (Error err = verify(module, "table pass " + names[i]))
        return err;
    clock.end(names[i]);
  }
  crashForTests(options.faults.crashAfterTablePasses);
  if (!verifyEachPass && !options.guard)
    if (Error err = verify(module, "table passes"))
      return err;
  if (beforeTablePasses) {
    elideUnneededGuards(module, plan, *beforeTablePasses);
    log.guards = plan.roots;
  }

  if (options.linkGuardRuntime)
    if (Error err = options.linkGuardRuntime(module))
      return err;
  if (options.guard) {
    std::optional<std::string> failure;
    ModulePassManager guard;
    guard.addPass(ProgramGuardPass(*options.guard, plan, log.globalChecks, &failure));
    guard.run(module, managers.mam);
    if (failure)
      return makeError("{0}: {1}; not specialized", module.getModuleIdentifier(), *failure);
    if (Error err = verify(module, verifyEachPass ? "program guard"
                                                  : "table passes and program guard"))
      return err;
  }
  clock.end("program guard");

  if (options.optimize != SpecializationOptions::Optimization::None) {
    if (!options.keepAccessCallFacts)
      dropAccessCallFacts(module, sigs);
    bool cleanup = options.optimize == SpecializationOptions::Optimization::Cleanup;
    ModulePassManager optimization =
        cleanup ? buildCleanupPipeline(managers.builder)
                : managers.builder.buildPerModuleDefaultPipeline(OptimizationLevel::O2);
    optimization.run(module, managers.mam);
    std::string phase = cleanup ? "clean-up" : "O2";
    if (verifyEachPass)
      if (Error err = verify(module, phase))
        return err;
    clock.end(phase);
  }
  return log;
}

} // namespace morpheus::core
