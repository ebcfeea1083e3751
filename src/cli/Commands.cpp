// What the subcommands share: compiler flags.
#include "cli/Commands.h"

#include <llvm/ADT/StringRef.h>

#include <map>
#include <sstream>

namespace morpheus::cli {

void addCommands(CLI::App &morpheus) {
  addAnalyzeCommand(morpheus);
  addExplainCommand(morpheus);
  addSpecializeCommand(morpheus);
  addRunCommand(morpheus);
  addDaemonCommand(morpheus);
  addStatusCommand(morpheus);
  addMapCommand(morpheus);
  addFuzzCommand(morpheus);
  addUserRunCommand(morpheus);
}

void addProgramArgument(CLI::App &command, std::string &path) {
  command.add_option("PROG", path, "BPF C, LLVM IR (.ll) or bitcode (.bc)")
      ->required()
      ->type_name("");
}

void addInlineLimit(CLI::App &command, uint32_t &limit) {
  command.add_option("--inline-limit", limit, "inline tables with at most N entries (default 64)")
      ->type_name("N");
}

void addCostModel(CLI::App &command, std::string &path) {
  command
      .add_option("--cost-model", path,
                  "price table representations with this calibration (default: this machine's, "
                  "cached by `morpheus bench calibrate`; default costs when there is none)")
      ->type_name("FILE");
}

void addKeepGeneric(CLI::App &command, std::vector<std::string> &maps) {
  command
      .add_option("--keep-generic", maps,
                  "never specialize MAP, which another loader writes behind the guard: its "
                  "updates hold from the next packet on instead of the next cycle (repeat for "
                  "more)")
      ->type_name("MAP");
}

void addCompilerOptions(CLI::App &command, CompilerFlags &flags) {
  command.add_option("-I", flags.includes, "add an include directory for C input")
      ->type_name("DIR");
  command.add_option("-D", flags.defines, "define a macro for C input")
      ->type_name("NAME[=VALUE]");
  command.add_option("--cflags", flags.cflags, "more clang flags for C input (space separated)")
      ->type_name("\"FLAGS\"");
  command
      .add_option_function<std::string>(
          "--compile-db",
          [&flags](const std::string &path) { flags.compileDatabase = path; },
          "take C input's flags (-I, -D, -std, -mcpu) from the project's compile database "
          "(compile_commands.json)")
      ->type_name("FILE");
  command
      .add_option_function<bpf::ProgramType>(
          "--prog-type", [&flags](const bpf::ProgramType &type) { flags.programType = type; },
          "type of the programs whose section libbpf cannot place (SEC(\"xdp_prog\"), from "
          "before libbpf 1.0), as bpftool's 'type'")
      ->transform(commandline::oneOf(bpf::namedProgramTypes()))
      ->type_name("xdp|tc");
  command
      .add_option_function<std::vector<std::string>>(
          "--max-entries",
          [&flags](const std::vector<std::string> &sizes) {
            for (const std::string &size : sizes) {
              auto [map, count] = llvm::StringRef(size).split('=');
              uint32_t entries = 0;
              if (map.empty() || count.getAsInteger(10, entries))
                throw CLI::ValidationError("--max-entries", "expected MAP=N, got '" + size + "'");
              flags.maxEntries[map.str()] = entries;
            }
          },
          "size map MAP for N entries, as the program's own loader does before load "
          "(bpf_map__set_max_entries); repeatable")
      ->type_name("MAP=N");
  command.add_flag("--no-build-cache", flags.noBuildCache,
                   "build C input's bitcode and the original's object even when the cache "
                   "holds them (kept under $MORPHEUS_CACHE_DIR, $XDG_CACHE_HOME/morpheus or "
                   "~/.cache/morpheus, named by what decides them)");
}

bpf::FrontendOptions frontendOptions(const CompilerFlags &flags) {
  bpf::FrontendOptions options;
  for (const std::string &dir : flags.includes)
    options.cflags.push_back("-I" + dir);
  for (const std::string &define : flags.defines)
    options.cflags.push_back("-D" + define);
  for (const std::string &more : flags.cflags) {
    std::istringstream words(more);
    for (std::string word; words >> word;)
      options.cflags.push_back(word);
  }
  options.programType = flags.programType;
  options.compileDatabase = flags.compileDatabase;
  options.maxEntries = flags.maxEntries;
  if (flags.noBuildCache)
    options.buildCache.reset();
  return options;
}

} // namespace morpheus::cli
