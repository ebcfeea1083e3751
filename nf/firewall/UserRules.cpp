#include "nf/firewall/UserRules.h"

#include "nf/firewall/Classifier.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>
#include <map>

namespace morpheus::nf::firewall {

namespace {

uint16_t read16(const std::vector<uint8_t> &frame, size_t at) {
  return uint16_t(frame[at] << 8 | frame[at + 1]);
}

uint32_t read32(const std::vector<uint8_t> &frame, size_t at) {
  return uint32_t(read16(frame, at)) << 16 | read16(frame, at + 2);
}

bool inPrefix(const Ipv4Prefix &prefix, uint32_t address) {
  uint32_t mask = prefix.length ? ~uint32_t(0) << (32 - prefix.length) : 0;
  return (address & mask) == prefix.address;
}

bool portMatches(const PortRange &range, bool hasPorts, uint16_t port) {
  return range.any() || (hasPorts && range.contains(port));
}

// Replaces the prefixes of LPM table `name` by `wanted`.
Error syncPrefixes(TableWrites &tables, const std::string &name,
                   const std::map<std::pair<uint32_t, uint8_t>, RuleBits> &wanted) {
  std::map<Bytes, Bytes> keep;
  for (const auto &[prefix, bits] : wanted)
    keep[bytesOf(fw_user_prefix_key{prefix.second, htonl(prefix.first)})] =
        bytesOf(bits.value());
  if (Error err = tables.removeWhere(
          name, [&](const Bytes &key, const void *) { return !keep.count(key); }))
    return err;
  for (const auto &[key, value] : keep)
    if (Error err = tables.set(name, key, value))
      return err;
  return Error::success();
}

// Slot i of array `name` = values[i], the slots beyond them = `rest`.
template <typename T>
Error fillArray(TableWrites &tables, const std::string &name, const std::vector<T> &values,
                uint32_t slots, const T &rest) {
  for (uint32_t slot = 0; slot < slots; ++slot)
    if (Error err = tables.set(name, bytesOf(slot),
                                           bytesOf(slot < values.size() ? values[slot] : rest)))
      return err;
  return Error::success();
}

} // namespace

std::optional<PacketFields> packetFields(const std::vector<uint8_t> &frame) {
  constexpr uint16_t Vlan = 0x8100, VlanOuter = 0x88a8, Ipv4 = 0x0800;
  if (frame.size() < 14)
    return std::nullopt;
  uint16_t type = read16(frame, 12);
  size_t at = 14;
  for (int tag = 0; tag < 2 && (type == Vlan || type == VlanOuter); ++tag) {
    if (frame.size() < at + 4)
      return std::nullopt;
    type = read16(frame, at + 2);
    at += 4;
  }
  if (type != Ipv4 || frame.size() < at + 20 || frame[at] >> 4 != 4 || (frame[at] & 15) < 5)
    return std::nullopt;
  size_t l4 = at + (frame[at] & 15) * 4;
  if (frame.size() < l4)
    return std::nullopt;
  PacketFields fields;
  fields.saddr = read32(frame, at + 12);
  fields.daddr = read32(frame, at + 16);
  fields.protocol = frame[at + 9];
  bool fragment = read16(frame, at + 6) & 0x1fff;
  if (!fragment && (fields.protocol == IPPROTO_TCP || fields.protocol == IPPROTO_UDP)) {
    if (frame.size() < l4 + (fields.protocol == IPPROTO_TCP ? 20 : 8))
      return std::nullopt;
    fields.sport = read16(frame, l4);
    fields.dport = read16(frame, l4 + 2);
    fields.hasPorts = true;
  }
  return fields;
}

std::optional<size_t> firstMatch(const std::vector<Rule> &rules, const PacketFields &fields) {
  for (size_t i = 0; i < rules.size(); ++i) {
    const Rule &rule = rules[i];
    if (inPrefix(rule.src, fields.saddr) && inPrefix(rule.dst, fields.daddr) &&
        (!rule.protocol || *rule.protocol == fields.protocol) &&
        portMatches(rule.sport, fields.hasPorts, fields.sport) &&
        portMatches(rule.dport, fields.hasPorts, fields.dport))
      return i;
  }
  return std::nullopt;
}

Error loadUserRules(TableWrites &tables, const std::vector<Rule> &rules,
                    fw_action defaultAction) {
  ClassifierTables built = buildTables(rules);
  return tables.change([&]() -> Error {
    fw_config config = {};
    config.default_action = defaultAction;
    config.rule_count = uint32_t(rules.size());
    if (Error err = tables.set("fw_config", bytesOf(uint32_t(0)), bytesOf(config)))
      return err;
    if (Error err = syncPrefixes(tables, "src_prefixes", built.src))
      return err;
    if (Error err = syncPrefixes(tables, "dst_prefixes", built.dst))
      return err;
    const fw_rule_set empty = RuleBits().value();
    if (Error err =
            fillArray(tables, "protocols", ruleSetValues(built.protocols), FW_PROTOCOLS, empty))
      return err;
    for (const auto &[name, table] :
         {std::pair{"sport", &built.sport}, std::pair{"dport", &built.dport}}) {
      if (Error err = fillArray(tables, std::string(name) + "_class", table->classOf, FW_PORTS,
                                uint32_t(0)))
        return err;
      if (Error err = fillArray(tables, std::string(name) + "_sets", ruleSetValues(table->sets),
                                FW_PORT_SETS, empty))
        return err;
    }
    std::vector<uint32_t> actions(built.actions.begin(), built.actions.end());
    return fillArray(tables, "rule_actions", actions, FW_MAX_RULES, uint32_t(FW_DROP));
  });
}

} // namespace morpheus::nf::firewall
