// `morpheus nf firewall ...`: the firewall's commands.
#include "Loader.h"
#include "cli/Args.h"
#include "nf/common/Subcommands.h"

#include <arpa/inet.h>

#include <cstdio>
#include <ctime>

extern const char morpheus_nf_firewall_summary[] =
    "5-tuple ACL (ClassBench rules, first match wins, bit-vector search)";

namespace morpheus::nf::firewall {

namespace {

using cli::Args;
using cli::OptionSpec;

const OptionSpec PinDirOption = {"--pin-dir", "DIR",
                                 "where the maps are pinned (default " + DefaultPinDir + ")"};

Expected<bool> readChoice(const Args &args, const std::string &option, const char *yes,
                          const char *no, bool fallback) {
  auto text = args.get(option);
  if (!text)
    return fallback;
  if (*text == yes || *text == no)
    return *text == yes;
  return makeError("firewall: {0} takes {1} or {2}, not '{3}'", option, yes, no, *text);
}

int loadRulesCommand(int argc, char **argv) {
  std::vector<OptionSpec> specs = {
      {"--default", "drop|accept", "verdict when no rule matches (default drop)"},
      {"--conntrack", "", "also accept the replies of TCP/UDP flows a rule accepted"},
      {"--ipv6", "accept|drop", "verdict for all IPv6 traffic (default drop)"},
      PinDirOption};
  auto args = Args::parse("nf firewall load-rules", argc, argv, 2, specs);
  if (!args)
    return cli::usageError(llvm::toString(args.takeError()));
  if (args->help() || args->positional().size() != 1)
    return printUsage(
        *args, "morpheus nf firewall load-rules FILE [options]",
        "Replaces the rule set with FILE (one rule per line, first match wins):\n"
        "  src=PREFIX dst=PREFIX l4proto=TCP|UDP|ICMP|GRE sport=LO:HI dport=LO:HI "
        "action=ACCEPT|DROP\n"
        "Fields left out match anything. The whole file is checked first; a bad\n"
        "line is reported as FILE:LINE and nothing changes. Options not given take\n"
        "their defaults, not the previous values. The new rules take effect at\n"
        "once for every packet; hit counters start at zero.\n",
        specs);
  auto defaultAccept = readChoice(*args, "--default", "accept", "drop", false);
  if (!defaultAccept)
    return cli::usageError(llvm::toString(defaultAccept.takeError()));
  auto ipv6Accept = readChoice(*args, "--ipv6", "accept", "drop", false);
  if (!ipv6Accept)
    return cli::usageError(llvm::toString(ipv6Accept.takeError()));
  LoadOptions options;
  options.defaultAction = *defaultAccept ? FW_ACCEPT : FW_DROP;
  options.conntrack = args->has("--conntrack");
  options.ipv6Accept = *ipv6Accept;

  auto rules = parseRules(args->positional()[0]);
  if (!rules)
    return cli::fail(rules.takeError());
  if (Error err = loadRules(args->get("--pin-dir").value_or(DefaultPinDir), *rules, options))
    return cli::fail(std::move(err));
  std::printf("%zu rules loaded\n", rules->size());
  return 0;
}

int statsCommand(int argc, char **argv) {
  std::vector<OptionSpec> specs = {PinDirOption};
  auto args = Args::parse("nf firewall stats", argc, argv, 2, specs);
  if (!args)
    return cli::usageError(llvm::toString(args.takeError()));
  if (args->help() || !args->positional().empty())
    return printUsage(*args, "morpheus nf firewall stats [options]",
                      "Prints the counters: packets per rule that matched at least once\n"
                      "(rules numbered in file order from 1), the default action's, and\n"
                      "the packets the rules did not see.\n",
                      specs);
  auto status = readStatus(args->get("--pin-dir").value_or(DefaultPinDir));
  if (!status)
    return cli::fail(status.takeError());
  const fw_config &config = status->config;
  std::printf("rules %u, default %s, conntrack %s, ipv6 %s\n", config.rule_count,
              config.default_action == FW_ACCEPT ? "accept" : "drop",
              config.flags & FW_FLAG_CONNTRACK ? "on" : "off",
              config.flags & FW_FLAG_IPV6_ACCEPT ? "accept" : "drop");
  for (size_t rule = 0; rule + 1 < status->ruleHits.size(); ++rule)
    if (status->ruleHits[rule])
      std::printf("rule %-5zu %llu\n", rule + 1,
                  (unsigned long long)status->ruleHits[rule]);
  std::printf("default    %llu\n", (unsigned long long)status->ruleHits.back());
  const char *names[FW_STAT_MAX] = {"non-ip (passed)", "malformed (dropped)", "ipv6",
                                    "established (accepted)", "non-first fragments"};
  for (int stat = 0; stat < FW_STAT_MAX; ++stat)
    std::printf("%-24s %llu\n", names[stat], (unsigned long long)status->stats[stat]);
  return 0;
}

std::string endpoint(uint32_t address, uint16_t port) {
  char text[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &address, text, sizeof(text));
  return std::string(text) + ":" + std::to_string(ntohs(port));
}

int flowsCommand(int argc, char **argv) {
  std::vector<OptionSpec> specs = {
      {"--expire", "IDLE", "remove the flows idle for longer than IDLE (e.g. 120s)"},
      PinDirOption};
  auto args = Args::parse("nf firewall flows", argc, argv, 2, specs);
  if (!args)
    return cli::usageError(llvm::toString(args.takeError()));
  if (args->help() || !args->positional().empty())
    return printUsage(*args, "morpheus nf firewall flows [options]",
                      "Lists the replies connection tracking accepts (load-rules\n"
                      "--conntrack), as 'protocol source -> destination, idle time', or\n"
                      "expires the idle ones. The table is an LRU: when full, the least\n"
                      "recently used flows make room.\n",
                      specs);
  std::string pinDir = args->get("--pin-dir").value_or(DefaultPinDir);
  if (args->has("--expire")) {
    double idleMs = 0;
    if (Error err = args->readDuration("--expire", idleMs))
      return cli::usageError(llvm::toString(std::move(err)));
    auto removed = expireFlows(pinDir, uint64_t(idleMs * 1e6));
    if (!removed)
      return cli::fail(removed.takeError());
    std::printf("%zu flows expired\n", *removed);
    return 0;
  }
  auto flows = readFlows(pinDir);
  if (!flows)
    return cli::fail(flows.takeError());
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  double nowSeconds = now.tv_sec + now.tv_nsec / 1e9;
  for (const Flow &flow : *flows)
    std::printf("%s %s -> %s, idle %.1fs\n", protocolName(flow.key.protocol).c_str(),
                endpoint(flow.key.saddr, flow.key.sport).c_str(),
                endpoint(flow.key.daddr, flow.key.dport).c_str(),
                nowSeconds - flow.lastSeenNs / 1e9);
  return 0;
}

const Subcommand Commands[] = {
    {"load-rules", "replace the rule set with a rule file", loadRulesCommand},
    {"stats", "print per-rule hit counters and drop reasons", statsCommand},
    {"flows", "list or expire connection-tracking entries", flowsCommand},
};

} // namespace
} // namespace morpheus::nf::firewall

int morpheus_nf_firewall_main(int argc, char **argv) {
  using namespace morpheus::nf;
  return dispatch("firewall", morpheus_nf_firewall_summary, argc, argv, firewall::Commands);
}
