// `morpheus nf lb ...`: the load balancer's control-plane commands.
#include "LbLoader.h"
#include "nf/common/Subcommands.h"

#include <cinttypes>
#include <cstdio>
#include <memory>

extern const char morpheus_nf_lb_summary[] =
    "L4 load balancer: VIPs, Maglev rings of reals, IP-in-IP/GUE toward them";

namespace morpheus::nf::lb {
namespace {

Error loadConfig(const std::string &pinDir, const std::string &file) {
  auto report = loadConfigFile(file, pinDir);
  if (!report)
    return report.takeError();
  std::printf("lb: %zu VIPs, %zu reals; %zu changes (%zu ring slots) committed in %.2f s\n",
              report->vips, report->reals, report->changes, report->ringSlots,
              report->commitSeconds);
  return Error::success();
}

Error printStats(const std::string &pinDir) {
  auto vips = readVipStatus(pinDir);
  if (!vips)
    return vips.takeError();
  auto events = readEvents(pinDir);
  if (!events)
    return events.takeError();
  std::printf("%-5s %-24s %14s %16s\n", "index", "vip", "packets", "bytes");
  for (const VipStatus &vip : *vips)
    std::printf("%-5u %-24s %14" PRIu64 " %16" PRIu64 "\n", vip.index,
                (vip.vip + (vip.quic ? " quic" : "")).c_str(), vip.packets, vip.bytes);
  std::printf("\n");
  for (unsigned event = 0; event < events->size(); ++event)
    std::printf("%-14s %14" PRIu64 "\n", eventName(event), (*events)[event]);
  return Error::success();
}

Error expire(const std::string &pinDir, double idleMs) {
  auto removed = expireFlows(pinDir, uint64_t(idleMs * 1e6));
  if (!removed)
    return removed.takeError();
  std::printf("lb: %zu idle flows removed\n", *removed);
  return Error::success();
}

struct Flags {
  std::string file;
  double idleMs = 0;
};

} // namespace
} // namespace morpheus::nf::lb

void morpheus_nf_lb_commands(morpheus::nf::Commands &commands) {
  using namespace morpheus::nf::lb;
  auto flags = std::make_shared<Flags>();
  CLI::App &load = commands.add(
      "load-config", "apply a configuration file (VIPs, reals, settings)",
      "Makes the balancer match FILE (format: nf/lb/README.md): VIPs and\n"
      "reals not in it are removed, each VIP's Maglev ring is rebuilt, and\n"
      "only entries that differ are written, all in one transaction. Flows\n"
      "already in the flow table keep their real while it stays configured.",
      [flags](const std::string &pinDir) { return loadConfig(pinDir, flags->file); });
  morpheus::nf::addFileArgument(load, flags->file, "the configuration file");

  commands.add("stats", "per-VIP packet/byte counters and data-plane events",
               "Prints each VIP's packets and bytes (as received, before\n"
               "encapsulation) and the data plane's event counters.",
               printStats);

  CLI::App &expiring = commands.add(
      "expire", "remove flows idle for longer than --idle",
      "Removes idle flows from the flow table, so their next packet is\n"
      "balanced by the current ring. The table is an LRU: this is only\n"
      "needed to move long-idle flows (UDP has no end) after a real set\n"
      "change, not to make room. Last-seen times have jiffy resolution.",
      [flags](const std::string &pinDir) { return expire(pinDir, flags->idleMs); });
  morpheus::commandline::addDuration(expiring, "--idle", flags->idleMs,
                                     "remove flows not seen for this long (e.g. 30s, 500ms)")
      ->required();
}
