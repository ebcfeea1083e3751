// morpheus-opt: runs Morpheus passes on an LLVM IR file, like LLVM's `opt`,
// so each pass can be tested on a few lines of IR with FileCheck.
//
//   morpheus-opt IN.ll --state STATE.json [-passes=a,b|-passes=] [--guard-version N]
//                [--fallback tail-call|in-program|none] [--inline-limit N] [--cost-model FILE]
//                [--verifier-paths N] [--profile] [--no-profile MAP] [--write-guards] [-O2]
//                [--print-analysis] [--backend bpf|user] [--generator TABLE=FILE.ll:FUNCTION]
//                [--prefetch-stage PRIMITIVE] [--defined-arithmetic 32|64 [--division-traps]]
//                [--replay-calls] [--print-context-reads] [-stats]
//
// STATE.json = {"tables": {"NAME": {"type": "hash", "key_size": 8,
//               "value_size": 16, "max_entries": 1024, "flags": 0,
//               "inner": {"type": ..., "key_size": .., "value_size": ..,
//               "flags": .., "max_entries": .. (only when stored tables
//               must have it)} (maps of maps)}, ...},
//               "maps": <snapshot, as for `morpheus specialize`>,
//               "probed_maps": [NAME, ...] (their entries are answers to
//               lookups of exactly those keys, as the optimizer reads hot
//               keys, not the whole table),
//               "hot_keys": {"SITE": [hex key, ...]} (heavy-hitter-fast-path),
//               "hot_keys_per_cpu": {"SITE": {"CPU": [hex key, ...]}}
//               (per-CPU chains of heavy-hitter-fast-path),
//               "hot_tuples": {"FLOW SITE": [hex tuple, ...]} (flow-fast-path),
//               "write_counts": {"BUCKET": N} (write counts read before the
//               snapshot: fast paths over tables the data plane writes),
//               "points": {"LABEL": value} (specialization points to assume),
//               "globals": {"NAME": hex bytes} (the live writable globals,
//               fold-read-only-globals; with --guard-version only)}
// The specialized module is printed to stdout, then the guard decisions as
// comments (`; guard FUNCTION: FALLBACK: DETAIL`); --print-analysis prints
// the table access analysis instead. --fallback (default tail-call, slot =
// the entry's index) applies to every program entry; --verifier-paths sets
// every entry's verifier path budget. --backend user reads the IR as a
// user-space handler (backend/user: mu_lookup calls, MU_TABLE globals)
// instead of a BPF program; the tables' types are the same names.
// --profile switches instrument-table-sites on (slots of the eBPF runtime's
// size; --no-profile MAP excludes a table); --write-guards switches
// guard-table-writes on (the eBPF runtime's bucket count; --no-profile
// excludes there too). --generator registers a custom generator for TABLE
// (custom-generator) whose code is FILE.ll whatever the table holds: the
// pass's frame, checks and declines are what it tests. --defined-arithmetic
// BITS makes divisions, remainders and shifts defined first, as the pipeline
// does for a backend (core/passes/DefinedArithmetic.h: BITS is
// MachineArithmetic::narrowRegisterBits; --division-traps leaves divisions
// alone, as for a machine whose division traps). --prefetch-stage
// derives each entry's prefetch stage (core/PrefetchStage.h),
// `ENTRY_prefetch` calling PRIMITIVE, instead of specializing, and prints
// the module, then `; prefetch stage ENTRY: ...` for each entry.
// --replay-calls makes the module a compared copy's IR instead
// (core/passes/ReplayCalls with the eBPF replayers, without linking the
// replay runtime) and prints it, then `; replayed N calls`.
// --print-context-reads prints what each entry reads of its context
// (core/ContextReads): `context ENTRY offset O width W [values...]`, and
// `context ENTRY escapes` when it lost the pointer.
// -stats prints, on stderr after the module, what the table passes did: their
// statistics (`N PASS - what`, as LLVM's tools print theirs; a counter
// that stayed 0 is not printed).
// The module is verified after each table pass: a pass that leaves invalid
// IR is named (core::SpecializationOptions::verifyEachPass).
#include "backend/bpf/BpfSignatures.h"
#include "backend/bpf/Codegen.h"
#include "backend/bpf/Frontend.h"
#include "backend/bpf/MapTypes.h"
#include "backend/bpf/Snapshot.h"
#include "backend/user/UserSignatures.h"
#include "core/ContextReads.h"
#include "core/Pipeline.h"
#include "core/PrefetchStage.h"
#include "core/ReplayCalls.h"
#include "core/TableAccessAnalysis.h"

