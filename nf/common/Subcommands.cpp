#include "nf/common/Subcommands.h"

#include "cli/Args.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

namespace morpheus::nf {

namespace {

int list(FILE *out, const char *nf, const char *summary, llvm::ArrayRef<Subcommand> commands) {
  // At least as wide as `morpheus nf`'s own list of functions.
  int width = 12;
  for (const Subcommand &command : commands)
    width = std::max(width, int(std::strlen(command.name)));
  std::fprintf(out, "usage: morpheus nf %s COMMAND [options]\n\n%s.\nCommands:\n", nf, summary);
  for (const Subcommand &command : commands)
    std::fprintf(out, "  %-*s %s\n", width, command.name, command.summary);
  std::fprintf(out, "\n'morpheus nf %s COMMAND --help' describes one.\n", nf);
  return out == stdout ? 0 : 2;
}

} // namespace

int dispatch(const char *nf, const char *summary, int argc, char **argv,
             llvm::ArrayRef<Subcommand> commands) {
  if (argc < 2)
    return list(stderr, nf, summary, commands);
  const char *name = argv[1];
  if (!std::strcmp(name, "--help") || !std::strcmp(name, "-h"))
    return list(stdout, nf, summary, commands);
  for (const Subcommand &command : commands)
    if (!std::strcmp(name, command.name))
      return command.run(argc, argv);
  cli::usageError(std::string("nf ") + nf + ": unknown command '" + name + "'");
  std::fputc('\n', stderr);
  return list(stderr, nf, summary, commands);
}

} // namespace morpheus::nf
