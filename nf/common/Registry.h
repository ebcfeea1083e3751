// `morpheus nf NAME ...`: every network function's control-plane commands,
// collected at configure time from the nf/<name>/ folders (nf/CMakeLists.txt
// generates the table). A function NAME provides
//   int morpheus_nf_NAME_main(int argc, char **argv);  // argv[0] == "NAME"
//   extern const char morpheus_nf_NAME_summary[];      // one line for --help
#pragma once

#include <cstddef>

namespace CLI {
class App;
} // namespace CLI

namespace morpheus::nf {

struct NfEntry {
  const char *name;
  const char *summary;
  int (*main)(int argc, char **argv);
};

extern const NfEntry Registry[];
extern const size_t RegistrySize;

// Dispatches `morpheus nf ...` (argv[0] == "morpheus", argv[1] == "nf").
int nfCommand(int argc, char **argv);

// Adds `morpheus nf` to the morpheus command line.
void addNfCommand(CLI::App &morpheus);

} // namespace morpheus::nf