#include <llvm/ADT/Statistic.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/raw_ostream.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <set>
#include <fstream>
#include <sstream>

using namespace morpheus;

namespace {

int fail(const std::string &message) {
  llvm::errs() << "morpheus-opt: " << message << "\n";
  return 1;
}

Expected<core::TableCatalog> catalogFrom(const nlohmann::json &tables) {
  core::TableCatalog catalog;
  for (const auto &[name, table] : tables.items()) {
    std::string typeName = table.value("type", "");
    std::optional<unsigned> type = bpf::mapTypeNamed(typeName);
    if (!type)
      return makeError("table '{0}': unknown map type '{1}'", name, typeName);
    catalog[name] = bpf::tableInfoFor(name, *type, table.value("key_size", 0u),
                                      table.value("value_size", 0u),
                                      table.value("max_entries", 0u));
    catalog[name].flags = table.value("flags", 0u);
    if (table.contains("inner")) {
      const nlohmann::json &inner = table["inner"];
      std::string innerTypeName = inner.value("type", "");
      std::optional<unsigned> innerType = bpf::mapTypeNamed(innerTypeName);
      if (!innerType)
        return makeError("inner template of table '{0}': unknown map type '{1}'", name,
                         innerTypeName);
      catalog[name].innerTemplate = core::TableTemplate{
          bpf::tableInfoFor(name, *innerType, 0, 0, 0).typeName, inner.value("key_size", 0u),
          inner.value("value_size", 0u), inner.value("flags", 0u), {}};
      if (inner.contains("max_entries"))
        catalog[name].innerTemplate->maxEntries = inner.value("max_entries", 0u);
    }
  }
  return catalog;
}

// The command line, parsed.
struct Arguments {
  std::string input, statePath, costModelPath, prefetchPrimitive;
  std::optional<std::string> passes; // given but empty: no table pass
  std::optional<uint64_t> guardVersion;
  std::optional<uint64_t> verifierPaths;
  core::Fallback fallback = core::Fallback::TailCall;
  uint32_t failureVerdict = 0; // what a tail-call guard returns when it cannot fall back
  uint32_t inlineLimit = 64;
  // -O2: LLVM's O2; --cleanup: what the eBPF backend runs on its versions.
  core::SpecializationOptions::Optimization optimize =
      core::SpecializationOptions::Optimization::None;
  bool printAnalysis = false, profile = false, writeGuards = false;
  bool replayCalls = false, printContextReads = false, stats = false;
  bool versionSlots = false; // each entry's guard reads its version from its slot
  std::set<std::string> notProfiled;
  std::string backend = "bpf";
  std::vector<core::LookupGenerator> generators;
  std::optional<core::MachineArithmetic> arithmetic;
  bool divisionTraps = false;
};

// --generator TABLE=FILE.ll:FUNCTION: FILE.ll's code for TABLE, whatever
// the table holds.
Expected<core::LookupGenerator> generatorFrom(const std::string &spec) {
  size_t equals = spec.find('='), colon = spec.rfind(':');
  if (equals == std::string::npos || colon == std::string::npos || colon < equals)
    return makeError("--generator TABLE=FILE.ll:FUNCTION, not '{0}'", spec);
  core::LookupGenerator generator;
  generator.table = spec.substr(0, equals);
  generator.name = spec.substr(equals + 1, colon - equals - 1);
  generator.function = spec.substr(colon + 1);
  generator.generate = [path = generator.name](const core::TableInfo &,
                                               const core::TableContents &,
                                               llvm::LLVMContext &context)
      -> Expected<std::unique_ptr<llvm::Module>> {
    llvm::SMDiagnostic diagnostic;
    std::unique_ptr<llvm::Module> code = llvm::parseIRFile(path, diagnostic, context);
    if (!code)
      return makeError("{0}: {1}", path, diagnostic.getMessage());
    return code;
  };
  return generator;
}

Expected<Arguments> parseArguments(int argc, char **argv) {
  Arguments args;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (arg.starts_with("-passes="))
      args.passes = arg.substr(8);
    else if (arg == "--state")
      args.statePath = value();
    else if (arg == "--guard-version")
      args.guardVersion = std::stoull(value());
    else if (arg == "--inline-limit")
      args.inlineLimit = std::stoul(value());
    else if (arg == "--cost-model")
      args.costModelPath = value();
    else if (arg == "--failure-verdict")
      args.failureVerdict = std::stoul(value());
    else if (arg == "--version-slots")
      args.versionSlots = true;
    else if (arg == "--verifier-paths")
      args.verifierPaths = std::stoull(value());
    else if (arg == "--fallback") {
      std::string kind = value();
      if (kind == "tail-call")
        args.fallback = core::Fallback::TailCall;
      else if (kind == "in-program")
        args.fallback = core::Fallback::InProgram;
      else if (kind == "none")
        args.fallback = core::Fallback::None;
      else
        return makeError("unknown fallback '{0}'", kind);
    }
    else if (arg == "--profile")
      args.profile = true;
    else if (arg == "--no-profile")
      args.notProfiled.insert(value());
    else if (arg == "--write-guards")
      args.writeGuards = true;
    else if (arg == "--generator") {
      auto generator = generatorFrom(value());
      if (!generator)
        return generator.takeError();
      args.generators.push_back(std::move(*generator));
    }
    else if (arg == "--backend")
      args.backend = value();
    else if (arg == "--defined-arithmetic") {
      std::string bits = value();
      if (bits != "32" && bits != "64")
        return makeError("--defined-arithmetic 32|64, not '{0}'", bits);
      args.arithmetic = core::MachineArithmetic{unsigned(std::stoul(bits)), true};
    }
    else if (arg == "--division-traps")
      args.divisionTraps = true;
    else if (arg == "-O2")
      args.optimize = core::SpecializationOptions::Optimization::O2;
    else if (arg == "--cleanup")
      args.optimize = core::SpecializationOptions::Optimization::Cleanup;
    else if (arg == "--print-analysis")
      args.printAnalysis = true;
    else if (arg == "--replay-calls")
      args.replayCalls = true;
    else if (arg == "--print-context-reads")
      args.printContextReads = true;
    else if (arg == "-stats")
      args.stats = true;
    else if (arg == "--prefetch-stage")
      args.prefetchPrimitive = value();
    else if (!arg.starts_with("-") && args.input.empty())
      args.input = arg;
    else
      return makeError("unknown argument '{0}'", arg);
  }
  if (args.input.empty())
    return makeError(
        "usage: morpheus-opt IN.ll --state STATE.json [-passes=a,b] "
        "[--guard-version N] [--fallback tail-call|in-program|none] [--failure-verdict N] "
        "[--version-slots] "
        "[--inline-limit N] [--cost-model FILE] [--verifier-paths N] [--profile] "
        "[--no-profile MAP] [--write-guards] [-O2 | --cleanup] "
        "[--print-analysis] [--backend bpf|user] [--generator TABLE=FILE.ll:FUNCTION] "
        "[--prefetch-stage PRIMITIVE] [--defined-arithmetic 32|64 [--division-traps]] "
        "[--replay-calls] [--print-context-reads] [-stats]");
  return args;
}

