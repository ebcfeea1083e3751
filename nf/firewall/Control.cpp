// `morpheus nf firewall ...`: the firewall's commands.
#include "Loader.h"
#include "nf/common/Subcommands.h"

#include <arpa/inet.h>

#include <cstdio>
#include <ctime>
#include <map>
#include <memory>
#include <optional>

extern const char morpheus_nf_firewall_summary[] =
    "5-tuple ACL (ClassBench rules, first match wins, bit-vector search)";

namespace morpheus::nf::firewall {

namespace {

struct RuleFlags {
  std::string file;
  fw_action defaultAction = FW_DROP;
  bool conntrack = false;
  bool ipv6Accept = false;
};

Error loadRulesFile(const std::string &pinDir, const RuleFlags &flags) {
  LoadOptions options;
  options.defaultAction = flags.defaultAction;
  options.conntrack = flags.conntrack;
  options.ipv6Accept = flags.ipv6Accept;
  auto rules = parseRules(flags.file);
  if (!rules)
    return rules.takeError();
  if (Error err = loadRules(pinDir, *rules, options))
    return err;
  std::printf("%zu rules loaded\n", rules->size());
  return Error::success();
}

Error printStats(const std::string &pinDir) {
  auto status = readStatus(pinDir);
  if (!status)
    return status.takeError();
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
  return Error::success();
}

std::string endpoint(uint32_t address, uint16_t port) {
  char text[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &address, text, sizeof(text));
  return std::string(text) + ":" + std::to_string(ntohs(port));
}

// Lists the flows, or with `expireMs` expires the idle ones.
Error flows(const std::string &pinDir, std::optional<double> expireMs) {
  if (expireMs) {
    auto removed = expireFlows(pinDir, uint64_t(*expireMs * 1e6));
    if (!removed)
      return removed.takeError();
    std::printf("%zu flows expired\n", *removed);
    return Error::success();
  }
  auto flows = readFlows(pinDir);
  if (!flows)
    return flows.takeError();
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  double nowSeconds = now.tv_sec + now.tv_nsec / 1e9;
  for (const Flow &flow : *flows)
    std::printf("%s %s -> %s, idle %.1fs\n", protocolName(flow.key.protocol).c_str(),
                endpoint(flow.key.saddr, flow.key.sport).c_str(),
                endpoint(flow.key.daddr, flow.key.dport).c_str(),
                nowSeconds - flow.lastSeenNs / 1e9);
  return Error::success();
}

} // namespace
} // namespace morpheus::nf::firewall

void morpheus_nf_firewall_commands(morpheus::nf::Commands &commands) {
  using namespace morpheus::nf::firewall;
  auto rules = std::make_shared<RuleFlags>();
  CLI::App &load = commands.add(
      "load-rules", "replace the rule set with a rule file",
      "Replaces the rule set with FILE (one rule per line, first match wins):\n"
      "  src=PREFIX dst=PREFIX l4proto=TCP|UDP|ICMP|GRE sport=LO:HI dport=LO:HI "
      "action=ACCEPT|DROP\n"
      "Fields left out match anything. The whole file is checked first; a bad\n"
      "line is reported as FILE:LINE and nothing changes. Options not given take\n"
      "their defaults, not the previous values. The new rules take effect at\n"
      "once for every packet; hit counters start at zero.",
      [rules](const std::string &pinDir) { return loadRulesFile(pinDir, *rules); });
  morpheus::nf::addFileArgument(load, rules->file, "the rule file");
  load.add_option("--default", rules->defaultAction, "verdict when no rule matches (default drop)")
      ->transform(morpheus::commandline::oneOf(
          std::map<std::string, fw_action>{{"drop", FW_DROP}, {"accept", FW_ACCEPT}}))
      ->type_name("drop|accept");
  load.add_flag("--conntrack", rules->conntrack,
                "also accept the replies of TCP/UDP flows a rule accepted");
  load.add_option("--ipv6", rules->ipv6Accept, "verdict for all IPv6 traffic (default drop)")
      ->transform(morpheus::commandline::oneOf(
          std::map<std::string, bool>{{"accept", true}, {"drop", false}}))
      ->type_name("accept|drop");

  commands.add("stats", "print per-rule hit counters and drop reasons",
               "Prints the counters: packets per rule that matched at least once\n"
               "(rules numbered in file order from 1), the default action's, and\n"
               "the packets the rules did not see.",
               printStats);

  auto expireMs = std::make_shared<std::optional<double>>();
  CLI::App &flowsCommand = commands.add(
      "flows", "list or expire connection-tracking entries",
      "Lists the replies connection tracking accepts (load-rules\n"
      "--conntrack), as 'protocol source -> destination, idle time', or\n"
      "expires the idle ones. The table is an LRU: when full, the least\n"
      "recently used flows make room.",
      [expireMs](const std::string &pinDir) { return flows(pinDir, *expireMs); });
  morpheus::commandline::addDuration(flowsCommand, "--expire", *expireMs,
                                     "remove the flows idle for longer than IDLE (e.g. 120s)")
      ->type_name("IDLE");
}
