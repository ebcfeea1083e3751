// `morpheus analyze` and `morpheus specialize`: the pipeline without a
// kernel, for inspection, for tests and for operators deciding what to trust
// (`morpheus explain`, ExplainCommand.cpp, says why it decided so).
#include "backend/bpf/MapIO.h"
#include "backend/bpf/ProgramSpec.h"
#include "backend/bpf/Snapshot.h"
#include "cli/Commands.h"
#include "cli/Reports.h"
#include "support/Files.h"

#include <cstdio>
#include <memory>
#include <optional>

namespace morpheus::cli {

namespace {

struct AnalyzeOptions {
  std::string program;
  bool json = false;
  bool explain = false; // the flag explain replaced: said so, not run
  std::vector<std::string> keepGeneric;
  CompilerFlags compiler;
};

int analyze(const AnalyzeOptions &options) {
  bpf::KeptGeneric kept;
  kept.maps.insert(options.keepGeneric.begin(), options.keepGeneric.end());
  auto spec = bpf::ProgramSpec::load(options.program, frontendOptions(options.compiler), kept);
  if (!spec)
    return fail(spec.takeError());
  if (options.json)
    std::printf("%s\n", analysisToJson(**spec).dump(2).c_str());
  else
    std::fputs(analysisToText(**spec).c_str(), stdout);
  return 0;
}

struct SpecializeOptions {
  std::string program, snapshot, output, report;
  uint32_t inlineLimit = bpf::SpecializeRequest().inlineLimit;
  std::optional<uint64_t> guardVersion;
  CompilerFlags compiler;
};

int specialize(const SpecializeOptions &options) {
  bpf::SpecializeRequest request;
  request.inlineLimit = options.inlineLimit;
  request.guardVersion = options.guardVersion;
  auto spec = bpf::ProgramSpec::load(options.program, frontendOptions(options.compiler));
  if (!spec)
    return fail(spec.takeError());

  // Read as a cycle of `run` reads the live maps (the same read plan, the
  // same readTable), with the globals and the programs' facts the
  // snapshot carries: the decisions are run's for the same contents.
  auto layout = (*spec)->snapshotLayout();
  if (!layout)
    return fail(layout.takeError());
  auto snapshot =
      bpf::readSnapshotFile(options.snapshot, *layout, (*spec)->readPlan(options.inlineLimit));
  if (!snapshot)
    return fail(snapshot.takeError());
  request.globals = snapshot->globals;
  request.programs = snapshot->programs;

  auto object = (*spec)->specialize(snapshot->tables, request);
  if (!object)
    return fail(object.takeError());
  const std::string &output = options.output;
  if (Error err = writeFile(output, llvm::StringRef(object->elf.data(), object->elf.size())))
    return fail(std::move(err));
  if (!options.report.empty()) {
    std::string report = logToJson(object->log).dump(2) + "\n";
    if (Error err = writeFile(options.report, report))
      return fail(std::move(err));
  }
  std::printf("%s: wrote %s (%zu bytes)\n%s", (*spec)->path().c_str(), output.c_str(),
              object->elf.size(), object->log.toText().c_str());
  return 0;
}

} // namespace

void addAnalyzeCommand(CLI::App &morpheus) {
  auto options = std::make_shared<AnalyzeOptions>();
  CLI::App &command = commandline::addCommand(
      morpheus, "analyze",
      "list maps (read-only or written by the program) and map access sites; no kernel "
      "needed",
      "Lists every map (type, sizes, and whether the program itself\n"
      "writes it: ro/rw, with the reasons) and every map access site\n"
      "(map, kind, where the key comes from). Loads nothing. What a cycle\n"
      "specializes for given tables, and why: 'morpheus explain'.",
      [options](const CLI::App &command) {
        if (options->explain)
          return commandline::usageError(
              command, "--explain is now a command that reports what a cycle decides for "
                       "given tables: 'morpheus explain PROG --snapshot STATE.json' (or "
                       "--pin-dir DIR)");
        return analyze(*options);
      });
  addProgramArgument(command, options->program);
  command.add_flag("--json", options->json, "print JSON instead of text");
  command.add_flag("--explain", options->explain)->group("");
  addKeepGeneric(command, options->keepGeneric);
  addCompilerOptions(command, options->compiler);
}

void addSpecializeCommand(CLI::App &morpheus) {
  auto options = std::make_shared<SpecializeOptions>();
  CLI::App &command = commandline::addCommand(
      morpheus, "specialize",
      "specialize once against a JSON map snapshot and write the BPF object; no kernel "
      "needed",
      "Runs the specialization pipeline once against the map contents in\n"
      "STATE.json and writes the resulting BPF object. Maps listed in the\n"
      "snapshot are taken as complete; maps not listed are not specialized.\n"
      "Without --guard-version the object has no guard: it is correct only\n"
      "while the maps hold exactly the snapshot.",
      [options](const CLI::App &) { return specialize(*options); });
  addProgramArgument(command, options->program);
  command
      .add_option("--snapshot", options->snapshot,
                  "map contents to specialize for (JSON, see docs/cli.md)")
      ->required()
      ->type_name("STATE.json");
  command.add_option("-o", options->output, "where to write the specialized BPF object")
      ->required()
      ->type_name("OUT.o");
  command.add_option("--report", options->report, "also write the per-site decisions as JSON")
      ->type_name("FILE");
  addInlineLimit(command, options->inlineLimit);
  command
      .add_option("--guard-version", options->guardVersion,
                  "compile in the program guard for version N (default: no guard)")
      ->type_name("N");
  addCompilerOptions(command, options->compiler);
}

} // namespace morpheus::cli
