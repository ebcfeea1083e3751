// What the subcommands share: compiler flags and the error convention.
#include "cli/Commands.h"

#include <cstdio>
#include <sstream>

namespace morpheus::cli {

std::vector<OptionSpec> compilerOptions() {
  return {{"-I", "DIR", "add an include directory for C input", true},
          {"-D", "NAME[=VALUE]", "define a macro for C input", true},
          {"--cflags", "\"FLAGS\"", "more clang flags for C input (space separated)", true}};
}

bpf::FrontendOptions frontendOptions(const Args &args) {
  bpf::FrontendOptions options;
  for (const std::string &dir : args.all("-I"))
    options.cflags.push_back("-I" + dir);
  for (const std::string &define : args.all("-D"))
    options.cflags.push_back("-D" + define);
  for (const std::string &flags : args.all("--cflags")) {
    std::istringstream words(flags);
    for (std::string word; words >> word;)
      options.cflags.push_back(word);
  }
  return options;
}

} // namespace morpheus::cli
