#include "Loader.h"

#include "Classifier.h"
#include "client/Transaction.h"

#include <arpa/inet.h>

#include <ctime>
#include <optional>

namespace morpheus::nf::firewall {

static_assert(sizeof(fw_config) == 16 && sizeof(fw_rule_set) == 8 + 8 * FW_MAX_WORDS &&
              sizeof(fw_prefix_key) == 12 && sizeof(fw_flow) == 16 &&
              sizeof(fw_flow_state) == 8);

namespace {

const std::vector<std::string> ClassifierMaps = {
    "fw_config",  "src_prefixes", "dst_prefixes", "protocols",    "sport_class",
    "sport_sets", "dport_class",  "dport_sets",   "rule_actions", "rule_hits"};

// Queues the updates that make map[offset + i] hold desired[i], skipping the
// entries that already do.
template <typename T>
Error syncArray(client::Transaction &transaction, client::PinnedMaps &maps,
                const std::string &name, uint32_t offset, const std::vector<T> &desired) {
  const client::Map &map = maps[name];
  for (uint32_t i = 0; i < desired.size(); ++i) {
    auto current = map.at<T>(offset + i);
    if (!current)
      return current.takeError();
    if (bytesOf(*current) != bytesOf(desired[i]))
      transaction.update(name, offset + i, desired[i]);
  }
  return Error::success();
}

fw_prefix_key prefixKey(uint32_t generation, uint32_t address, uint8_t length) {
  return {uint32_t(FW_GENERATION_BITS + length), generation, htonl(address)};
}

// Queues the changes that make `generation`'s half of an LPM map hold exactly
// `desired`.
Error syncPrefixes(client::Transaction &transaction, client::PinnedMaps &maps,
                   const std::string &name, uint32_t generation,
                   const std::map<std::pair<uint32_t, uint8_t>, RuleBits> &desired) {
  // Looking up a stored prefix finds that very prefix.
  auto stored = maps[name].entriesAs<fw_prefix_key, fw_rule_set>();
  if (!stored)
    return stored.takeError();
  std::map<Bytes, Bytes> current;
  for (const auto &[key, value] : *stored)
    if (key.generation == generation)
      current[bytesOf(key)] = bytesOf(value);
  std::map<Bytes, Bytes> wanted;
  for (const auto &[prefix, bits] : desired)
    wanted[bytesOf(prefixKey(generation, prefix.first, prefix.second))] = bytesOf(bits.value());
  for (const auto &[key, value] : current)
    if (!wanted.count(key))
      transaction.remove(name, key);
  for (const auto &[key, value] : wanted)
    if (auto found = current.find(key); found == current.end() || found->second != value)
      transaction.update(name, key, value);
  return Error::success();
}

// Queues the changes that make `generation`'s half of every classifier table
// hold `tables`, with its hit counters at zero.
Error queueTables(client::Transaction &transaction, client::PinnedMaps &maps,
                  uint32_t generation, const ClassifierTables &tables) {
  std::vector<uint32_t> actions(tables.actions.begin(), tables.actions.end());
  actions.resize(FW_MAX_RULES, FW_DROP);
  std::vector<fw_rule_set> sportSets = ruleSetValues(tables.sport.sets);
  std::vector<fw_rule_set> dportSets = ruleSetValues(tables.dport.sets);
  sportSets.resize(FW_PORT_SETS, RuleBits().value());
  dportSets.resize(FW_PORT_SETS, RuleBits().value());

  if (Error err = syncPrefixes(transaction, maps, "src_prefixes", generation, tables.src))
    return err;
  if (Error err = syncPrefixes(transaction, maps, "dst_prefixes", generation, tables.dst))
    return err;
  if (Error err = syncArray(transaction, maps, "protocols", generation * FW_PROTOCOLS,
                            ruleSetValues(tables.protocols)))
    return err;
  if (Error err = syncArray(transaction, maps, "sport_class", generation * FW_PORTS,
                            tables.sport.classOf))
    return err;
  if (Error err =
          syncArray(transaction, maps, "sport_sets", generation * FW_PORT_SETS, sportSets))
    return err;
  if (Error err = syncArray(transaction, maps, "dport_class", generation * FW_PORTS,
                            tables.dport.classOf))
    return err;
  if (Error err =
          syncArray(transaction, maps, "dport_sets", generation * FW_PORT_SETS, dportSets))
    return err;
  if (Error err =
          syncArray(transaction, maps, "rule_actions", generation * FW_MAX_RULES, actions))
    return err;
  for (uint32_t slot = 0; slot < FW_HIT_SLOTS; ++slot) {
    uint32_t index = generation * FW_HIT_SLOTS + slot;
    auto hits = maps["rule_hits"].sumOverCpus(index);
    if (!hits)
      return hits.takeError();
    if (*hits)
      transaction.update("rule_hits", index, uint64_t(0));
  }
  return Error::success();
}

uint64_t monotonicNs() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return uint64_t(now.tv_sec) * 1000000000 + now.tv_nsec;
}

} // namespace

