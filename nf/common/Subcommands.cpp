#include "nf/common/Subcommands.h"

#include <memory>

namespace morpheus::nf {

Commands::Commands(CLI::App &function, const std::string &name)
    : function(function), pinDir("/sys/fs/bpf/morpheus/" + name) {}

CLI::App &Commands::add(const std::string &command, const std::string &summary,
                        const std::string &description, Run run) {
  auto chosenPinDir = std::make_shared<std::string>(pinDir);
  CLI::App &added = commandline::addCommand(
      function, command, summary, description, [chosenPinDir, run](const CLI::App &) {
        if (Error err = run(*chosenPinDir))
          return commandline::fail(std::move(err));
        return 0;
      });
  added.add_option("--pin-dir", *chosenPinDir, "where the maps are pinned (default " + pinDir + ")")
      ->type_name("DIR");
  return added;
}

void addFunction(CLI::App &nf, const Function &function) {
  CLI::App &group = commandline::addGroup(
      nf, function.name, function.summary,
      std::string(function.summary) + ".\n'morpheus nf " + function.name +
          " COMMAND --help' describes one.");
  Commands commands(group, function.name);
  function.commands(commands);
}

int runFunction(const Function &function, const std::vector<std::string> &words) {
  auto app = commandline::makeApp("morpheus", "");
  CLI::App &nf = commandline::addGroup(*app, "nf", "configure a network function");
  addFunction(nf, function);
  std::vector<std::string> argv = {"morpheus", "nf"};
  argv.insert(argv.end(), words.begin(), words.end());
  return commandline::run(*app, argv);
}

void addFileArgument(CLI::App &command, std::string &path, const std::string &help) {
  command.add_option("FILE", path, help)->required()->type_name("");
}

} // namespace morpheus::nf
