#include "Classifier.h"

#include <set>

namespace morpheus::nf::firewall {

namespace {

uint32_t maskOf(uint8_t length) { return length ? ~uint32_t(0) << (32 - length) : 0; }

bool contains(const Ipv4Prefix &outer, uint32_t address, uint8_t length) {
  return outer.length <= length && (address & maskOf(outer.length)) == outer.address;
}

// The longest rule prefix holding an address stands for it: its rules are
// those whose prefix contains that longest one.
std::map<std::pair<uint32_t, uint8_t>, RuleBits>
prefixTable(const std::vector<Rule> &rules, Ipv4Prefix Rule::*field) {
  std::map<std::pair<uint32_t, uint8_t>, RuleBits> table;
  for (const Rule &rule : rules)
    table[{(rule.*field).address, (rule.*field).length}];
  for (auto &[prefix, bits] : table)
    for (size_t i = 0; i < rules.size(); ++i)
      if (contains(rules[i].*field, prefix.first, prefix.second))
        bits.set(i);
  return table;
}

// The rule ranges cut the ports into intervals whose ports all match the
// same rules; intervals with equal rule sets share a class.
PortTable portTable(const std::vector<Rule> &rules, PortRange Rule::*field) {
  std::set<uint32_t> cuts = {0, FW_PORTS};
  for (const Rule &rule : rules) {
    const PortRange &range = rule.*field;
    if (!range.any()) {
      cuts.insert(range.low);
      cuts.insert(uint32_t(range.high) + 1);
    }
  }
  PortTable table;
  table.classOf.resize(FW_PORTS);
  std::map<RuleBits, uint32_t> classes;
  RuleBits portless;
  for (size_t i = 0; i < rules.size(); ++i)
    if ((rules[i].*field).any())
      portless.set(i);
  classes[portless] = FW_PORTLESS_SET;
  table.sets.push_back(portless);
  for (auto cut = cuts.begin(); std::next(cut) != cuts.end(); ++cut) {
    uint32_t start = *cut, end = *std::next(cut);
    RuleBits bits;
    for (size_t i = 0; i < rules.size(); ++i)
      if ((rules[i].*field).contains(start))
        bits.set(i);
    auto [found, added] = classes.emplace(bits, table.sets.size());
    if (added)
      table.sets.push_back(bits);
    for (uint32_t port = start; port < end; ++port)
      table.classOf[port] = found->second;
  }
  return table;
}

} // namespace

fw_rule_set RuleBits::value() const {
  fw_rule_set value = {};
  value.first_word = FW_MAX_WORDS;
  for (uint16_t word = 0; word < FW_MAX_WORDS; ++word) {
    value.bits[word] = words[word];
    if (!words[word])
      continue;
    if (value.first_word == FW_MAX_WORDS)
      value.first_word = word;
    value.last_word = word;
  }
  return value;
}

std::vector<fw_rule_set> ruleSetValues(const std::vector<RuleBits> &sets) {
  std::vector<fw_rule_set> values;
  for (const RuleBits &bits : sets)
    values.push_back(bits.value());
  return values;
}

ClassifierTables buildTables(const std::vector<Rule> &rules) {
  ClassifierTables tables;
  tables.src = prefixTable(rules, &Rule::src);
  tables.dst = prefixTable(rules, &Rule::dst);
  tables.protocols.resize(FW_PROTOCOLS);
  for (size_t i = 0; i < rules.size(); ++i) {
    for (unsigned protocol = 0; protocol < FW_PROTOCOLS; ++protocol)
      if (!rules[i].protocol || *rules[i].protocol == protocol)
        tables.protocols[protocol].set(i);
    tables.actions.push_back(rules[i].action);
  }
  tables.sport = portTable(rules, &Rule::sport);
  tables.dport = portTable(rules, &Rule::dport);
  return tables;
}

} // namespace morpheus::nf::firewall
