// `morpheus nf router COMMAND ...`: the operator's commands, thin wrappers
// around Control.h.
#include "Control.h"

#include "cli/Args.h"
#include "nf/common/Subcommands.h"

#include <llvm/ADT/STLFunctionalExtras.h>
#include <net/if.h>

#include <cstdio>

extern const char morpheus_nf_router_summary[] =
    "IPv4 router: LPM routes, neighbours, ports (DEVMAP redirect)";

namespace morpheus::nf::router {
namespace {

const cli::OptionSpec PinDirOption{"--pin-dir", "DIR",
                                   std::string("where the router's maps are pinned (default ") +
                                       DefaultPinDir + ")"};
const cli::OptionSpec ReplaceOption{
    "--replace", "", "remove the entries the file does not list (default: add and overwrite)"};

// The range is setPort's to check.
Expected<uint32_t> parsePortNumber(const std::string &text) {
  auto port = cli::parseUnsigned(text, "PORT");
  if (!port)
    return port.takeError();
  if (*port > UINT32_MAX)
    return makeError("PORT: {0} is too large", text);
  return uint32_t(*port);
}

// An interface name, or its index.
Expected<uint32_t> parseInterface(const std::string &text) {
  if (uint32_t ifindex = if_nametoindex(text.c_str()))
    return ifindex;
  auto number = cli::parseUnsigned(text, "IFACE");
  if (!number || *number == 0 || *number > UINT32_MAX) {
    llvm::consumeError(number.takeError());
    return makeError("IFACE: no interface named '{0}' in this network namespace", text);
  }
  return uint32_t(*number);
}

Error report(const char *what, Expected<LoadSummary> summary) {
  if (!summary)
    return summary.takeError();
  std::printf("%s: %zu written, %zu removed\n", what, summary->written, summary->removed);
  return Error::success();
}

// A command's --help text and what it takes.
struct Usage {
  const char *synopsis;
  std::string description;
  std::vector<cli::OptionSpec> options;
  size_t positionals;
};

// Parses the options (PinDirOption among them) and runs `body`, or prints
// the usage for --help or a wrong number of arguments.
int execute(int argc, char **argv, const Usage &usage,
            llvm::function_ref<Error(const cli::Args &, const std::string &pinDir)> body) {
  auto args = cli::Args::parse(std::string("nf router ") + argv[1], argc, argv, 2, usage.options);
  if (!args)
    return cli::usageError(llvm::toString(args.takeError()));
  if (args->help() || args->positional().size() != usage.positionals)
    return cli::printUsage(*args, usage.synopsis, usage.description.c_str(), usage.options);
  if (Error err = body(*args, args->get("--pin-dir").value_or(DefaultPinDir)))
    return cli::fail(std::move(err));
  return 0;
}

int loadRoutesCommand(int argc, char **argv) {
  return execute(
      argc, argv,
      {"morpheus nf router load-routes FILE [--pin-dir DIR] [--replace]",
       "Loads routes, one 'PREFIX NEXTHOP [PORT]' per line. NEXTHOP is a gateway\n"
       "address, 'direct' (on-link) or 'local' (an address of the router). A route\n"
       "without PORT is spread over the ports bound now, by a hash of its prefix.\n"
       "The whole file is checked before anything is changed.\n",
       {PinDirOption, ReplaceOption},
       1},
      [](const cli::Args &args, const std::string &pinDir) {
        return report("routes", loadRoutes(args.positional()[0], {pinDir, args.has("--replace")}));
      });
}

int loadNeighborsCommand(int argc, char **argv) {
  return execute(argc, argv,
                 {"morpheus nf router load-neighbors FILE [--pin-dir DIR] [--replace]",
                  "Loads neighbours, one 'ADDRESS DST-MAC SRC-MAC PORT' per line: the MAC\n"
                  "address of ADDRESS on the link behind PORT, and that port's own MAC.\n",
                  {PinDirOption, ReplaceOption},
                  1},
                 [](const cli::Args &args, const std::string &pinDir) {
                   return report("neighbors", loadNeighbors(args.positional()[0],
                                                            {pinDir, args.has("--replace")}));
                 });
}

int setPortCommand(int argc, char **argv) {
  return execute(argc, argv,
                 {"morpheus nf router set-port PORT IFACE [--pin-dir DIR]",
                  "Binds port PORT (0-" + std::to_string(ROUTER_MAX_PORTS - 1) +
                      ") to the interface IFACE (a name or an ifindex) of this\n"
                      "network namespace; packets routed to PORT are redirected to it.\n",
                  {PinDirOption},
                  2},
                 [](const cli::Args &args, const std::string &pinDir) -> Error {
                   auto port = parsePortNumber(args.positional()[0]);
                   if (!port)
                     return port.takeError();
                   auto ifindex = parseInterface(args.positional()[1]);
                   if (!ifindex)
                     return ifindex.takeError();
                   return setPort(pinDir, *port, *ifindex);
                 });
}

int unsetPortCommand(int argc, char **argv) {
  return execute(argc, argv,
                 {"morpheus nf router unset-port PORT [--pin-dir DIR]",
                  "Unbinds port PORT: packets routed to it go to the kernel stack.\n",
                  {PinDirOption},
                  1},
                 [](const cli::Args &args, const std::string &pinDir) -> Error {
                   auto port = parsePortNumber(args.positional()[0]);
                   if (!port)
                     return port.takeError();
                   return unsetPort(pinDir, *port);
                 });
}

int statsCommand(int argc, char **argv) {
  return execute(argc, argv,
                 {"morpheus nf router stats [--pin-dir DIR]",
                  "Prints the packet counters of every outcome, summed over the CPUs.\n",
                  {PinDirOption},
                  0},
                 [](const cli::Args &, const std::string &pinDir) -> Error {
                   auto stats = readStats(pinDir);
                   if (!stats)
                     return stats.takeError();
                   for (size_t i = 0; i < stats->size(); ++i)
                     std::printf("%-14s %llu\n", StatNames[i], (unsigned long long)(*stats)[i]);
                   return Error::success();
                 });
}

const Subcommand Commands[] = {
    {"load-routes", "load routes: PREFIX NEXTHOP [PORT] per line", loadRoutesCommand},
    {"load-neighbors", "load neighbours: ADDRESS DST-MAC SRC-MAC PORT per line",
     loadNeighborsCommand},
    {"set-port", "bind a port to an interface", setPortCommand},
    {"unset-port", "unbind a port", unsetPortCommand},
    {"stats", "print the packet counters", statsCommand},
};

} // namespace
} // namespace morpheus::nf::router

int morpheus_nf_router_main(int argc, char **argv) {
  using namespace morpheus::nf;
  return dispatch("router", morpheus_nf_router_summary, argc, argv, router::Commands);
}
