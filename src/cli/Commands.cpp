// What the subcommands share: compiler flags.
#include "cli/Commands.h"

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
      ->transform(commandline::oneOf(std::map<std::string, bpf::ProgramType>{
          {"xdp", bpf::ProgramType::Xdp}, {"tc", bpf::ProgramType::Tc}}))
      ->type_name("xdp|tc");
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
  if (flags.noBuildCache)
    options.buildCache.reset();
  return options;
}

} // namespace morpheus::cli
