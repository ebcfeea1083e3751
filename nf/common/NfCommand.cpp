#include "nf/common/Registry.h"

#include "support/CommandLine.h"

#include <cstdio>
#include <cstring>

namespace morpheus::nf {

int nfCommand(int argc, char **argv) {
  const char *name = argc > 2 ? argv[2] : nullptr;
  bool help = !name || !std::strcmp(name, "--help") || !std::strcmp(name, "-h");
  for (size_t i = 0; !help && i < RegistrySize; ++i)
    if (!std::strcmp(Registry[i].name, name))
      return Registry[i].main(argc - 2, argv + 2);
  FILE *out = help && name ? stdout : stderr;
  if (!help)
    std::fprintf(stderr, "morpheus: unknown network function '%s'\n\n", name);
  std::fprintf(out, "usage: morpheus nf NAME COMMAND [options]\n\n"
                    "Configures a network function running under 'morpheus run' through\n"
                    "its pinned maps (see nf/NAME/README.md). Functions:\n");
  for (size_t i = 0; i < RegistrySize; ++i)
    std::fprintf(out, "  %-12s %s\n", Registry[i].name, Registry[i].summary);
  std::fprintf(out, "\n'morpheus nf NAME --help' lists a function's commands.\n");
  return help && name ? 0 : 2;
}

void addNfCommand(CLI::App &morpheus) {
  CLI::App &nf = commandline::addCommand(
      morpheus, "nf",
      "configure a network function from nf/ (routes, rules, VIPs, ...) through its pinned "
      "maps",
      "", [](const CLI::App &command) {
        std::vector<std::string> words = {"morpheus", "nf"};
        for (const std::string &word : command.remaining())
          words.push_back(word);
        std::vector<char *> argv;
        for (std::string &word : words)
          argv.push_back(word.data());
        argv.push_back(nullptr);
        return nfCommand(int(words.size()), argv.data());
      });
  // The function's own command line reads the rest, --help included.
  nf.prefix_command();
  nf.set_help_flag();
  nf.allow_extras();
}

} // namespace morpheus::nf