// --print-context-reads: what each entry reads of its context.
void printContextReads(const llvm::Module &module, const core::AccessSignatureTable &signatures) {
  for (const llvm::Function &function : module) {
    if (!signatures.isProgramEntry(function))
      continue;
    core::ContextReads reads = core::contextReads(function);
    std::string name = function.getName().str();
    for (const auto &[offset, read] : reads.fields) {
      llvm::outs() << "context " << name << " offset " << offset << " width " << read.width;
      for (uint64_t value : read.singledOut)
        llvm::outs() << " " << value;
      llvm::outs() << "\n";
    }
    if (reads.escapes)
      llvm::outs() << "context " << name << " escapes\n";
  }
}

// --prefetch-stage: each entry's prefetch stage derived, the module printed,
// then what became of each entry.
Error printPrefetchStages(llvm::Module &module, const core::AccessSignatureTable &signatures,
                          const core::TableCatalog &catalog, const std::string &primitive) {
  core::TableAccessInfo info = core::analyzeModule(module, signatures, catalog);
  std::vector<llvm::Function *> entries;
  for (llvm::Function &function : module)
    if (signatures.isProgramEntry(function))
      entries.push_back(&function);
  std::vector<std::string> outcomes;
  for (llvm::Function *entry : entries) {
    auto stage = core::derivePrefetchStage(
        *entry, info, catalog, {entry->getName().str() + "_prefetch", "", primitive});
    if (!stage)
      return stage.takeError();
    outcomes.push_back(entry->getName().str() + ": " +
                       (stage->function ? "prefetches " + llvm::join(stage->tables, ", ") +
                                              " (" + std::to_string(stage->sites) +
                                              (stage->sites == 1 ? " site)" : " sites)")
                                        : "declined: " + stage->declined));
  }
  module.print(llvm::outs(), nullptr);
  for (const std::string &outcome : outcomes)
    llvm::outs() << "; prefetch stage " << outcome << "\n";
  return Error::success();
}

