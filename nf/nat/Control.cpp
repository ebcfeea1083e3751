// `morpheus nf nat ...`: the operator's commands for the NAT.
#include "NatControl.h"

#include "nf/common/Subcommands.h"

#include <cstdio>
#include <memory>

extern const char morpheus_nf_nat_summary[] =
    "IPv4 source NAT (masquerade) with a data-plane connection table";

namespace morpheus::nf::nat {
namespace {

Error printFlows(const std::string &pinDir) {
  auto translations = readTranslations(pinDir);
  if (!translations)
    return translations.takeError();
  std::fputs(formatTranslations(*translations).c_str(), stdout);
  return Error::success();
}

Error printStats(const std::string &pinDir) {
  auto stats = readStats(pinDir);
  if (!stats)
    return stats.takeError();
  for (const auto &[name, value] : *stats)
    std::printf("%-16s %llu\n", name.c_str(), static_cast<unsigned long long>(value));
  return Error::success();
}

} // namespace
} // namespace morpheus::nf::nat

void morpheus_nf_nat_commands(morpheus::nf::Commands &commands) {
  using namespace morpheus::nf::nat;
  auto file = std::make_shared<std::string>();
  CLI::App &load = commands.add(
      "load-config", "apply a configuration (all or nothing; format: nf/nat/README.md)",
      "Reads FILE (lines: inside PREFIX, external ADDRESS, ports LOW-HIGH,\n"
      "inside-port IF, outside-port IF next-hop=MAC [mac=MAC]; see\n"
      "nf/nat/README.md), checks all of it, and applies it in one transaction\n"
      "that also removes the translations the new configuration no longer\n"
      "allows. A bad line is reported as FILE:LINE and nothing is changed.",
      [file](const std::string &pinDir) { return loadConfig(*file, pinDir); });
  morpheus::nf::addFileArgument(load, *file, "the configuration file");
  commands.add("flows", "list the current translations",
               "Lists the translations in the data plane's tables: inside, external and\n"
               "remote endpoint (for ICMP echo the port is the identifier), and whether\n"
               "both table halves are present.",
               printFlows);
  commands.add("stats", "print the data plane's counters",
               "Prints the packet counters, summed over CPUs.", printStats);
}
