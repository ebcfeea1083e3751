#include "Rules.h"

#include <netinet/in.h>

#include <array>
#include <cctype>
#include <utility>

namespace morpheus::nf::firewall {

namespace {

const std::array<std::pair<const char *, uint8_t>, 4> Protocols = {{
    {"TCP", IPPROTO_TCP},
    {"UDP", IPPROTO_UDP},
    {"ICMP", IPPROTO_ICMP},
    {"GRE", IPPROTO_GRE},
}};

bool hasPorts(uint8_t protocol) { return protocol == IPPROTO_TCP || protocol == IPPROTO_UDP; }

Expected<Rule> parseRule(const ConfigLine &line) {
  auto fields = keyValues(line);
  if (!fields)
    return fields.takeError();
  Rule rule;
  rule.line = line.number;
  bool hasAction = false;
  for (const auto &[key, value] : *fields) {
    if (key == "src" || key == "dst") {
      auto prefix = parsePrefix(line, value, key.c_str());
      if (!prefix)
        return prefix.takeError();
      (key == "src" ? rule.src : rule.dst) = *prefix;
    } else if (key == "l4proto") {
      rule.protocol = protocolNumber(value);
      if (!rule.protocol)
        return line.error("l4proto: unknown protocol '{0}' (TCP, UDP, ICMP or GRE)", value);
    } else if (key == "sport" || key == "dport") {
      auto range = parsePortRange(line, value, key.c_str());
      if (!range)
        return range.takeError();
      (key == "sport" ? rule.sport : rule.dport) = {range->first, range->second};
    } else if (key == "action") {
      if (value != "ACCEPT" && value != "DROP")
        return line.error("action: '{0}' is neither ACCEPT nor DROP", value);
      rule.action = value == "ACCEPT" ? FW_ACCEPT : FW_DROP;
      hasAction = true;
    } else {
      return line.error("unknown field '{0}' (src, dst, l4proto, sport, dport, action)", key);
    }
  }
  if (!hasAction)
    return line.error("no action= (ACCEPT or DROP)");
  for (const auto &[field, range] : {std::pair{"sport", rule.sport}, {"dport", rule.dport}})
    if (!range.any() && rule.protocol && !hasPorts(*rule.protocol))
      return line.error("{0}: {1} has no ports (a port range needs TCP, UDP or no l4proto)",
                        field, protocolName(*rule.protocol));
  return rule;
}

} // namespace

std::optional<uint8_t> protocolNumber(const std::string &name) {
  std::string upper;
  for (char c : name)
    upper += std::toupper(static_cast<unsigned char>(c));
  for (const auto &[known, number] : Protocols)
    if (upper == known)
      return number;
  return std::nullopt;
}

std::string protocolName(uint8_t number) {
  for (const auto &[name, known] : Protocols)
    if (number == known)
      return name;
  return std::to_string(number);
}

Expected<std::vector<Rule>> parseRules(const std::string &path) {
  auto lines = readConfig(path);
  if (!lines)
    return lines.takeError();
  std::vector<Rule> rules;
  for (const ConfigLine &line : *lines) {
    if (rules.size() == FW_MAX_RULES)
      return line.error("more than {0} rules, the most the firewall holds", FW_MAX_RULES);
    auto rule = parseRule(line);
    if (!rule)
      return rule.takeError();
    rules.push_back(*rule);
  }
  return rules;
}

} // namespace morpheus::nf::firewall