// --print-analysis: the table access analysis, table by table, then site
// by site.
void printAnalysis(llvm::Module &module, const core::AccessSignatureTable &signatures,
                   const core::TableCatalog &catalog) {
  core::TableAccessInfo info = core::analyzeModule(module, signatures, catalog);
  for (const auto &[name, usage] : info.tables) {
    llvm::outs() << "table " << name
                 << (!usage.written ? " ro" : usage.writtenWholesale ? " rw" : " rw-in-part")
                 << "\n";
    for (const std::string &reason : usage.writeReasons)
      llvm::outs() << "  written: " << reason << "\n";
    if (!usage.writtenWholesale)
      for (const core::ValueWrite &write : usage.valueWrites) {
        llvm::outs() << "  value write: key " << (write.key ? toHex(*write.key) : "any");
        if (write.size == core::ValueWrite::WholeValue)
          llvm::outs() << " whole value\n";
        else
          llvm::outs() << " bytes " << write.offset << ".." << write.offset + write.size - 1
                       << "\n";
      }
    for (const std::string &where : usage.pointerComparisons)
      llvm::outs() << "  compared: " << where << "\n";
  }
  for (const core::AccessSite &site : info.sites) {
    llvm::outs() << "site " << site.id << " " << site.signature.name << " "
                 << (site.table.empty() ? "?" : site.table) << " key=" << site.key.describe();
    if (site.key.constantKey)
      llvm::outs() << " constant=" << toHex(*site.key.constantKey);
    if (!site.outerTables.empty()) {
      llvm::outs() << " inner-of=" << llvm::join(site.outerTables, ",") << " candidates=[";
      llvm::outs() << llvm::join(site.innerCandidates, ",") << "]";
    }
    if (!site.mergedTables.empty())
      llvm::outs() << " merged=[" << llvm::join(site.mergedTables, ",") << "]";
    if (site.valueNeedsWritableMemory)
      llvm::outs() << " writable-needed=\"" << *site.valueNeedsWritableMemory << "\"";
    if (site.key.unwritten)
      llvm::outs() << " unwritten=\"" << site.key.unwritten->describe() << "\"";
    if (!site.key.constantKey && site.key.constantsOnly() && !site.key.constantUnproven.empty())
      llvm::outs() << " unproven=\"" << site.key.constantUnproven << "\"";
    llvm::outs() << "\n";
  }
}

// The snapshot of STATE.json's "maps"; the "probed_maps" among them hold
// answers to lookups of exactly their keys.
Expected<core::TableSnapshot> snapshotFrom(const nlohmann::json &state,
                                           const core::TableCatalog &catalog,
                                           const std::string &statePath) {
  nlohmann::json snapshotJson = {{"maps", state.value("maps", nlohmann::json::object())}};
  auto snapshot = bpf::parseSnapshot(snapshotJson, catalog, statePath);
  if (!snapshot)
    return snapshot.takeError();
  nlohmann::json probedMaps = state.value("probed_maps", nlohmann::json::array());
  for (const auto &name : probedMaps) {
    auto contents = snapshot->find(name.get<std::string>());
    if (contents == snapshot->end())
      return makeError("probed map '{0}' has no entries in \"maps\"", name.get<std::string>());
    contents->second.complete = false;
    for (const core::TableEntry &entry : contents->second.entries)
      contents->second.probedKeys.insert(entry.key);
  }
  return snapshot;
}

