#include "backend/user/Handler.h"

#include "core/Pipeline.h"
#include "core/TableAccessAnalysis.h"
#include "core/PrefetchStage.h"
#include "support/Clang.h"
#include "support/ProgramFile.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/Support/SwapByteOrder.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Transforms/Utils/Cloning.h>

#include <algorithm>

using namespace llvm;

namespace morpheus::user {

namespace {

// What the program guard pass calls: non-zero while the version word still
// holds `version` (an acquire load: on x86 a plain load and a compare).
constexpr const char *GuardHoldsFunction = "morpheus_user_guard_holds";

Error linkGuardRuntime(Module &module) {
  LLVMContext &context = module.getContext();
  Type *i64 = Type::getInt64Ty(context);
  Type *i32 = Type::getInt32Ty(context);
  auto *word = cast<GlobalVariable>(module.getOrInsertGlobal(Guard::VersionSymbol, i64));
  auto *holds = Function::Create(FunctionType::get(i32, {i64}, false),
                                 GlobalValue::InternalLinkage, GuardHoldsFunction, module);
  holds->addFnAttr(Attribute::AlwaysInline);
  IRBuilder<> builder(BasicBlock::Create(context, "entry", holds));
  LoadInst *current = builder.CreateLoad(i64, word, "version");
  current->setAtomic(AtomicOrdering::Acquire);
  current->setAlignment(Align(8));
  builder.CreateRet(
      builder.CreateZExt(builder.CreateICmpEQ(current, holds->getArg(0)), i32));
  return Error::success();
}

Expected<std::unique_ptr<Module>> compileHandler(const std::string &path,
                                                 const HandlerOptions &options,
                                                 LLVMContext &context) {
  auto format = programFormat(path);
  if (!format)
    return format.takeError();
  if (*format != ProgramFormat::C) {
    SMDiagnostic diagnostic;
    std::unique_ptr<Module> module = parseIRFile(path, diagnostic, context);
    if (!module)
      return makeError("{0}: invalid LLVM IR: {1}", path, diagnostic.getMessage());
    return module;
  }
  std::vector<std::string> flags = {"-O2", "-g0", "-I", apiIncludeDirectory()};
  flags.insert(flags.end(), options.cflags.begin(), options.cflags.end());
  auto bitcode = compileToBitcode(MORPHEUS_CLANG, path, flags, options.buildCache);
  if (!bitcode)
    return bitcode.takeError();
  auto module = parseBitcodeFile(bitcode->buffer->getMemBufferRef(), context);
  if (!module)
    return withContext(module.takeError(), path + ": clang output");
  return std::move(*module);
}

// State must live in tables, where every version sees it: a writable
// global would be a separate copy in each JIT-compiled version.
Error checkHandler(const Module &module, const UserSignatures &signatures,
                   const std::string &entry) {
  for (const GlobalVariable &global : module.globals())
    if (global.hasInitializer() && !global.isConstant() && !signatures.isTable(global) &&
        !global.getName().starts_with("llvm."))
      return makeError("{0}: global '{1}' is writable state; keep state in a table (MU_TABLE, "
                       "an MU_ARRAY for counters) so every version of the handler shares it",
                       module.getModuleIdentifier(), global.getName());
  const Function *function = module.getFunction(entry);
  if (!function || !signatures.isProgramEntry(*function))
    return makeError("{0}: no handler '{1}' (a function marked MU_HANDLER)",
                     module.getModuleIdentifier(), entry);
  if (function->arg_size() != 1 || !function->getArg(0)->getType()->isPointerTy() ||
      !function->getReturnType()->isIntegerTy(32))
    return makeError("{0}: handler '{1}' must be int {1}(struct mu_packet *)",
                     module.getModuleIdentifier(), entry);
  return Error::success();
}

// A prefetch function runs outside the handler on packets the handler has
// not seen yet: it may only prefetch. Writes to its own stack (a key being
// built) are all it may do besides calling mu_prefetch.
Error checkPrefetcher(const Function &function) {
  auto fail = [&](const Instruction &at, const char *what) {
    return makeError("{0}: prefetch function '{1}' {2} (it may only build keys on its stack "
                     "and call mu_prefetch)",
                     function.getParent()->getModuleIdentifier(), function.getName(), what);
  };
  auto onStack = [](const Value *pointer) {
    return isa<AllocaInst>(getUnderlyingObject(pointer));
  };
  for (const Instruction &instruction : instructions(function)) {
    if (auto *store = dyn_cast<StoreInst>(&instruction)) {
      if (!onStack(store->getPointerOperand()))
        return fail(instruction, "writes memory off its stack");
    } else if (auto *intrinsic = dyn_cast<IntrinsicInst>(&instruction)) {
      if (auto *memory = dyn_cast<MemIntrinsic>(intrinsic)) {
        if (!onStack(memory->getDest()))
          return fail(instruction, "writes memory off its stack");
      } else if (intrinsic->mayWriteToMemory() && !intrinsic->isLifetimeStartOrEnd() &&
                 intrinsic->getIntrinsicID() != Intrinsic::prefetch) {
        return fail(instruction, "calls an intrinsic that writes memory");
      }
    } else if (auto *call = dyn_cast<CallBase>(&instruction)) {
      const Function *callee = call->getCalledFunction();
      if (!callee || callee->getName() != "mu_prefetch")
        return fail(instruction, "calls a function other than mu_prefetch");
    } else if (instruction.mayWriteToMemory()) {
      return fail(instruction, "writes memory");
    }
  }
  return Error::success();
}

// The prefetch function the handler's sub-batches call, as
// HandlerOptions::prefetch asks: the handler's own MU_PREFETCH function
// (checked), or the stage derived from `generic`, the code the generic
// version runs (markers gone, writes counted), and added to it. Sets
// `origin`; returns the function's name in `generic`, "" for none.
Expected<std::string> choosePrefetcher(const Module &pristine, Module &generic,
                                       const HandlerOptions &options,
                                       const UserSignatures &signatures,
                                       const core::TableCatalog &catalog,
                                       PrefetchStageOrigin &origin) {
  std::string name = options.entry + "_prefetch";
  const Function *written = pristine.getFunction(name);
  if (written && !(written->hasSection() && written->getSection() == MU_PREFETCH_SECTION))
    written = nullptr;
  if (written)
    if (Error err = checkPrefetcher(*written))
      return std::move(err);
  if (options.prefetch == HandlerOptions::Prefetch::None) {
    origin.declined = "not asked for";
    return "";
  }
  if (written && options.prefetch == HandlerOptions::Prefetch::OwnElseDerived) {
    origin.kind = PrefetchStageOrigin::Kind::Written;
    return name;
  }
  if (written) // the derived stage beside it: named apart
    name += "_derived";
  core::TableAccessInfo info = core::analyzeModule(generic, signatures, catalog);
  auto stage = core::derivePrefetchStage(*generic.getFunction(options.entry), info, catalog,
                                         {name, MU_PREFETCH_SECTION, "mu_prefetch"});
  if (!stage)
    return stage.takeError();
  if (!stage->function) {
    origin.declined = stage->declined;
    return "";
  }
  origin = {PrefetchStageOrigin::Kind::Derived, stage->tables, ""};
  return stage->function->getName().str();
}

} // namespace

std::string describe(const PrefetchStageOrigin &origin) {
  switch (origin.kind) {
  case PrefetchStageOrigin::Kind::Written:
    return "the handler's own";
  case PrefetchStageOrigin::Kind::Derived:
    return "derived from the handler: prefetches " + join(origin.tables, ", ");
  case PrefetchStageOrigin::Kind::None:
    break;
  }
  return "none (" + origin.declined + ")";
}

const char *apiIncludeDirectory() { return MORPHEUS_USER_API_INCLUDE; }

VersionHandle Trampoline::installed() const {
  std::lock_guard lock(mutex);
  return running;
}

size_t Trampoline::retiredVersions() const {
  std::lock_guard lock(mutex);
  return retired.size();
}

HandlerFunction Trampoline::enterBurst() {
  inside.fetch_add(1, std::memory_order_seq_cst);
  return function.load(std::memory_order_seq_cst);
}

void Trampoline::leaveBurst() {
  if (inside.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
      anyRetired.load(std::memory_order_seq_cst))
    releaseRetired();
}

void Trampoline::install(VersionHandle version) {
  {
    std::lock_guard lock(mutex);
    function.store(version ? version->entry() : nullptr, std::memory_order_seq_cst);
    if (running)
      retired.push_back(std::move(running));
    running = std::move(version);
    anyRetired.store(!retired.empty(), std::memory_order_seq_cst);
  }
  releaseRetired();
}

void Trampoline::releaseRetired() {
  std::vector<VersionHandle> released;
  {
    std::lock_guard lock(mutex);
    // A burst that entered before the versions were replaced and is still
    // under way keeps `inside` above zero.
    if (inside.load(std::memory_order_seq_cst) != 0)
      return;
    released.swap(retired);
    anyRetired.store(false, std::memory_order_seq_cst);
  }
  // Out of the lock: the last handle removes its JITDylib (Jit::release).
}

Expected<std::unique_ptr<Handler>> Handler::load(const std::string &path,
                                                 const HandlerOptions &options) {
  std::unique_ptr<Handler> handler(new Handler(options));
  handler->context = orc::ThreadSafeContext(std::make_unique<LLVMContext>());
  auto module = compileHandler(path, options, *handler->context.getContext());
  if (!module)
    return module.takeError();
  (*module)->setModuleIdentifier(path);
  if (Error err = checkHandler(**module, handler->signatures, options.entry))
    return err;
  core::annotateAccessCalls(**module, handler->signatures);
  auto space = core::specializationSpace(**module);
  if (!space)
    return space.takeError();
  handler->space = std::move(*space);
  handler->pristine = std::move(*module);

  if (options.tablePasses)
    if (Error err = handler->customizePasses(*options.tablePasses))
      return err;
  auto tables = TableSet::fromModule(*handler->pristine);
  if (!tables)
    return tables.takeError();
  handler->tableSet = std::move(*tables);
  auto jit = Jit::create(*handler->tableSet, handler->profile, handler->writes);
  if (!jit)
    return withContext(jit.takeError(), path);
  handler->jit = std::move(*jit);
  handler->pristine->setDataLayout(handler->jit->dataLayout());

  // The generic handler: every specialization point disabled (its input).
  // Following the traffic, it counts the writes every specialized version
  // counts (WriteCounters.h says why), through the core's pipeline with
  // guard-table-writes alone and no guard: nothing else changes.
  std::unique_ptr<Module> genericModule = CloneModule(*handler->pristine);
  if (handler->followsTraffic()) {
    core::SpecializationOptions counting;
    counting.tablePasses = std::vector<std::string>{"guard-table-writes"};
    counting.writeGuards = WriteCounters::guardOptions();
    counting.targetMachine = &handler->jit->targetMachine();
    counting.linkGuardRuntime = [](Module &module) {
      WriteCounters::linkFunctions(module);
      return Error::success();
    };
    auto log = core::specializeModule(*genericModule, handler->signatures,
                                      handler->tableSet->catalog(), core::TableSnapshot{},
                                      counting);
    if (!log)
      return withContext(log.takeError(), path);
  } else if (Error err = core::disableSpecializationPoints(*genericModule)) {
    return err;
  }
  auto prefetcherName =
      choosePrefetcher(*handler->pristine, *genericModule, options, handler->signatures,
                       handler->tableSet->catalog(), handler->prefetchStage);
  if (!prefetcherName)
    return withContext(prefetcherName.takeError(), path);
  handler->genericBitcode = core::PristineBitcode(*genericModule);
  auto generic = handler->jit->add(orc::ThreadSafeModule(std::move(genericModule),
                                                         handler->context),
                                   options.entry, "generic");
  if (!generic)
    return withContext(generic.takeError(), path);
  handler->genericHandle = *generic;
  if (!prefetcherName->empty()) {
    auto address = handler->jit->address(**generic, *prefetcherName);
    if (!address)
      return withContext(address.takeError(), path);
    handler->prefetchFunction = reinterpret_cast<PrefetchFunction>(*address);
  }
  handler->handlerSlot.install(*generic);
  handler->pristineBitcode = core::PristineBitcode(*handler->pristine);
  // One loop thread runs the handler: no chains per CPU.
  core::TrafficProfileOptions traffic = options.traffic.value_or(core::TrafficProfileOptions{});
  if (!options.traffic)
    traffic.mode = core::ProfileMode::Off;
  traffic.perCpuChains = false;
  core::CycleBackend &steps = *handler;
  handler->cycle.emplace(steps, traffic, &handler->trafficStorage);
  return handler;
}

core::ReadPlan Handler::readPlan() const {
  core::TableAccessInfo info = core::analyzeModule(*pristine, signatures, tableSet->catalog());
  // Tries are read whole past the inline limit only with lpm-as-array:
  // left out (to measure the routes' own lookup and its fast paths), a
  // trie keeps being probed key by key, which heavy-hitter-fast-path
  // needs, and lpm-as-hash sees only tries within the limit.
  core::ReadPlan plan = core::planReads(info, tableSet->catalog(), options.inlineLimit,
                                        runsTablePass("lpm-as-array"));
  // A generator's code is made from every entry of its table.
  if (runsTablePass("custom-generator"))
    for (auto &[table, request] : plan)
      if (core::generatorFor(options.generators, tableSet->catalog().at(table)))
        request.wholeTableLimit = std::max(request.wholeTableLimit, core::GeneratorReadLimit);
  return plan;
}

std::optional<core::TableSnapshot> Handler::readTables(const core::ReadPlan &plan,
                                                       core::CycleReport &report) {
  auto snapshot = tableSet->read(plan);
  if (!snapshot) {
    report.fail(withContext(snapshot.takeError(), pristine->getModuleIdentifier()));
    return std::nullopt;
  }
  return std::move(*snapshot);
}

Expected<orc::ThreadSafeModule>
Handler::specializedModule(const core::TableSnapshot &snapshot, uint64_t version,
                           const core::TrafficChoice &traffic, core::SpecializationLog &log) {
  // Each version in a context of its own, which goes when the JIT is done
  // with its module (core/PristineBitcode.h).
  orc::ThreadSafeContext versionContext(std::make_unique<LLVMContext>());
  auto parsed = pristineBitcode.parse(*versionContext.getContext());
  if (!parsed)
    return parsed.takeError();
  std::unique_ptr<Module> clone = std::move(*parsed);
  core::SpecializationOptions specialization;
  specialization.inlineLimit = options.inlineLimit;
  specialization.targetMachine = &jit->targetMachine();
  // The host (x86-64, AArch64) shifts 8- to 32-bit integers in 32-bit
  // registers with the count masked, as ALU32 eBPF does; its division by
  // zero traps, so divisions are left as they are.
  specialization.arithmetic = core::MachineArithmetic{32, /*definedDivision=*/false};
  specialization.faults = options.faults;
  specialization.points = points;
  specialization.tablePasses = options.tablePasses;
  specialization.generators = options.generators;
  core::ProgramGuardOptions guardOptions;
  guardOptions.holdsFunction = GuardHoldsFunction;
  guardOptions.version = version;
  guardOptions.entries.push_back(
      {options.entry, core::Fallback::InProgram, 0, 0,
       "user space: the generic handler is inlined behind the guard", std::nullopt});
  specialization.guard = guardOptions;
  specialization.linkGuardRuntime = [followsTraffic = followsTraffic()](Module &module) {
    if (followsTraffic) {
      Profile::linkSlotFunction(module);
      WriteCounters::linkFunctions(module);
    }
    return linkGuardRuntime(module);
  };
  if (followsTraffic()) {
    specialization.profile =
        core::ProfileOptions{Profile::SlotFunction, Profile::Sites, Profile::KeyBytes, {}};
    specialization.hotKeys = traffic.hotKeys;
    specialization.hotTuples = traffic.hotTuples;
    specialization.writeGuards = WriteCounters::guardOptions();
    specialization.writeCounts = traffic.writeCounts;
  }
  auto specialized = core::specializeModule(*clone, signatures, tableSet->catalog(), snapshot,
                                            specialization);
  if (!specialized)
    return withContext(specialized.takeError(), pristine->getModuleIdentifier());
  log = std::move(*specialized);
  return orc::ThreadSafeModule(std::move(clone), std::move(versionContext));
}

std::unique_ptr<core::CycleCandidate> Handler::buildCandidate(core::TableSnapshot &snapshot,
                                                              const core::TrafficChoice &traffic,
                                                              core::CycleReport &report) {
  using Clock = std::chrono::steady_clock;
  auto milliseconds = [](Clock::time_point since) {
    return std::chrono::duration<double, std::milli>(Clock::now() - since).count();
  };
  auto start = Clock::now();
  auto module = specializedModule(snapshot, report.version, traffic, report.log);
  if (!module) {
    report.fail(module.takeError());
    return nullptr;
  }
  report.times.codegenMs = milliseconds(start);
  core::PristineBitcode bitcode;
  if (validates())
    module->withModuleDo([&](Module &ir) { bitcode = core::PristineBitcode(ir); });
  start = Clock::now();
  auto version = jit->add(std::move(*module), options.entry, "v" + std::to_string(++versions));
  if (!version) {
    report.fail(withContext(version.takeError(), pristine->getModuleIdentifier()));
    return nullptr;
  }
  report.times.injectionMs = milliseconds(start);
  auto candidate = std::make_unique<Candidate>(std::move(*version));
  candidate->bitcode = std::move(bitcode);
  return candidate;
}

bool Handler::validateCandidate(const core::CycleCandidate &built,
                                const core::TableSnapshot &snapshot, core::CycleReport &report) {
  if (!validates())
    return true;
  const auto &candidate = static_cast<const Candidate &>(built);
  auto start = std::chrono::steady_clock::now();
  core::PhaseClock clock(report.times.validationPhases);
  if (!shadowCopies) {
    auto copies = ShadowCopies::create(*pristine, genericBitcode, options.entry);
    if (!copies) {
      report.fail(withContext(copies.takeError(), pristine->getModuleIdentifier()));
      return false;
    }
    shadowCopies = std::move(*copies);
    clock.end("copies made, the generic handler compiled for them");
  }
  std::vector<ShadowPacket> samples =
      options.shadow->samples(tableSet->catalog(), snapshot, report.cycle,
                              options.shadow->packets);
  clock.end("sample");
  auto difference =
      shadowCopies->compare(*tableSet, writes, candidate.bitcode, report.version, samples);
  clock.end("tables copied, candidate compiled and run beside the generic handler");
  report.times.validationMs =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
          .count();
  if (guardVersion() != report.version || guardChanging()) {
    // The tables moved under the copies: a difference would mean nothing.
    llvm::consumeError(difference.takeError());
    report.end(core::CycleOutcome::Superseded, core::TableChangedDuringCycle);
    return false;
  }
  if (!difference) {
    report.fail(withContext(difference.takeError(), pristine->getModuleIdentifier()));
    return false;
  }
  if (!*difference)
    return true;
  std::string where =
      (*difference)->packet ? "packet " + std::to_string(*(*difference)->packet) + ": " : "";
  report.differenceKey = (*difference)->what;
  report.end(core::CycleOutcome::Refused, "shadow validation: " + where + (*difference)->what);
  return false;
}

Error Handler::installCandidate(std::unique_ptr<core::CycleCandidate> candidate,
                                core::TableSnapshot, core::CycleReport &) {
  handlerSlot.install(std::move(static_cast<Candidate &>(*candidate).version));
  return Error::success();
}

Expected<core::CycleReport> Handler::specialize() {
  core::CycleReport report = cycle->run();
  if (report.outcome == core::CycleOutcome::Failed)
    return makeError("{0}", report.detail);
  return report;
}

Error Handler::configure(const core::PointConfiguration &configuration) {
  if (Error err = core::checkConfiguration(space, configuration))
    return withContext(std::move(err), pristine->getModuleIdentifier());
  points = configuration;
  return Error::success();
}

Error Handler::customizePasses(std::vector<std::string> passes) {
  std::vector<std::string> known = core::tablePassNames();
  for (const std::string &pass : passes)
    if (std::find(known.begin(), known.end(), pass) == known.end())
      return makeError("{0}: no table pass '{1}'", pristine->getModuleIdentifier(), pass);
  const std::string lowering = core::SpecializationPointsPassName;
  if (std::find(passes.begin(), passes.end(), lowering) == passes.end())
    passes.insert(passes.begin(), lowering);
  options.tablePasses = std::move(passes);
  return Error::success();
}

bool Handler::runsTablePass(const std::string &pass) const {
  return !options.tablePasses ||
         std::find(options.tablePasses->begin(), options.tablePasses->end(), pass) !=
             options.tablePasses->end();
}

Expected<core::CycleReport> Handler::specialize(const core::PointConfiguration &configuration) {
  if (Error err = configure(configuration))
    return err;
  return specialize();
}

Expected<std::string> Handler::specializedIR() {
  if (guardChanging())
    return makeError("{0}: a control-plane change is in progress",
                     pristine->getModuleIdentifier());
  auto snapshot = tableSet->read(readPlan());
  if (!snapshot)
    return withContext(snapshot.takeError(), pristine->getModuleIdentifier());
  core::SpecializationLog log;
  auto module = specializedModule(*snapshot, guardVersion(), core::TrafficChoice{}, log);
  if (!module)
    return module.takeError();
  std::string text;
  raw_string_ostream stream(text);
  module->withModuleDo([&](Module &ir) { ir.print(stream, nullptr); });
  return text;
}

} // namespace morpheus::user
