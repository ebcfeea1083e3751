// From a rule list to the tables of the data plane's bit-vector search (see
// the header of firewall.bpf.c): per field, the set of rules each value of
// that field lets through, as a bitmap indexed by rule priority.
#pragma once

#include "Rules.h"

#include <array>
#include <map>
#include <vector>

namespace morpheus::nf::firewall {

class RuleBits {
public:
  void set(size_t rule) { words[rule / FW_WORD_BITS] |= uint64_t(1) << (rule % FW_WORD_BITS); }
  // With the span of non-zero words filled in (first > last when empty).
  fw_rule_set value() const;
  auto operator<=>(const RuleBits &) const = default;

private:
  std::array<uint64_t, FW_MAX_WORDS> words{};
};

struct PortTable {
  std::vector<uint32_t> classOf; // port -> class, FW_PORTS entries
  std::vector<RuleBits> sets;    // class -> rules; FW_PORTLESS_SET first
};

struct ClassifierTables {
  // Keyed by (address, length), one entry per distinct prefix of the field.
  std::map<std::pair<uint32_t, uint8_t>, RuleBits> src, dst;
  std::vector<RuleBits> protocols; // FW_PROTOCOLS entries
  PortTable sport, dport;
  std::vector<fw_action> actions; // by rule index
};

// The data plane's values of a list of rule sets (an array's slots, in order).
std::vector<fw_rule_set> ruleSetValues(const std::vector<RuleBits> &sets);

// At most FW_MAX_RULES rules (parseRules enforces it).
ClassifierTables buildTables(const std::vector<Rule> &rules);

} // namespace morpheus::nf::firewall