// What STATE.json says the traffic did: hot keys (also per CPU), hot
// tuples and write counts.
Error readTraffic(const nlohmann::json &state, const std::string &statePath,
                  core::SpecializationOptions &options) {
  nlohmann::json hotKeys = state.value("hot_keys", nlohmann::json::object());
  for (const auto &[site, keys] : hotKeys.items())
    for (const auto &key : keys) {
      auto bytes = bpf::parseJsonBytes(key, statePath + ": hot key of site " + site);
      if (!bytes)
        return bytes.takeError();
      options.hotKeys[std::stoul(site)].push_back(std::move(*bytes));
    }
  nlohmann::json hotTuples = state.value("hot_tuples", nlohmann::json::object());
  for (const auto &[site, tuples] : hotTuples.items())
    for (const auto &tuple : tuples) {
      auto bytes = bpf::parseJsonBytes(tuple, statePath + ": hot tuple of flow site " + site);
      if (!bytes)
        return bytes.takeError();
      options.hotTuples[std::stoul(site)].push_back(std::move(*bytes));
    }
  nlohmann::json perCpuHotKeys = state.value("hot_keys_per_cpu", nlohmann::json::object());
  for (const auto &[site, cpus] : perCpuHotKeys.items())
    for (const auto &[cpu, keys] : cpus.items()) {
      std::vector<core::Bytes> &chain =
          options.perCpuHotKeys[std::stoul(site)][unsigned(std::stoul(cpu))];
      for (const auto &key : keys) {
        auto bytes = bpf::parseJsonBytes(key, statePath + ": hot key of site " + site +
                                                  " on CPU " + cpu);
        if (!bytes)
          return bytes.takeError();
        chain.push_back(std::move(*bytes));
      }
    }
  nlohmann::json writeCounts = state.value("write_counts", nlohmann::json::object());
  for (const auto &[bucket, count] : writeCounts.items())
    options.writeCounts[std::stoul(bucket)] = count.get<uint64_t>();
  return Error::success();
}

// The specialization the command line and STATE.json ask for.
Expected<core::SpecializationOptions>
specializationOptions(const Arguments &args, const nlohmann::json &state,
                      const llvm::Module &module, const core::AccessSignatureTable &signatures) {
  core::SpecializationOptions options;
  options.inlineLimit = args.inlineLimit;
  if (!args.costModelPath.empty()) {
    auto text = llvm::MemoryBuffer::getFile(args.costModelPath);
    if (!text)
      return makeError("{0}: {1}", args.costModelPath, text.getError().message());
    auto model = core::CostModel::fromJson((*text)->getBuffer(), args.costModelPath);
    if (!model)
      return model.takeError();
    options.costModel = std::move(*model);
  }
  if (Error err = readTraffic(state, args.statePath, options))
    return std::move(err);
  nlohmann::json points = state.value("points", nlohmann::json::object());
  for (const auto &[label, value] : points.items())
    options.points[label] = value.get<int64_t>();
  nlohmann::json globals = state.value("globals", nlohmann::json::object());
  for (const auto &[name, bytes] : globals.items()) {
    auto parsed = bpf::parseJsonBytes(bytes, args.statePath + ": global " + name);
    if (!parsed)
      return parsed.takeError();
    options.globals[name] = std::move(*parsed);
  }
  if (args.profile)
    options.profile = core::ProfileOptions{bpf::ProfileSlotFunction, MORPHEUS_PROFILE_SITES,
                                           MORPHEUS_PROFILE_KEY_BYTES, args.notProfiled};
  if (args.writeGuards)
    options.writeGuards = core::WriteGuardOptions{bpf::WriteBumpFunction, bpf::WriteCountFunction,
                                                  bpf::WriteBucketBits, args.notProfiled};
  options.optimize = args.optimize;
  options.verifyEachPass = true;
  options.arithmetic = args.arithmetic;
  if (options.arithmetic)
    options.arithmetic->definedDivision = !args.divisionTraps;
  options.generators = args.generators;
  if (args.passes) {
    // The guard is not a table pass: --guard-version switches it on.
    options.tablePasses.emplace();
    std::stringstream names(*args.passes);
    for (std::string name; std::getline(names, name, ',');)
      if (!name.empty())
        options.tablePasses->push_back(name);
  }
  std::vector<std::string> entries;
  for (const llvm::Function &function : module)
    if (signatures.isProgramEntry(function))
      entries.push_back(function.getName().str());
  if (args.guardVersion) {
    options.guard.emplace();
    options.guard->holdsFunction = bpf::GuardHoldsFunction;
    options.guard->enterFunction = bpf::GuardEnterFunction;
    options.guard->version = *args.guardVersion;
    options.guard->versionArraySection = bpf::VersionArraySection;
    for (unsigned slot = 0; slot < entries.size(); ++slot)
      options.guard->entries.push_back(
          {entries[slot], args.fallback, slot, args.failureVerdict, "morpheus-opt --fallback",
           args.versionSlots ? std::optional<unsigned>(slot) : std::nullopt});
  }
  if (args.verifierPaths)
    for (const std::string &entry : entries)
      options.verifierPathBudget[entry] = *args.verifierPaths;
  return options;
}

