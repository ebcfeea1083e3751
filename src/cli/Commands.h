// The `morpheus` subcommands. Each returns the process exit code: 0 success,
// 1 failure (the error was printed), 2 bad usage.
#pragma once

#include "backend/bpf/Frontend.h"
#include "cli/Args.h"

#include <vector>

namespace morpheus::cli {

int analyzeCommand(int argc, char **argv);
int specializeCommand(int argc, char **argv);
int runCommand(int argc, char **argv);
int mapCommand(int argc, char **argv);
int fuzzCommand(int argc, char **argv);

// -I/-D/--cflags, understood by every command that compiles a program.
std::vector<OptionSpec> compilerOptions();
bpf::FrontendOptions frontendOptions(const Args &args);

} // namespace morpheus::cli
