// `morpheus nf l2switch COMMAND`: load the port and static-MAC
// configuration into a running l2switch, age and list its FDB.
#include "L2Switch.h"

#include "cli/Args.h"
#include "nf/common/Subcommands.h"

#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

extern const char morpheus_nf_l2switch_summary[] =
    "802.1Q switch with data-plane MAC learning: ports, static MACs, FDB aging";

namespace morpheus::nf::l2switch {
namespace {

using cli::Args;
using cli::OptionSpec;

const OptionSpec PinDirOption = {"--pin-dir", "DIR",
                                 std::string("where the maps are pinned (default ") +
                                     DefaultPinDir + ")"};
const OptionSpec NetnsOption = {
    "--netns", "NAME",
    "resolve ports and write devmaps in network namespace /run/netns/NAME"};

// Moves this (single-threaded) process into a named network namespace for
// the lifetime of the object, because devmap entries take the ifindex as
// seen by the namespace of the process that writes them.
class NetnsScope {
public:
  NetnsScope() = default;
  NetnsScope(const NetnsScope &) = delete;
  ~NetnsScope() {
    if (previous >= 0) {
      setns(previous, CLONE_NEWNET);
      close(previous);
    }
  }

  Error enter(const std::string &name) {
    std::string path = "/run/netns/" + name;
    int target = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (target < 0)
      return makeSystemError(errno, "network namespace '{0}'", name);
    previous = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    int err = previous < 0 || setns(target, CLONE_NEWNET) ? errno : 0;
    close(target);
    if (err)
      return makeSystemError(err, "cannot enter network namespace '{0}'", name);
    return Error::success();
  }

private:
  int previous = -1;
};

// Parses a command's options; returns an exit code when the command should
// stop (help, usage error) and -1 to go on.
int parseCommand(int argc, char **argv, const std::vector<OptionSpec> &specs,
                 size_t positionals, const char *synopsis, const char *description,
                 std::optional<Args> &out) {
  std::string command = std::string("nf l2switch ") + argv[1];
  auto args = Args::parse(command, argc, argv, 2, specs);
  if (!args)
    return cli::usageError(llvm::toString(args.takeError()));
  if (args->help() || args->positional().size() != positionals)
    return cli::printUsage(*args, synopsis, description, specs);
  out.emplace(std::move(*args));
  return -1;
}

using Loader = Error (*)(const std::string &pinDir, const std::string &path);

int loadCommand(int argc, char **argv, const char *synopsis, const char *description,
                Loader load) {
  std::vector<OptionSpec> specs = {PinDirOption, NetnsOption};
  std::optional<Args> args;
  if (int code = parseCommand(argc, argv, specs, 1, synopsis, description, args); code >= 0)
    return code;
  NetnsScope netns;
  if (auto name = args->get("--netns"))
    if (Error err = netns.enter(*name))
      return cli::fail(std::move(err));
  std::string pinDir = args->get("--pin-dir").value_or(DefaultPinDir);
  if (Error err = load(pinDir, args->positional()[0]))
    return cli::fail(std::move(err));
  return 0;
}

int ageCommand(int argc, char **argv) {
  std::vector<OptionSpec> specs = {
      {"--max-age", "DURATION", "remove learned entries idle longer (default 300s)"},
      PinDirOption};
  std::optional<Args> args;
  if (int code = parseCommand(argc, argv, specs, 0, "morpheus nf l2switch age [options]",
                              "Removes learned FDB entries not seen for longer than the "
                              "maximum age;\nstatic entries stay.\n",
                              args);
      code >= 0)
    return code;
  double maxAgeMs = 300000;
  if (Error err = args->readDuration("--max-age", maxAgeMs))
    return cli::usageError(llvm::toString(std::move(err)));
  std::string pinDir = args->get("--pin-dir").value_or(DefaultPinDir);
  auto report = ageFdb(pinDir, uint64_t(maxAgeMs * 1e6), monotonicNowNs());
  if (!report)
    return cli::fail(report.takeError());
  std::printf("removed %zu of %zu FDB entries\n", report->removed, report->entries);
  return 0;
}

int fdbCommand(int argc, char **argv) {
  std::vector<OptionSpec> specs = {
      PinDirOption,
      {"--netns", "NAME", "name ports as network namespace /run/netns/NAME sees them"}};
  std::optional<Args> args;
  if (int code = parseCommand(argc, argv, specs, 0, "morpheus nf l2switch fdb [options]",
                              "Lists the forwarding database: MAC, VLAN, port, seconds "
                              "since last seen.\n",
                              args);
      code >= 0)
    return code;
  NetnsScope netns; // port names as that namespace sees them
  if (auto name = args->get("--netns"))
    if (Error err = netns.enter(*name))
      return cli::fail(std::move(err));
  auto rows = readFdb(args->get("--pin-dir").value_or(DefaultPinDir));
  if (!rows)
    return cli::fail(rows.takeError());
  uint64_t now = monotonicNowNs();
  std::printf("%-17s %4s  %-16s %s\n", "MAC", "VLAN", "PORT", "AGE");
  for (const FdbRow &row : *rows) {
    char name[IF_NAMESIZE] = "?";
    if (!if_indextoname(row.entry.ifindex, name))
      std::snprintf(name, sizeof(name), "%u", row.entry.ifindex);
    const uint8_t *mac = row.key.mac;
    if (row.entry.flags & L2SW_FDB_STATIC) {
      std::printf("%02x:%02x:%02x:%02x:%02x:%02x %4u  %-16s static\n", mac[0], mac[1], mac[2],
                  mac[3], mac[4], mac[5], row.key.vlan, name);
      continue;
    }
    double age = now > row.entry.last_seen_ns ? (now - row.entry.last_seen_ns) / 1e9 : 0;
    std::printf("%02x:%02x:%02x:%02x:%02x:%02x %4u  %-16s %.1fs\n", mac[0], mac[1], mac[2],
                mac[3], mac[4], mac[5], row.key.vlan, name, age);
  }
  return 0;
}

const char PortsDescription[] =
    "Makes the switch's ports exactly those of FILE, one per line:\n"
    "  PORT access VLAN\n"
    "  PORT trunk VLAN[,VLAN|,LOW-HIGH]... [native=VLAN]\n"
    "PORT is an interface name or ifindex. Learned MACs on ports that no longer\n"
    "carry their VLAN are forgotten. Nothing is applied if any line is wrong.\n";

const char StaticDescription[] =
    "Makes the static FDB entries exactly those of FILE, one per line:\n"
    "  MAC VLAN PORT\n"
    "Static entries are never learned over nor aged. The ports must already be\n"
    "configured and carry the VLAN. Nothing is applied if any line is wrong.\n";

int loadPortsCommand(int argc, char **argv) {
  return loadCommand(argc, argv, "morpheus nf l2switch load-ports FILE [options]",
                     PortsDescription, loadPorts);
}

int loadStaticCommand(int argc, char **argv) {
  return loadCommand(argc, argv, "morpheus nf l2switch load-static FILE [options]",
                     StaticDescription, loadStatic);
}

const Subcommand Commands[] = {
    {"load-ports", "set the ports (access / trunk VLANs)", loadPortsCommand},
    {"load-static", "set the static MAC entries", loadStaticCommand},
    {"age", "remove idle learned MAC entries", ageCommand},
    {"fdb", "list the forwarding database", fdbCommand},
};

} // namespace
} // namespace morpheus::nf::l2switch

int morpheus_nf_l2switch_main(int argc, char **argv) {
  using namespace morpheus::nf;
  return dispatch("l2switch", morpheus_nf_l2switch_summary, argc, argv, l2switch::Commands);
}
