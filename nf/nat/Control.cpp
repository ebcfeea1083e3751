// `morpheus nf nat ...`: the operator's commands for the NAT.
#include "NatControl.h"

#include "cli/Args.h"

#include <cstdio>
#include <cstring>

extern const char morpheus_nf_nat_summary[] =
    "IPv4 source NAT (masquerade) with a data-plane connection table";

namespace {

using morpheus::Error;
using morpheus::cli::Args;
using morpheus::cli::OptionSpec;
namespace nat = morpheus::nf::nat;

const char *const Commands =
    "commands:\n"
    "  load-config FILE   apply a configuration (all or nothing)\n"
    "  flows              list the current translations\n"
    "  stats              print the data plane's counters\n"
    "\n"
    "'morpheus nf nat COMMAND --help' describes a command; nf/nat/README.md the\n"
    "configuration format.\n";

int fail(Error err) {
  std::fprintf(stderr, "morpheus: %s\n", llvm::toString(std::move(err)).c_str());
  return 1;
}

int usage(FILE *out, int code) {
  std::fprintf(out, "usage: morpheus nf nat COMMAND [options]\n\n%s", Commands);
  return code;
}

std::vector<OptionSpec> pinDirOption() {
  return {{"--pin-dir", "DIR",
           std::string("where 'morpheus run' pinned the maps (default ") + nat::DefaultPinDir +
               ")"}};
}

int loadConfigCommand(const Args &args, const std::vector<OptionSpec> &specs) {
  if (args.help() || args.positional().size() != 1)
    return morpheus::cli::printUsage(
        args, "morpheus nf nat load-config FILE [--pin-dir DIR]",
        "Reads FILE (lines: inside PREFIX, external ADDRESS, ports LOW-HIGH,\n"
        "inside-port IF, outside-port IF next-hop=MAC [mac=MAC]; see\n"
        "nf/nat/README.md), checks all of it, and applies it in one transaction\n"
        "that also removes the translations the new configuration no longer\n"
        "allows. A bad line is reported as FILE:LINE and nothing is changed.\n",
        specs);
  std::string pinDir = args.get("--pin-dir").value_or(nat::DefaultPinDir);
  if (Error err = nat::loadConfig(args.positional()[0], pinDir))
    return fail(std::move(err));
  return 0;
}

int flowsCommand(const Args &args, const std::vector<OptionSpec> &specs) {
  if (args.help() || !args.positional().empty())
    return morpheus::cli::printUsage(
        args, "morpheus nf nat flows [--pin-dir DIR]",
        "Lists the translations in the data plane's tables: inside, external and\n"
        "remote endpoint (for ICMP echo the port is the identifier), and whether\n"
        "both table halves are present.\n",
        specs);
  auto translations = nat::readTranslations(args.get("--pin-dir").value_or(nat::DefaultPinDir));
  if (!translations)
    return fail(translations.takeError());
  std::fputs(nat::formatTranslations(*translations).c_str(), stdout);
  return 0;
}

int statsCommand(const Args &args, const std::vector<OptionSpec> &specs) {
  if (args.help() || !args.positional().empty())
    return morpheus::cli::printUsage(args, "morpheus nf nat stats [--pin-dir DIR]",
                                     "Prints the packet counters, summed over CPUs.\n", specs);
  auto stats = nat::readStats(args.get("--pin-dir").value_or(nat::DefaultPinDir));
  if (!stats)
    return fail(stats.takeError());
  for (const auto &[name, value] : *stats)
    std::printf("%-16s %llu\n", name.c_str(), static_cast<unsigned long long>(value));
  return 0;
}

} // namespace

int morpheus_nf_nat_main(int argc, char **argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h"))
    return usage(argc < 2 ? stderr : stdout, argc < 2 ? 2 : 0);
  std::string command = argv[1];
  int (*run)(const Args &, const std::vector<OptionSpec> &) =
      command == "load-config" ? loadConfigCommand
      : command == "flows"     ? flowsCommand
      : command == "stats"     ? statsCommand
                               : nullptr;
  if (!run) {
    std::fprintf(stderr, "morpheus: nf nat: unknown command '%s'\n\n", command.c_str());
    return usage(stderr, 2);
  }
  std::vector<OptionSpec> specs = pinDirOption();
  auto args = Args::parse("nf nat " + command, argc, argv, 2, specs);
  if (!args) {
    std::fprintf(stderr, "morpheus: %s\n", llvm::toString(args.takeError()).c_str());
    return 2;
  }
  return run(*args, specs);
}
