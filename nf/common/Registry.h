// `morpheus nf`: every network function's commands, collected at configure
// time from the nf/<name>/ folders (nf/CMakeLists.txt generates the table;
// nf/common/Subcommands.h says what a function provides).
#pragma once

#include "nf/common/Subcommands.h"

#include <cstddef>
#include <string>
#include <vector>

namespace morpheus::nf {

extern const Function Registry[];
extern const size_t RegistrySize;

// Adds `morpheus nf` with every function to the morpheus command line.
void addNfCommand(CLI::App &morpheus);

// `morpheus nf WORDS...` in process (bench runs the functions' setup
// commands so): the exit status.
int runNfCommand(const std::vector<std::string> &words);

} // namespace morpheus::nf
