#include "nf/common/Registry.h"

namespace morpheus::nf {

void addNfCommand(CLI::App &morpheus) {
  CLI::App &nf = commandline::addGroup(
      morpheus, "nf",
      "configure a network function from nf/ (routes, rules, VIPs, ...) through its pinned "
      "maps",
      "Configures a network function running under 'morpheus run' through\n"
      "its pinned maps (see nf/NAME/README.md). 'morpheus nf NAME --help'\n"
      "lists a function's commands.");
  for (size_t i = 0; i < RegistrySize; ++i)
    addFunction(nf, Registry[i]);
}

int runNfCommand(const std::vector<std::string> &words) {
  auto app = commandline::makeApp("morpheus", "");
  addNfCommand(*app);
  std::vector<std::string> argv = {"morpheus", "nf"};
  argv.insert(argv.end(), words.begin(), words.end());
  return commandline::run(*app, argv);
}

} // namespace morpheus::nf