Error loadRules(const std::string &pinDir, const std::vector<Rule> &rules,
                const LoadOptions &options) {
  if (rules.size() > FW_MAX_RULES)
    return makeError("{0} rules, more than the {1} the firewall holds", rules.size(),
                     FW_MAX_RULES);
  auto maps = client::PinnedMaps::open(pinDir, ClassifierMaps);
  if (!maps)
    return maps.takeError();
  uint32_t zero = 0;
  auto live = (*maps)["fw_config"].at<fw_config>(zero);
  if (!live)
    return live.takeError();
  uint32_t generation = !live->generation;

  client::Transaction transaction(*maps);
  if (Error err = queueTables(transaction, *maps, generation, buildTables(rules)))
    return err;
  fw_config config = {};
  config.generation = generation;
  config.default_action = options.defaultAction;
  config.flags = (options.conntrack ? FW_FLAG_CONNTRACK : 0) |
                 (options.ipv6Accept ? FW_FLAG_IPV6_ACCEPT : 0);
  config.rule_count = rules.size();
  transaction.update("fw_config", zero, config);
  return transaction.commit();
}

Expected<Status> readStatus(const std::string &pinDir) {
  auto maps = client::PinnedMaps::open(pinDir, {"fw_config", "fw_stats", "rule_hits"});
  if (!maps)
    return maps.takeError();
  Status status;
  uint32_t zero = 0;
  auto config = (*maps)["fw_config"].at<fw_config>(zero);
  if (!config)
    return config.takeError();
  status.config = *config;
  for (uint32_t stat = 0; stat < FW_STAT_MAX; ++stat) {
    auto count = (*maps)["fw_stats"].sumOverCpus(stat);
    if (!count)
      return count.takeError();
    status.stats[stat] = *count;
  }
  uint32_t base = config->generation * FW_HIT_SLOTS;
  uint32_t rules = std::min<uint32_t>(config->rule_count, FW_MAX_RULES);
  for (uint32_t slot = 0; slot <= rules; ++slot) {
    auto hits = (*maps)["rule_hits"].sumOverCpus(base + (slot == rules ? FW_DEFAULT_SLOT : slot));
    if (!hits)
      return hits.takeError();
    status.ruleHits.push_back(*hits);
  }
  return status;
}

Expected<std::vector<Flow>> readFlows(const std::string &pinDir) {
  auto maps = client::PinnedMaps::open(pinDir, {"conntrack"});
  if (!maps)
    return maps.takeError();
  // Flows evicted while the table is walked are left out.
  auto entries = (*maps)["conntrack"].entriesAs<fw_flow, fw_flow_state>();
  if (!entries)
    return entries.takeError();
  std::vector<Flow> flows;
  for (const auto &[key, state] : *entries)
    flows.push_back({key, state.last_seen_ns});
  return flows;
}

Expected<size_t> expireFlows(const std::string &pinDir, uint64_t idleNs) {
  auto flows = readFlows(pinDir);
  if (!flows)
    return flows.takeError();
  auto maps = client::PinnedMaps::open(pinDir, {"conntrack"});
  if (!maps)
    return maps.takeError();
  client::Transaction transaction(*maps);
  uint64_t now = monotonicNs();
  for (const Flow &flow : *flows)
    if (now > flow.lastSeenNs && now - flow.lastSeenNs > idleNs)
      transaction.remove("conntrack", flow.key);
  if (Error err = transaction.commit())
    return err;
  return transaction.size();
}

} // namespace morpheus::nf::firewall
