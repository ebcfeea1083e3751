// `morpheus nf NAME COMMAND ...`: the one shape of a network function's
// commands, on the command line of every Morpheus command (CLI11,
// support/CommandLine.h), so they all list themselves, take --help and
// --pin-dir, and report usage mistakes and failures the same way. A
// function NAME provides (nf/CMakeLists.txt generates the registry):
//   extern const char morpheus_nf_NAME_summary[];            // one line for `morpheus nf --help`
//   void morpheus_nf_NAME_commands(morpheus::nf::Commands &); // declares its commands
#pragma once

#include "support/CommandLine.h"
#include "support/Error.h"

#include <functional>
#include <string>
#include <vector>

namespace morpheus::nf {

// The commands of one function, as they are declared.
class Commands {
public:
  Commands(CLI::App &function, const std::string &name);

  // Where `morpheus run nf/NAME/NAME.bpf.c` pins the maps, the default of
  // every command's --pin-dir.
  const std::string &defaultPinDir() const { return pinDir; }

  // Adds COMMAND, listed with `summary`; its --help shows `description`.
  // Once its command line parsed, `run` gets the pin directory (--pin-dir
  // or the default); an error it returns is printed and exits with 1.
  // Arguments and options of its own are added to the returned command.
  using Run = std::function<Error(const std::string &pinDir)>;
  CLI::App &add(const std::string &command, const std::string &summary,
                const std::string &description, Run run);

private:
  CLI::App &function;
  std::string pinDir;
};

struct Function {
  const char *name;
  const char *summary;
  void (*commands)(Commands &);
};

// Adds `NAME` and its commands to the `morpheus nf` group.
void addFunction(CLI::App &nf, const Function &function);

// `morpheus nf NAME WORDS...` in process for one function (words[0] is
// NAME), as the tests run it: the exit status.
int runFunction(const Function &function, const std::vector<std::string> &words);

// FILE, the required file argument of the commands that load one.
void addFileArgument(CLI::App &command, std::string &path, const std::string &help);

} // namespace morpheus::nf
