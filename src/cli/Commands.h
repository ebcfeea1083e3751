// The `morpheus` commands, declared on CLI11 (support/CommandLine.h): each
// add*Command adds one subcommand, its typed options and the body that runs
// it. Bodies return the exit status: 0 success, 1 failure (the error was
// printed), 2 bad usage.
#pragma once

#include "backend/bpf/Frontend.h"
#include "support/CommandLine.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace morpheus::cli {

using commandline::fail;

// Every command of the `morpheus` program except bench and nf (which their
// own libraries add).
void addCommands(CLI::App &morpheus);

void addAnalyzeCommand(CLI::App &morpheus);
void addExplainCommand(CLI::App &morpheus);
void addSpecializeCommand(CLI::App &morpheus);
void addRunCommand(CLI::App &morpheus);
void addDaemonCommand(CLI::App &morpheus);
void addStatusCommand(CLI::App &morpheus);
void addMapCommand(CLI::App &morpheus);
void addFuzzCommand(CLI::App &morpheus);
void addUserRunCommand(CLI::App &morpheus);

// PROG, the required program argument of the commands that compile one.
void addProgramArgument(CLI::App &command, std::string &path);

// --inline-limit N, the table size up to which whole tables are inlined.
void addInlineLimit(CLI::App &command, uint32_t &limit);

// --cost-model FILE, the calibration that prices table representations
// (costModelFor: this machine's cached one when not given).
void addCostModel(CLI::App &command, std::string &path);

// --keep-generic MAP (repeatable): maps another loader writes, never
// specialized (bpf::KeptGeneric).
void addKeepGeneric(CLI::App &command, std::vector<std::string> &maps);

// -I/-D/--cflags, understood by every command that compiles a program, and
// --prog-type, the type of programs in sections libbpf cannot place.
struct CompilerFlags {
  std::vector<std::string> includes, defines, cflags;
  std::optional<bpf::ProgramType> programType;
  std::optional<std::string> compileDatabase;
  std::map<std::string, uint32_t> maxEntries; // --max-entries MAP=N
  bool noBuildCache = false;
};
void addCompilerOptions(CLI::App &command, CompilerFlags &flags);
bpf::FrontendOptions frontendOptions(const CompilerFlags &flags);

} // namespace morpheus::cli
