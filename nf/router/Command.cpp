// `morpheus nf router COMMAND ...`: the operator's commands, thin wrappers
// around Control.h.
#include "Control.h"

#include "nf/common/Subcommands.h"

#include <net/if.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

extern const char morpheus_nf_router_summary[] =
    "IPv4 router: LPM routes, neighbours, ports (DEVMAP redirect)";

namespace morpheus::nf::router {
namespace {

// An interface name, or its index.
Expected<uint32_t> parseInterface(const std::string &text) {
  if (uint32_t ifindex = if_nametoindex(text.c_str()))
    return ifindex;
  char *end = nullptr;
  unsigned long long number = std::strtoull(text.c_str(), &end, 0);
  if (text.empty() || text[0] == '-' || *end || number == 0 || number > UINT32_MAX)
    return makeError("IFACE: no interface named '{0}' in this network namespace", text);
  return uint32_t(number);
}

Error report(const char *what, Expected<LoadSummary> summary) {
  if (!summary)
    return summary.takeError();
  std::printf("%s: %zu written, %zu removed\n", what, summary->written, summary->removed);
  return Error::success();
}

struct LoadFlags {
  std::string file;
  bool replace = false;
};

// load-routes and load-neighbors: FILE and --replace.
void addLoadCommand(Commands &commands, const char *name, const char *summary,
                    const char *description, const char *fileHelp, const char *what,
                    Expected<LoadSummary> (*load)(const std::string &, const LoadOptions &)) {
  auto flags = std::make_shared<LoadFlags>();
  CLI::App &command =
      commands.add(name, summary, description, [flags, what, load](const std::string &pinDir) {
        return report(what, load(flags->file, {pinDir, flags->replace}));
      });
  addFileArgument(command, flags->file, fileHelp);
  command.add_flag("--replace", flags->replace,
                   "remove the entries the file does not list (default: add and overwrite)");
}

struct PortFlags {
  uint32_t port = 0;
  std::string iface;
};

} // namespace
} // namespace morpheus::nf::router

void morpheus_nf_router_commands(morpheus::nf::Commands &commands) {
  using namespace morpheus::nf::router;
  addLoadCommand(commands, "load-routes", "load routes: PREFIX NEXTHOP [PORT] per line",
                 "Loads routes, one 'PREFIX NEXTHOP [PORT]' per line. NEXTHOP is a gateway\n"
                 "address, 'direct' (on-link) or 'local' (an address of the router). A route\n"
                 "without PORT is spread over the ports bound now, by a hash of its prefix.\n"
                 "The whole file is checked before anything is changed.",
                 "the routes file", "routes", loadRoutes);
  addLoadCommand(commands, "load-neighbors",
                 "load neighbours: ADDRESS DST-MAC SRC-MAC PORT per line",
                 "Loads neighbours, one 'ADDRESS DST-MAC SRC-MAC PORT' per line: the MAC\n"
                 "address of ADDRESS on the link behind PORT, and that port's own MAC.",
                 "the neighbours file", "neighbors", loadNeighbors);

  auto port = std::make_shared<PortFlags>();
  CLI::App &set = commands.add(
      "set-port", "bind a port to an interface",
      "Binds port PORT (0-" + std::to_string(ROUTER_MAX_PORTS - 1) +
          ") to the interface IFACE (a name or an ifindex) of this\n"
          "network namespace; packets routed to PORT are redirected to it.",
      [port](const std::string &pinDir) -> morpheus::Error {
        auto ifindex = parseInterface(port->iface);
        if (!ifindex)
          return ifindex.takeError();
        return setPort(pinDir, port->port, *ifindex);
      });
  set.add_option("PORT", port->port, "the router's port number")->required()->type_name("");
  set.add_option("IFACE", port->iface, "an interface name or ifindex")
      ->required()
      ->type_name("");
  CLI::App &unset = commands.add(
      "unset-port", "unbind a port",
      "Unbinds port PORT: packets routed to it go to the kernel stack.",
      [port](const std::string &pinDir) { return unsetPort(pinDir, port->port); });
  unset.add_option("PORT", port->port, "the router's port number")->required()->type_name("");

  commands.add("stats", "print the packet counters",
               "Prints the packet counters of every outcome, summed over the CPUs.",
               [](const std::string &pinDir) -> morpheus::Error {
                 auto stats = readStats(pinDir);
                 if (!stats)
                   return stats.takeError();
                 for (size_t i = 0; i < stats->size(); ++i)
                   std::printf("%-14s %llu\n", StatNames[i], (unsigned long long)(*stats)[i]);
                 return morpheus::Error::success();
               });
}
