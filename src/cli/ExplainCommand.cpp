// `morpheus explain`: what a cycle decides for a program and its tables,
// per map and per site, and why. It builds a version as `run`'s cycles do
// (runtime::cycleRequest, the same cost model, the program guard) from the
// tables as a snapshot holds them or as the maps pinned by a running
// program hold them, and reports the version's specialization log, not a
// prediction. Kernel-free with a snapshot; nothing is loaded either way.
#include "backend/bpf/EmittedCode.h"
#include "backend/bpf/Frontend.h"
#include "backend/bpf/MapIO.h"
#include "backend/bpf/PinDirectory.h"
#include "backend/bpf/ProgramSpec.h"
#include "backend/bpf/Snapshot.h"
#include "cli/Commands.h"
#include "cli/Reports.h"
#include "cli/RunOptions.h"
#include "runtime/Optimizer.h"
#include "support/FileDescriptor.h"

#include <llvm/ADT/StringExtras.h>

#include <cstdio>
#include <memory>
#include <set>

namespace morpheus::cli {

namespace {

struct ExplainOptions {
  std::string program, snapshot, pinDir, costModel;
  bool json = false;
  uint32_t inlineLimit = runtime::OptimizerOptions().inlineLimit;
  std::vector<std::string> keepGeneric;
  CompilerFlags compiler;
};

// The tables (and globals) as the maps pinned in `directory` hold them,
// read as a cycle reads them (the read plan, then the globals' sections).
// A map of the program not pinned there is not read: its sites say so.
Expected<BuiltVersion> readPinned(const bpf::ProgramSpec &spec, const std::string &directory,
                                  uint32_t inlineLimit, core::TableSnapshot &snapshot,
                                  core::GlobalValues &globals,
                                  std::map<std::string, bpf::ProgramFacts> &programs) {
  bpf::PinDirectory pins(directory);
  std::map<std::string, FileDescriptor> open;
  std::map<std::string, int> fds;
  std::vector<std::string> missing;
  auto openPinned = [&](const std::string &name) -> Error {
    if (fds.count(name))
      return Error::success();
    auto fd = pins.openMap(name);
    if (!fd)
      return fd.takeError();
    if (!*fd) {
      missing.push_back(name);
      return Error::success();
    }
    fds[name] = **fd;
    open.emplace(name, FileDescriptor(**fd));
    return Error::success();
  };
  for (const auto &[name, table] : spec.catalog())
    if (Error err = openPinned(name))
      return std::move(err);
  if (fds.empty())
    return makeError("{0}: no map of {1} is pinned there", directory, spec.path());
  // The globals' section maps and the fallback array, which a run pins
  // beside the tables (an older run, or a loader, may not have).
  std::set<std::string> sections;
  for (const core::GlobalSlice &slice : spec.globals())
    sections.insert(slice.sectionTable);
  for (const std::string &section : sections)
    if (auto fd = pins.openMap(section); !fd)
      return fd.takeError();
    else if (*fd) {
      fds[section] = **fd;
      open.emplace(section, FileDescriptor(**fd));
    }
  if (auto fallback = pins.openMap(bpf::FallbackMapName); !fallback) {
    return fallback.takeError();
  } else if (*fallback) {
    FileDescriptor held(**fallback);
    auto facts = bpf::readFallbackFacts(held.get());
    if (!facts)
      return facts.takeError();
    for (auto &[name, fact] : *facts)
      if (auto program = bpf::programNamed(name, spec.programs()))
        programs[*program] = fact;
      else
        llvm::consumeError(program.takeError()); // another object's program
  }
  core::ReadPlan plan = spec.readPlan(inlineLimit);
  for (auto request = plan.begin(); request != plan.end();)
    request = fds.count(request->first) ? std::next(request) : plan.erase(request);
  auto read = bpf::readSnapshot(plan, spec.catalog(), fds);
  if (!read)
    return read.takeError();
  snapshot = std::move(*read);
  BuiltVersion built;
  built.source = "the maps pinned in " + directory;
  bool sectionsPinned = std::all_of(
      spec.globals().begin(), spec.globals().end(),
      [&](const core::GlobalSlice &slice) { return fds.count(slice.sectionTable) > 0; });
  if (sectionsPinned) {
    auto live = bpf::readGlobals(spec.globals(), fds);
    if (!live)
      return live.takeError();
    globals = std::move(*live);
  } else {
    built.source += " (globals not read: their sections are not pinned)";
  }
  if (!missing.empty())
    built.source += "; not pinned there, not read: " + llvm::join(missing, ", ");
  return built;
}

int explain(const ExplainOptions &options) {
  bpf::KeptGeneric kept;
  kept.maps.insert(options.keepGeneric.begin(), options.keepGeneric.end());
  auto spec = bpf::ProgramSpec::load(options.program, frontendOptions(options.compiler), kept);
  if (!spec)
    return fail(spec.takeError());
  std::string costModelSaid;
  auto costModel = costModelFor(options.costModel, costModelSaid);
  if (!costModel)
    return fail(costModel.takeError());

  core::TableSnapshot snapshot;
  core::GlobalValues globals;
  std::map<std::string, bpf::ProgramFacts> programs;
  BuiltVersion built;
  if (!options.snapshot.empty()) {
    auto layout = (*spec)->snapshotLayout();
    if (!layout)
      return fail(layout.takeError());
    auto read = bpf::readSnapshotFile(options.snapshot, *layout,
                                      (*spec)->readPlan(options.inlineLimit));
    if (!read)
      return fail(read.takeError());
    snapshot = std::move(read->tables);
    globals = std::move(read->globals);
    programs = std::move(read->programs);
    built.source = "the snapshot " + options.snapshot;
  } else {
    auto read = readPinned(**spec, options.pinDir, options.inlineLimit, snapshot, globals,
                           programs);
    if (!read)
      return fail(read.takeError());
    built = std::move(*read);
  }

  // The first cycle's request (before any traffic is followed); the guard
  // version's value decides nothing.
  runtime::OptimizerOptions optimizer;
  optimizer.inlineLimit = options.inlineLimit;
  optimizer.costModel = *costModel;
  bpf::SpecializeRequest request = runtime::cycleRequest(optimizer, /*version=*/1);
  request.globals = globals;
  request.programs = programs;
  request.compared = false;
  built.costModel = std::move(costModelSaid);
  auto version = (*spec)->specialize(snapshot, request);
  if (!version)
    return fail(version.takeError());
  built.log = std::move(version->log);

  // What the tables changed in the emitted code: the same build without
  // the guard (whose check and generic copies differ from the original
  // anyway), function by function against the original's.
  request.guardVersion.reset();
  auto unguarded = (*spec)->specialize(snapshot, request);
  if (!unguarded)
    return fail(unguarded.takeError());
  auto unchanged = bpf::unchangedFunctions(unguarded->elf, (*spec)->originalElf());
  if (!unchanged)
    return fail(unchanged.takeError());
  built.unchangedFunctions = std::move(*unchanged);

  Explanation explanation = explainProgram(**spec, options.inlineLimit, built);
  if (options.json)
    std::printf("%s\n", explanationToJson(explanation).dump(2).c_str());
  else
    std::fputs(explanationToText(explanation).c_str(), stdout);
  return 0;
}

} // namespace

void addExplainCommand(CLI::App &morpheus) {
  auto options = std::make_shared<ExplainOptions>();
  CLI::App &command = commandline::addCommand(
      morpheus, "explain",
      "per map and site, what a cycle specializes for these tables, or why not; no kernel "
      "needed with --snapshot",
      "Builds a version as 'morpheus run' does in its first cycle (the same\n"
      "passes, cost model and guard) for the tables in STATE.json or in the\n"
      "maps pinned in DIR, and prints per map and per site what was decided\n"
      "and why: the pass that specialized it, the reason a pass declined it,\n"
      "or why no pass may take it and what would change that. A site is\n"
      "called specialized only when its function's emitted code differs\n"
      "from the original's. Loads nothing.",
      [options](const CLI::App &command) {
        if (options->snapshot.empty() && options->pinDir.empty())
          return commandline::usageError(
              command, "the tables are needed: --snapshot STATE.json or --pin-dir DIR");
        return explain(*options);
      });
  addProgramArgument(command, options->program);
  auto *snapshot = command
                       .add_option("--snapshot", options->snapshot,
                                   "the tables' contents (JSON, as 'specialize' reads them)")
                       ->type_name("STATE.json");
  auto *pinDir =
      command
          .add_option("--pin-dir", options->pinDir,
                      "read the tables from the maps pinned here, by name: a running "
                      "'morpheus run' pins them in /sys/fs/bpf/morpheus/<program>, a loader "
                      "pinning by name in /sys/fs/bpf")
          ->type_name("DIR");
  snapshot->excludes(pinDir);
  pinDir->excludes(snapshot);
  command.add_flag("--json", options->json, "print JSON instead of text");
  addInlineLimit(command, options->inlineLimit);
  addCostModel(command, options->costModel);
  addKeepGeneric(command, options->keepGeneric);
  addCompilerOptions(command, options->compiler);
}

} // namespace morpheus::cli