// What the pipeline decided, as comments after the module.
void printDecisions(const core::SpecializationLog &log) {
  for (const core::GuardDecision &guard : log.guards)
    llvm::outs() << "; guard " << guard.function << ": " << core::fallbackName(guard.fallback)
                 << ": " << guard.detail << "\n";
  for (const core::GlobalDecision &global : log.globals)
    llvm::outs() << "; global " << global.global
                 << (global.applied ? " applied: " : " declined: ") << global.detail << "\n";
  for (const core::GlobalCheck &check : log.globalChecks)
    llvm::outs() << "; check " << check.global << " at " << check.offset << ": "
                 << toHex(check.bytes) << "\n";
  for (const core::SiteDecision &decision : log.decisions)
    llvm::outs() << "; site " << decision.site << " " << decision.table << " "
                 << decision.pass << (decision.applied ? " applied: " : " declined: ")
                 << decision.detail << "\n";
  for (const core::PointDecision &point : log.points)
    llvm::outs() << "; point " << point.label << " in " << point.function
                 << (point.applied ? " applied: " : " declined: ") << point.detail << "\n";
}

} // namespace

int main(int argc, char **argv) {
  auto args = parseArguments(argc, argv);
  if (!args)
    return fail(llvm::toString(args.takeError()));
  if (args->stats)
    llvm::EnableStatistics(/*DoPrintOnExit=*/false); // printed below, after the module

  llvm::LLVMContext context;
  llvm::SMDiagnostic diagnostic;
  std::unique_ptr<llvm::Module> module = llvm::parseIRFile(args->input, diagnostic, context);
  if (!module) {
    diagnostic.print("morpheus-opt", llvm::errs());
    return 1;
  }
  std::unique_ptr<core::AccessSignatureTable> backendSignatures;
  if (args->backend == "bpf")
    backendSignatures = std::make_unique<bpf::BpfSignatures>();
  else if (args->backend == "user")
    backendSignatures = std::make_unique<user::UserSignatures>();
  else
    return fail("unknown backend '" + args->backend + "' (bpf or user)");
  const core::AccessSignatureTable &signatures = *backendSignatures;
  core::annotateAccessCalls(*module, signatures);

  if (args->replayCalls) {
    core::ReplayCallsOptions options{bpf::replayerOfCall};
    unsigned replaced = 0;
    llvm::ModuleAnalysisManager unused;
    core::ReplayCallsPass(options, &replaced).run(*module, unused);
    module->print(llvm::outs(), nullptr);
    llvm::outs() << "; replayed " << replaced << " calls\n";
    return 0;
  }
  if (args->printContextReads) {
    printContextReads(*module, signatures);
    return 0;
  }

  nlohmann::json state = nlohmann::json::object();
  if (!args->statePath.empty()) {
    std::ifstream in(args->statePath);
    state = nlohmann::json::parse(in, nullptr, false);
    if (state.is_discarded())
      return fail(args->statePath + ": not valid JSON");
  }
  auto catalog = catalogFrom(state.value("tables", nlohmann::json::object()));
  if (!catalog)
    return fail(llvm::toString(catalog.takeError()));
  if (!args->prefetchPrimitive.empty()) {
    if (Error err = printPrefetchStages(*module, signatures, *catalog, args->prefetchPrimitive))
      return fail(llvm::toString(std::move(err)));
    return 0;
  }
  if (args->printAnalysis) {
    printAnalysis(*module, signatures, *catalog);
    return 0;
  }

  auto snapshot = snapshotFrom(state, *catalog, args->statePath);
  if (!snapshot)
    return fail(llvm::toString(snapshot.takeError()));
  auto options = specializationOptions(*args, state, *module, signatures);
  if (!options)
    return fail(llvm::toString(options.takeError()));
  // Optimized with BPF's target passes, as the eBPF backend optimizes.
  std::unique_ptr<llvm::TargetMachine> machine;
  if (args->backend == "bpf" &&
      options->optimize != core::SpecializationOptions::Optimization::None) {
    auto created = bpf::createTargetMachine(*module);
    if (!created)
      return fail(llvm::toString(created.takeError()));
    machine = std::move(*created);
    options->targetMachine = machine.get();
  }
  auto log = core::specializeModule(*module, signatures, *catalog, *snapshot, *options);
  if (log) {
    module->print(llvm::outs(), nullptr);
    printDecisions(*log);
  }
  if (args->stats) {
    // Also when a pass failed: what the passes before it did.
    llvm::outs().flush();
    llvm::PrintStatistics(llvm::errs());
  }
  if (!log)
    return fail(llvm::toString(log.takeError()));
  return 0;
}
