// `morpheus nf l2switch COMMAND`: load the port and static-MAC
// configuration into a running l2switch, age and list its FDB.
#include "L2Switch.h"

#include "nf/common/Subcommands.h"
#include "support/Netns.h"

#include <net/if.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>

extern const char morpheus_nf_l2switch_summary[] =
    "802.1Q switch with data-plane MAC learning: ports, static MACs, FDB aging";

namespace morpheus::nf::l2switch {
namespace {

struct Flags {
  std::string file, netns;
  double maxAgeMs = 300000;
};

Error age(const std::string &pinDir, double maxAgeMs) {
  auto report = ageFdb(pinDir, uint64_t(maxAgeMs * 1e6), monotonicNowNs());
  if (!report)
    return report.takeError();
  std::printf("removed %zu of %zu FDB entries\n", report->removed, report->entries);
  return Error::success();
}

Error printFdb(const std::string &pinDir) {
  auto rows = readFdb(pinDir);
  if (!rows)
    return rows.takeError();
  uint64_t now = monotonicNowNs();
  std::printf("%-17s %4s  %-16s %s\n", "MAC", "VLAN", "PORT", "AGE");
  for (const FdbRow &row : *rows) {
    char name[IF_NAMESIZE] = "?";
    if (!if_indextoname(row.entry.ifindex, name))
      std::snprintf(name, sizeof(name), "%u", row.entry.ifindex);
    const uint8_t *mac = row.key.mac;
    std::string age = "static";
    if (!(row.entry.flags & L2SW_FDB_STATIC)) {
      double seconds = now > row.entry.last_seen_ns ? (now - row.entry.last_seen_ns) / 1e9 : 0;
      char text[32];
      std::snprintf(text, sizeof text, "%.1fs", seconds);
      age = text;
    }
    std::printf("%02x:%02x:%02x:%02x:%02x:%02x %4u  %-16s %s\n", mac[0], mac[1], mac[2], mac[3],
                mac[4], mac[5], row.key.vlan, name, age.c_str());
  }
  return Error::success();
}

const char PortsDescription[] =
    "Makes the switch's ports exactly those of FILE, one per line:\n"
    "  PORT access VLAN\n"
    "  PORT trunk VLAN[,VLAN|,LOW-HIGH]... [native=VLAN]\n"
    "PORT is an interface name or ifindex. Learned MACs on ports that no longer\n"
    "carry their VLAN are forgotten. Nothing is applied if any line is wrong.";

const char StaticDescription[] =
    "Makes the static FDB entries exactly those of FILE, one per line:\n"
    "  MAC VLAN PORT\n"
    "Static entries are never learned over nor aged. The ports must already be\n"
    "configured and carry the VLAN. Nothing is applied if any line is wrong.";

} // namespace
} // namespace morpheus::nf::l2switch

void morpheus_nf_l2switch_commands(morpheus::nf::Commands &commands) {
  using namespace morpheus::nf::l2switch;
  auto flags = std::make_shared<Flags>();
  // load-ports and load-static: FILE, applied in --netns.
  auto addLoad = [&](const char *name, const char *summary, const char *description,
                     const char *fileHelp,
                     morpheus::Error (*load)(const std::string &, const std::string &)) {
    CLI::App &command =
        commands.add(name, summary, description, [flags, load](const std::string &pinDir) {
          return morpheus::netns::runInNetns(flags->netns, [&] { return load(pinDir, flags->file); });
        });
    morpheus::nf::addFileArgument(command, flags->file, fileHelp);
    command
        .add_option("--netns", flags->netns,
                    "resolve ports and write devmaps in network namespace /run/netns/NAME")
        ->type_name("NAME");
  };
  addLoad("load-ports", "set the ports (access / trunk VLANs)", PortsDescription,
          "the ports file", loadPorts);
  addLoad("load-static", "set the static MAC entries", StaticDescription,
          "the static MAC file", loadStatic);

  CLI::App &aging = commands.add(
      "age", "remove idle learned MAC entries",
      "Removes learned FDB entries not seen for longer than the maximum age;\n"
      "static entries stay.",
      [flags](const std::string &pinDir) { return age(pinDir, flags->maxAgeMs); });
  morpheus::commandline::addDuration(aging, "--max-age", flags->maxAgeMs,
                                     "remove learned entries idle longer (default 300s)");

  CLI::App &fdb = commands.add(
      "fdb", "list the forwarding database",
      "Lists the forwarding database: MAC, VLAN, port, seconds since last seen.",
      [flags](const std::string &pinDir) {
        // Port names as that namespace sees them.
        return morpheus::netns::runInNetns(flags->netns, [&] { return printFdb(pinDir); });
      });
  fdb.add_option("--netns", flags->netns,
                 "name ports as network namespace /run/netns/NAME sees them")
      ->type_name("NAME");
}
