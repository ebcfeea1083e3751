// `morpheus nf NAME COMMAND ...`: one dispatcher for every network
// function's commands, so they all list themselves, take --help and report
// an unknown command the same way.
#pragma once

#include <llvm/ADT/ArrayRef.h>

namespace morpheus::nf {

struct Subcommand {
  const char *name;
  const char *summary; // one line for the listing
  // argv[0] is the function's name and argv[1] the command's, as
  // morpheus_nf_NAME_main receives them.
  int (*run)(int argc, char **argv);
};

// Runs the command argv[1] names. Lists the commands under `summary` on
// stdout for --help (returns 0), on stderr when the command is missing or
// unknown (returns 2).
int dispatch(const char *nf, const char *summary, int argc, char **argv,
             llvm::ArrayRef<Subcommand> commands);

} // namespace morpheus::nf
