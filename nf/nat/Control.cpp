// `morpheus nf nat ...`: the operator's commands for the NAT.
#include "NatControl.h"

#include "cli/Args.h"
#include "nf/common/Subcommands.h"

#include <cstdio>

extern const char morpheus_nf_nat_summary[] =
    "IPv4 source NAT (masquerade) with a data-plane connection table";

namespace {

using morpheus::Error;
using morpheus::cli::Args;
using morpheus::cli::OptionSpec;
namespace nat = morpheus::nf::nat;

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
    return morpheus::cli::fail(std::move(err));
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
    return morpheus::cli::fail(translations.takeError());
  std::fputs(nat::formatTranslations(*translations).c_str(), stdout);
  return 0;
}

int statsCommand(const Args &args, const std::vector<OptionSpec> &specs) {
  if (args.help() || !args.positional().empty())
    return morpheus::cli::printUsage(args, "morpheus nf nat stats [--pin-dir DIR]",
                                     "Prints the packet counters, summed over CPUs.\n", specs);
  auto stats = nat::readStats(args.get("--pin-dir").value_or(nat::DefaultPinDir));
  if (!stats)
    return morpheus::cli::fail(stats.takeError());
  for (const auto &[name, value] : *stats)
    std::printf("%-16s %llu\n", name.c_str(), static_cast<unsigned long long>(value));
  return 0;
}

// Every command takes only --pin-dir.
template <int (*Run)(const Args &, const std::vector<OptionSpec> &)>
int withPinDir(int argc, char **argv) {
  std::vector<OptionSpec> specs = pinDirOption();
  auto args = Args::parse(std::string("nf nat ") + argv[1], argc, argv, 2, specs);
  if (!args)
    return morpheus::cli::usageError(llvm::toString(args.takeError()));
  return Run(*args, specs);
}

const morpheus::nf::Subcommand Commands[] = {
    {"load-config", "apply a configuration (all or nothing; format: nf/nat/README.md)",
     withPinDir<loadConfigCommand>},
    {"flows", "list the current translations", withPinDir<flowsCommand>},
    {"stats", "print the data plane's counters", withPinDir<statsCommand>},
};

} // namespace

int morpheus_nf_nat_main(int argc, char **argv) {
  return morpheus::nf::dispatch("nat", morpheus_nf_nat_summary, argc, argv, Commands);
}
