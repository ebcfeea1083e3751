// `morpheus nf lb ...`: the load balancer's control-plane commands.
#include "LbLoader.h"
#include "cli/Args.h"
#include "nf/common/Subcommands.h"

#include <cinttypes>
#include <cstdio>

using namespace morpheus;
using namespace morpheus::nf::lb;
using cli::Args;
using cli::OptionSpec;

extern const char morpheus_nf_lb_summary[] =
    "L4 load balancer: VIPs, Maglev rings of reals, IP-in-IP/GUE toward them";

namespace {

const OptionSpec PinDirOption = {"--pin-dir", "DIR",
                                 std::string("where 'morpheus run' pinned the maps (default ") +
                                     DefaultPinDir + ")"};

std::string pinDirOf(const Args &args) { return args.get("--pin-dir").value_or(DefaultPinDir); }

int loadConfigCommand(int argc, char **argv) {
  std::vector<OptionSpec> specs = {PinDirOption};
  auto args = Args::parse("nf lb load-config", argc, argv, 2, specs);
  if (!args)
    return cli::usageError(llvm::toString(args.takeError()));
  if (args->help() || args->positional().size() != 1)
    return printUsage(*args, "morpheus nf lb load-config [--pin-dir DIR] FILE",
                      "Makes the balancer match FILE (format: nf/lb/README.md): VIPs and\n"
                      "reals not in it are removed, each VIP's Maglev ring is rebuilt, and\n"
                      "only entries that differ are written, all in one transaction. Flows\n"
                      "already in the flow table keep their real while it stays configured.\n",
                      specs);
  auto report = loadConfigFile(args->positional()[0], pinDirOf(*args));
  if (!report)
    return cli::fail(report.takeError());
  std::printf("lb: %zu VIPs, %zu reals; %zu changes (%zu ring slots) committed in %.2f s\n",
              report->vips, report->reals, report->changes, report->ringSlots,
              report->commitSeconds);
  return 0;
}

int statsCommand(int argc, char **argv) {
  std::vector<OptionSpec> specs = {PinDirOption};
  auto args = Args::parse("nf lb stats", argc, argv, 2, specs);
  if (!args)
    return cli::usageError(llvm::toString(args.takeError()));
  if (args->help() || !args->positional().empty())
    return printUsage(*args, "morpheus nf lb stats [--pin-dir DIR]",
                      "Prints each VIP's packets and bytes (as received, before\n"
                      "encapsulation) and the data plane's event counters.\n",
                      specs);
  std::string pinDir = pinDirOf(*args);
  auto vips = readVipStatus(pinDir);
  if (!vips)
    return cli::fail(vips.takeError());
  auto events = readEvents(pinDir);
  if (!events)
    return cli::fail(events.takeError());
  std::printf("%-5s %-24s %14s %16s\n", "index", "vip", "packets", "bytes");
  for (const VipStatus &vip : *vips)
    std::printf("%-5u %-24s %14" PRIu64 " %16" PRIu64 "\n", vip.index,
                (vip.vip + (vip.quic ? " quic" : "")).c_str(), vip.packets, vip.bytes);
  std::printf("\n");
  for (unsigned event = 0; event < events->size(); ++event)
    std::printf("%-14s %14" PRIu64 "\n", eventName(event), (*events)[event]);
  return 0;
}

int expireCommand(int argc, char **argv) {
  std::vector<OptionSpec> specs = {
      {"--idle", "DURATION", "remove flows not seen for this long (e.g. 30s, 500ms)"},
      PinDirOption};
  auto args = Args::parse("nf lb expire", argc, argv, 2, specs);
  if (!args)
    return cli::usageError(llvm::toString(args.takeError()));
  if (args->help() || !args->positional().empty() || !args->has("--idle"))
    return printUsage(*args, "morpheus nf lb expire --idle DURATION [--pin-dir DIR]",
                      "Removes idle flows from the flow table, so their next packet is\n"
                      "balanced by the current ring. The table is an LRU: this is only\n"
                      "needed to move long-idle flows (UDP has no end) after a real set\n"
                      "change, not to make room. Last-seen times have jiffy resolution.\n",
                      specs);
  double milliseconds = 0;
  if (Error err = args->readDuration("--idle", milliseconds))
    return cli::usageError(llvm::toString(std::move(err)));
  auto removed = expireFlows(pinDirOf(*args), uint64_t(milliseconds * 1e6));
  if (!removed)
    return cli::fail(removed.takeError());
  std::printf("lb: %zu idle flows removed\n", *removed);
  return 0;
}

const nf::Subcommand Commands[] = {
    {"load-config", "apply a configuration file (VIPs, reals, settings)", loadConfigCommand},
    {"stats", "per-VIP packet/byte counters and data-plane events", statsCommand},
    {"expire", "remove flows idle for longer than --idle", expireCommand},
};

} // namespace

int morpheus_nf_lb_main(int argc, char **argv) {
  return nf::dispatch("lb", morpheus_nf_lb_summary, argc, argv, Commands);
}
