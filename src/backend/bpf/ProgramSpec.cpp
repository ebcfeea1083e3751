#include "backend/bpf/ProgramSpec.h"

#include "backend/bpf/BpfObject.h"
#include "backend/bpf/Codegen.h"
#include "backend/bpf/ComparedCopy.h"
#include "backend/bpf/Profile.h"
#include "backend/bpf/StaticSlots.h"
#include "backend/bpf/VerifierBounds.h"
#include "core/GuardPlanning.h"
#include "core/PhaseClock.h"
#include "core/PristineBitcode.h"
#include "support/Log.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/Path.h>
#include <llvm/Transforms/Utils/Cloning.h>
#include <llvm/Transforms/Utils/ModuleUtils.h>

#include <algorithm>
#include <optional>

namespace morpheus::bpf {

namespace {

// The kernel's limit on instructions processed while verifying one program
// (BPF_COMPLEXITY_LIMIT_INSNS).
constexpr uint64_t VerifierLimit = 1'000'000;

// What compare chains may cost the verifier, per program: a quarter of the
// limit, so estimates that are off by a factor of a few still load.
constexpr uint64_t ChainInstructionBudget = VerifierLimit / 4;

// Drops the programs named in `leftOut` from a version's module (the
// version reuses them as loaded; their bodies were never read:
// PristineBitcode::parse). What only they called goes with them in O2;
// every global stays (pinned by the pipeline: their layout is shared with
// the live maps). A program something still refers to (none can once the
// static slots are gone) stays declared, and the object lacks it as well.
void leaveOutPrograms(llvm::Module &module, const std::set<std::string> &leftOut) {
  std::set<llvm::Function *> functions;
  for (const std::string &name : leftOut)
    if (llvm::Function *function = module.getFunction(name))
      functions.insert(function);
  llvm::removeFromUsedLists(module, [&](llvm::Constant *value) {
    return functions.count(llvm::dyn_cast<llvm::Function>(value->stripPointerCasts()));
  });
  for (llvm::Function *function : functions) {
    // The static slots' old initializers linger as unused constants.
    function->removeDeadConstantUsers();
    if (function->use_empty())
      function->eraseFromParent();
  }
}

} // namespace

// libbpf derives internal map names from the object name; keep it short and
// identical for every version of the program.
std::string objectNameFor(const std::string &path) {
  std::string stem = llvm::sys::path::stem(path).str();
  if (auto dot = stem.find('.'); dot != std::string::npos)
    stem.resize(dot);
  return stem.empty() ? "prog" : stem;
}

Expected<std::unique_ptr<ProgramSpec>> ProgramSpec::load(const std::string &path,
                                                         const FrontendOptions &options,
                                                         const KeptGeneric &keptGeneric) {
  std::unique_ptr<ProgramSpec> spec(new ProgramSpec());
  spec->context = std::make_unique<llvm::LLVMContext>();
  spec->sourcePath = path;
  spec->name = objectNameFor(path);
  core::PhaseClock clock(spec->phases);
  auto source = loadProgram(path, options, *spec->context);
  if (!source)
    return source.takeError();
  spec->pristine = std::move(source->module);
  spec->legacy = source->legacy;
  auto target = createTargetMachine(*spec->pristine);
  if (!target)
    return target.takeError();
  spec->machine = std::move(*target);
  if (spec->machine->getTargetCPU() != "v4") {
    auto longJumps = longJumpMachine(*spec->machine);
    if (!longJumps)
      return longJumps.takeError();
    spec->longJumps = std::move(*longJumps);
  }
  clock.end("frontend (source to IR)");

  // One object serves every load of the original, the live one included:
  // built without its program arrays' static slots, which the live load
  // writes itself (Optimizer::load) and copies get from Morpheus
  // (StaticSlots.h). Code generation may adjust the IR it is given: it gets
  // a clone.
  spec->staticSlots = bpf::staticProgramSlots(*spec->pristine);
  std::unique_ptr<llvm::Module> withoutSlots = llvm::CloneModule(*spec->pristine);
  removeStaticProgramSlots(*withoutSlots);
  // A program that draws random numbers or reads clocks is compared as a
  // copy of its own (ComparedCopy.h): the same clone, those calls replayed.
  std::unique_ptr<llvm::Module> compared;
  if (callsReplayedHelpers(*withoutSlots))
    compared = llvm::CloneModule(*withoutSlots);
  std::optional<Expected<std::vector<char>>> elf, comparedElf;
  if (Error crashed = runRecoverably(path + ": code generation of the original", [&] {
        elf.emplace(emitObject(*withoutSlots, *spec->machine, options.buildCache));
        if (compared) {
          Expected<unsigned> replaced = makeComparedCopy(*compared);
          comparedElf.emplace(replaced ? emitObject(*compared, *spec->machine, options.buildCache)
                                       : Expected<std::vector<char>>(replaced.takeError()));
        }
      })) {
    // LLVM cut short in this context may have left it inconsistent:
    // abandon it untouched (leaked) rather than destroy it.
    (void)withoutSlots.release();
    (void)compared.release();
    (void)spec->pristine.release();
    (void)spec->machine.release();
    (void)spec->context.release();
    return crashed;
  }
  if (!*elf)
    return elf->takeError();
  spec->original = std::move(**elf);
  if (comparedElf) {
    if (!*comparedElf)
      return withContext(comparedElf->takeError(), path + ": the compared original");
    spec->comparedOriginal = std::move(**comparedElf);
  }
  clock.end("code generation of the original");
  auto catalog = readCatalog(spec->original, spec->name);
  if (!catalog)
    return withContext(catalog.takeError(), path);
  spec->tables = std::move(*catalog);
  for (const std::string &map : keptGeneric.maps)
    if (!spec->tables.count(map)) {
      std::vector<std::string> names;
      for (const auto &[name, table] : spec->tables)
        names.push_back(name);
      return makeError("{0}: no map '{1}' to keep generic (its maps: {2}; globals need no "
                       "policy: every packet compares the bytes it folded with theirs)",
                       path, map, names.empty() ? "none" : llvm::join(names, ", "));
    }
  for (auto &[name, table] : spec->tables)
    table.keptGeneric = keptGeneric.everyMap || keptGeneric.maps.count(name);
  auto globals = readGlobalSlices(spec->original, spec->name);
  if (!globals)
    return withContext(globals.takeError(), path);
  spec->globalSlices = std::move(*globals);
  auto programs = readPrograms(spec->original, spec->name);
  if (!programs)
    return withContext(programs.takeError(), path);
  spec->opened = std::move(*programs);
  spec->makesTailCalls = bpf::makesTailCalls(*spec->pristine);
  clock.end("object read (maps, globals, sizes)");
  // Versions are built without variables' locations, which every cycle's
  // parse, passes, verification and code generation would otherwise carry
  // (dropVariableLocations; the original's object has been emitted without
  // them too). What reads the pristine IR reads types, fields and lines.
  dropVariableLocations(*spec->pristine);
  spec->pristineBitcode = core::PristineBitcode(*spec->pristine);
  clock.end("bitcode kept for the versions");
  spec->access = core::analyzeModule(*spec->pristine, spec->signatures, spec->tables);
  clock.end("analysis");
  for (const llvm::Function &function : *spec->pristine)
    if (spec->signatures.isProgramEntry(function))
      spec->entries.push_back(function.getName().str());
  if (spec->entries.empty())
    return makeError("{0}: no program (a function in a SEC(\"...\") section)", path);
  if (spec->entries.size() > MaxPrograms)
    return makeError("{0}: {1} programs; Morpheus manages at most {2} per object",
                     path, spec->entries.size(), MaxPrograms);
  return spec;
}

std::string ProgramSpec::pinsByNameUnder(const std::string &root) const {
  if (!legacy.iproute2)
    return root;
  return (root.empty() ? std::string(DefaultPinRoot) : root) + "/" + Iproute2GlobalPins;
}

core::ReadPlan ProgramSpec::readPlan(uint32_t inlineLimit) const {
  return core::planReads(access, tables, inlineLimit);
}

Expected<SnapshotLayout> ProgramSpec::snapshotLayout() const {
  auto initial = readInitialValues(original, name);
  if (!initial)
    return initial.takeError();
  SnapshotLayout layout{tables, globalSlices, {}, entries};
  for (const core::GlobalSlice &slice : globalSlices)
    if (auto section = initial->find(slice.sectionTable); section != initial->end())
      layout.sectionBytes[slice.sectionTable] = section->second.size();
  return layout;
}

Expected<SpecializedObject>
ProgramSpec::specialize(const core::TableSnapshot &snapshot,
                        const SpecializeRequest &request) const {
  // A crash in a pass or in code generation must cost one version, not the
  // daemon. The version's module lives in a context of its own (build), so
  // the crash cannot have touched the pristine IR: the crashed context is
  // abandoned untouched (leaked: even destroying it could crash; the
  // longjmp out of build() skips its destructors), and the next version
  // starts from the same pristine bitcode. What in-process
  // recovery cannot undo is damage to process-wide state (a lock held
  // inside malloc).
  // A function of the version past 16-bit jumps (the original's fits: its
  // in-program generic copy, inlined tables and fast paths make the
  // version larger) is generated again for cpu v4 where the kernel takes
  // v4's long jumps, and so are the versions after it; the original's
  // arithmetic is kept (build).
  std::optional<Expected<SpecializedObject>> result;
  auto attempt = [&](llvm::TargetMachine &emitter, const std::string &what) {
    result.reset();
    return runRecoverably(sourcePath + ": " + what,
                          [&] { result.emplace(build(snapshot, request, emitter)); });
  };
  Error crashed = needsLongJumps ? attempt(*longJumps, "specialization for cpu v4")
                                 : attempt(*machine, "specialization");
  crashed = llvm::handleErrors(std::move(crashed),
                               [&](std::unique_ptr<LlvmFatalError> fatal) -> Error {
                                 if (needsLongJumps || !fatal->branchOutOfRange() ||
                                     !longJumps || !kernelTakesLongJumps())
                                   return Error(std::move(fatal));
                                 needsLongJumps = true;
                                 processLog().info(
                                     sourcePath + ": a function of the version outgrew 16-bit "
                                                  "jumps; versions are generated for cpu v4 "
                                                  "(32-bit jumps, which this kernel verifies)");
                                 return attempt(*longJumps, "specialization for cpu v4");
                               });
  if (crashed)
    return makeError("{0}; no new version", llvm::toString(std::move(crashed)));
  return std::move(*result);
}

ProgramType ProgramSpec::programType(const std::string &entry) const {
  const llvm::Function *function = pristine->getFunction(entry);
  if (!function || !function->hasSection())
    return ProgramType::Other;
  return programTypeOfSection(function->getSection()).value_or(ProgramType::Other);
}

std::string ProgramSpec::section(const std::string &entry) const {
  const llvm::Function *function = pristine->getFunction(entry);
  return function && function->hasSection() ? function->getSection().str() : std::string();
}

Expected<std::string> ProgramSpec::runnableEntry(const std::string &requested) const {
  auto runnable = [&](const std::string &entry) {
    return programType(entry) != ProgramType::Other;
  };
  if (!requested.empty()) {
    if (std::find(entries.begin(), entries.end(), requested) == entries.end())
      return makeError("no program named '{0}' (it has {1})", requested,
                       llvm::join(entries, ", "));
    if (!runnable(requested))
      return makeError("program '{0}' is a {1} program (section '{2}'): Morpheus runs XDP and "
                       "TC programs",
                       requested, kernelTypeOfSection(section(requested)), section(requested));
    return requested;
  }
  auto first = std::find_if(entries.begin(), entries.end(), runnable);
  if (first == entries.end()) {
    std::vector<std::string> described;
    for (const std::string &entry : entries)
      described.push_back(llvm::formatv("'{0}' ({1})", entry, kernelTypeOfSection(section(entry))));
    return makeError("no XDP or TC program to run, only {0}", llvm::join(described, ", "));
  }
  return *first;
}

bool ProgramSpec::registersCallbacks(const std::string &entry) const {
  llvm::Function *function = pristine->getFunction(entry);
  return function && core::registersCallbacks(*function);
}

bool ProgramSpec::hasContext(const std::string &entry) const {
  const llvm::Function *function = pristine->getFunction(entry);
  return function && !function->arg_empty() && function->getArg(0)->getType()->isPointerTy() &&
         function->getReturnType()->isIntegerTy();
}

std::optional<std::string> ProgramSpec::fallbackArrayOwner() const {
  for (const std::string &entry : entries)
    if (hasContext(entry))
      return entry;
  return std::nullopt;
}

core::EntryFallback ProgramSpec::fallbackFor(const std::string &entry, unsigned index,
                                             const SpecializeRequest &request) const {
  auto facts = request.programs.find(entry);
  bool known = facts != request.programs.end();
  auto kindOf = [&](const std::string &program) -> std::optional<ProgramArrayKind> {
    auto found = opened.find(program);
    return found == opened.end() ? std::nullopt : std::optional(found->second.arrayKind);
  };
  std::optional<uint32_t> slot;
  std::string noSlot = "it could not join the fallback program array";
  if (known) {
    slot = facts->second.fallbackSlot;
  } else if (std::optional<std::string> owner = fallbackArrayOwner();
             owner && kindOf(*owner) == kindOf(entry)) {
    slot = index;
  } else if (owner) {
    noSlot = "it cannot share the fallback program array with '" + *owner +
             "' (a program array takes programs of one type and attach type)";
  }
  // In an object that makes tail calls, a fallback by tail call is one
  // more for the kernel to count: it keeps a program's behaviour only when
  // the program makes none of its own (what the original then does is the
  // same whatever the count) and the count before it leaves one within the
  // kernel's limit (ProgramFacts::tailCallsBefore).
  std::optional<uint32_t> before = known ? facts->second.tailCallsBefore : std::nullopt;
  std::string costsAHop =
      !makesTailCalls ? ""
      : !before       ? "the object makes tail calls, and a fallback by tail call keeps "
                        "their count only for a program that makes none of its own, reached "
                        "from the entry without a cycle or a tail call in a loop, which this "
                        "one is not known to be"
      : *before + 1 > KernelTailCallLimit
          ? llvm::formatv("up to {0} tail calls may come before it, and a fallback by tail "
                          "call would be one past the kernel's {1}",
                          *before, KernelTailCallLimit)
                .str()
          : "";
  std::string noTailCall = !hasContext(entry)  ? "no ctx to tail-call with"
                           : !costsAHop.empty() ? costsAHop
                           : !slot              ? noSlot
                                                : "";
  core::EntryFallback fallback{entry, core::Fallback::None, 0, dropVerdict(programType(entry)),
                               "", std::nullopt};
  std::optional<uint64_t> verified = known ? facts->second.verifiedInstructions : std::nullopt;
  std::string verifiedText =
      verified ? "the original verified in " + std::to_string(*verified) + " instructions"
               : "verifier cost unknown";
  // The verifier explores the generic copy (what the original cost) and
  // the specialized code (at most about as much again): a third of the
  // limit leaves a margin.
  bool bothFit = verified && 3 * *verified <= VerifierLimit;
  // A tail call to the original keeps the generic code out of the version,
  // which then costs O2, code generation and verification of its
  // specialized code alone (about half of an in-program version's, every
  // cycle). A callback the entry registers would lose its fallback with it
  // (a callback can fall back only inside the program), so such entries
  // keep the generic copy where it is known to fit.
  // Hot keys of a table the data plane writes hold only while its writes
  // are counted, and the original a tail call runs counts none of them:
  // their fast paths need the generic copy too.
  auto writtenHotKeys = [&] {
    for (const core::AccessSite &site : access.sites)
      if ((request.hotKeys.count(site.id) || request.perCpuHotKeys.count(site.id)) &&
          !access.isReadOnly(site.table))
        return true;
    return false;
  };
  std::string keepsCopy =
      !noTailCall.empty()                                  ? ""
      : registersCallbacks(entry)                          ? "it registers callbacks, which fall "
                                                             "back only inside the program"
      : request.instrument ? "an instrumented version counts the data plane's writes, which "
                             "the original does not"
      : writtenHotKeys()   ? "hot keys of a table the data plane writes need its writes "
                             "counted, which the original does not"
                           : "";
  if (noTailCall.empty() && (keepsCopy.empty() || !verified)) {
    fallback.fallback = core::Fallback::TailCall;
    fallback.slot = *slot;
    fallback.detail =
        (keepsCopy.empty() ? "a tail call to the original: the version carries no generic copy"
                           : verifiedText) +
        (makesTailCalls ? llvm::formatv(" (tail calls before it: at most {0})", *before).str()
                        : "");
  } else if (bothFit || !verified) {
    fallback.fallback = core::Fallback::InProgram;
    fallback.detail = verifiedText + (bothFit ? ": both versions fit the verifier's limit" : "") +
                      "; no tail call: " + (noTailCall.empty() ? keepsCopy : noTailCall);
  } else if (noTailCall.empty()) {
    fallback.fallback = core::Fallback::TailCall;
    fallback.slot = *slot;
    fallback.detail = verifiedText + ": two versions would not fit the verifier's limit";
  } else {
    fallback.detail = verifiedText +
                      ": two versions would not fit the verifier's limit, and no tail call: " +
                      noTailCall;
  }
  return fallback;
}

uint64_t ProgramSpec::verifierPathBudget(const std::string &entry,
                                         const SpecializeRequest &request) const {
  uint64_t cost = 0;
  if (auto facts = request.programs.find(entry); facts != request.programs.end())
    cost = facts->second.verifiedInstructions.value_or(0);
  if (!cost)
    if (auto program = opened.find(entry); program != opened.end())
      cost = program->second.instructions;
  return std::max<uint64_t>(1, ChainInstructionBudget / std::max<uint64_t>(cost, 1));
}

Expected<SpecializedObject> ProgramSpec::build(const core::TableSnapshot &snapshot,
                                               const SpecializeRequest &request,
                                               llvm::TargetMachine &emitter) const {
  std::vector<core::BuildPhase> cloning;
  core::PhaseClock clock(cloning);
  // Each version in a context of its own, gone with it (core/PristineBitcode.h).
  llvm::LLVMContext versionContext; // declared before the module: outlives it
  std::set<std::string> leftOut;
  if (request.programsBuilt)
    for (const std::string &entry : entries)
      if (!request.programsBuilt->count(entry))
        leftOut.insert(entry);
  auto parsed = pristineBitcode.parse(versionContext, leftOut);
  if (!parsed)
    return parsed.takeError();
  std::unique_ptr<llvm::Module> clone = std::move(*parsed);
  clock.end("clone");
  // Guarded versions share the live program arrays, whose slots only the
  // live original's load writes; an unguarded build (offline) is a program
  // of its own and keeps them.
  if (request.guardVersion || request.sharesLiveMaps)
    removeStaticProgramSlots(*clone);
  auto built = [&](const std::string &entry) { return !leftOut.count(entry); };
  leaveOutPrograms(*clone, leftOut);
  core::SpecializationOptions options;
  options.inlineLimit = request.inlineLimit;
  options.costModel = request.costModel;
  // Inlined values get their own read-only section, hence their own map, so
  // the program's .rodata stays exactly as the original declares it.
  options.constantSection = ".rodata.morpheus";
  // libbpf makes .rodata* maps read-only to programs, and the verifier reads
  // them as constants; index chains must not have their values told apart.
  options.indexedValueSection = ".data.morpheus";
  if (request.guardVersion) {
    core::ProgramGuardOptions guard;
    guard.holdsFunction = GuardHoldsFunction;
    guard.enterFunction = GuardEnterFunction;
    guard.version = *request.guardVersion;
    guard.versionArraySection = VersionArraySection;
    for (unsigned index = 0; index < entries.size(); ++index) {
      if (!built(entries[index]))
        continue;
      core::EntryFallback fallback = fallbackFor(entries[index], index, request);
      if (request.restampable.count(entries[index]))
        fallback.versionSlot = index;
      guard.entries.push_back(std::move(fallback));
    }
    options.guard = std::move(guard);
    options.linkGuardRuntime = linkRuntime;
  }
  if (!request.faults.ignoreVerifierBudget)
    for (const std::string &entry : entries)
      if (built(entry))
        options.verifierPathBudget[entry] = verifierPathBudget(entry, request);
  // The clean-up on the helper calls as clang's O2 saw them in the
  // original: the verifier's cost of the version, not only its speed
  // (Pipeline.h).
  options.keepAccessCallFacts = false;
  options.optimize = core::SpecializationOptions::Optimization::Cleanup;
  options.noCompareChains = request.noCompareChains;
  options.noRegions = request.noRegions;
  options.tablePasses = request.tablePasses;
  if (request.instrument && request.guardVersion) { // the guard runtime has the slot
    options.profile = core::ProfileOptions{ProfileSlotFunction, ProfileSites, ProfileKeyBytes,
                                           request.notProfiled};
    options.writeGuards = core::WriteGuardOptions{WriteBumpFunction, WriteCountFunction,
                                                  WriteBucketBits, request.notProfiled};
    options.writeCounts = request.writeCounts;
  }
  options.hotKeys = request.hotKeys;
  options.perCpuHotKeys = request.perCpuHotKeys;
  options.hotTuples = request.hotTuples;
  options.globals = request.globals;
  options.faults = request.faults;
  options.targetMachine = &emitter;
  options.arithmetic = machineArithmetic(*machine);
  if (&emitter != machine.get())
    // A function's own cpu (clang's -mcpu) would override the emitter's.
    for (llvm::Function &function : *clone)
      if (!function.isDeclaration())
        function.addFnAttr("target-cpu", emitter.getTargetCPU());
  auto log = core::specializeModule(*clone, signatures, tables, snapshot, options);
  if (!log)
    return withContext(log.takeError(), sourcePath);
  log->phases.insert(log->phases.begin(), cloning.begin(), cloning.end());
  SpecializedObject object{{}, {}, std::move(*log)};
  core::PhaseClock codegen(object.log.phases);
  restoreVerifierBounds(*clone, request.faults.undefinedArithmetic);
  // The compared copy is the version as built, its replayed calls aside:
  // the live object with those calls patched where the kernel allows the
  // replayers as subprograms, else a copy built from IR (ComparedCopy.h).
  bool replays = request.compared && replaysHelpers() && callsReplayedHelpers(*clone);
  bool patched = replays && replayedCallsPatchable(*clone);
  if (replays && !patched) {
    std::unique_ptr<llvm::Module> compared = llvm::CloneModule(*clone);
    Expected<unsigned> replaced = makeComparedCopy(*compared);
    if (!replaced)
      return withContext(replaced.takeError(), sourcePath);
    auto elf = emitObject(*compared, emitter);
    if (!elf)
      return elf.takeError();
    object.comparedElf = std::move(*elf);
    codegen.end("code generation of the compared copy");
  }
  if (patched)
    if (Error err = carryReplayRuntime(*clone))
      return withContext(std::move(err), sourcePath);
  if (request.live || (request.compared && !replays) || patched) {
    auto elf = emitObject(*clone, emitter);
    if (!elf)
      return elf.takeError();
    object.elf = std::move(*elf);
    codegen.end("code generation");
    if (patched) {
      auto copy = patchReplayedCalls(object.elf);
      if (!copy)
        return withContext(copy.takeError(), sourcePath);
      object.comparedElf = std::move(*copy);
      if (!request.live)
        object.elf.clear();
      codegen.end("the compared copy (replayed calls patched)");
    } else if (request.compared && !replays) {
      object.comparedElf = request.live ? object.elf : std::move(object.elf);
    }
  }
  return object;
}

} // namespace morpheus::bpf
