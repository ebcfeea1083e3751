#include "backend/user/DpdkTables.h"

#include "backend/user/Eal.h"
#include "backend/user/TableStorage.h"

#include <rte_errno.h>
#include <rte_hash.h>
#include <rte_lpm.h>
#include <rte_memory.h>
#include <rte_prefetch.h>

#include <atomic>
#include <string>

namespace morpheus::user {

namespace {

// DPDK names every table in one process-wide list: a name of our own each.
std::string dpdkName(const char *kind) {
  static std::atomic<uint32_t> next{0};
  return std::string("morpheus_") + kind + std::to_string(next++);
}

// Exact match over rte_hash: the key maps to its value's slot address
// (rte_hash_add_key_data / rte_hash_lookup_data). The extendable bucket
// table (RTE_HASH_EXTRA_FLAGS_EXT_TABLE) lets every key up to max_entries
// in, whatever the cuckoo displacements, so the table is full exactly when
// ours is; the slot pool bounds it at max_entries.
class RteHashTable : public Table {
public:
  RteHashTable(core::TableInfo info, rte_hash *hash)
      : Table(std::move(info), MU_HASH_RTE), pool(tableInfo.valueSize, tableInfo.maxEntries),
        hash(hash) {}
  ~RteHashTable() override { rte_hash_free(hash); }

  void *lookup(const void *key) override {
    void *value;
    return rte_hash_lookup_data(hash, key, &value) >= 0 ? value : nullptr;
  }
  bool update(const void *key, const void *value) override {
    if (void *existing = lookup(key)) {
      std::memcpy(existing, value, tableInfo.valueSize);
      return true;
    }
    if (pool.full())
      return false;
    uint32_t slot = pool.take(value);
    if (rte_hash_add_key_data(hash, key, pool.at(slot)) < 0) {
      pool.give(slot);
      return false;
    }
    return true;
  }
  bool remove(const void *key) override {
    void *value = lookup(key);
    if (!value || rte_hash_del_key(hash, key) < 0)
      return false;
    pool.give(pool.slotOf(value));
    return true;
  }
  void forEach(const std::function<bool(const Bytes &, const void *)> &visit) const override {
    const void *key;
    void *value;
    uint32_t next = 0;
    while (rte_hash_iterate(hash, &key, &value, &next) >= 0) {
      auto *bytes = static_cast<const uint8_t *>(key);
      if (!visit(Bytes(bytes, bytes + tableInfo.keySize), value))
        return;
    }
  }
  size_t size() const override { return size_t(rte_hash_count(hash)); }

private:
  ValuePool pool;
  rte_hash *hash;
};

// IPv4 longest prefix over rte_lpm (DIR-24-8 with 2^24 first-level
// entries): the next hop is the rule's value slot. rte_lpm takes depths
// 1..32, so a /0 rule is the answer when rte_lpm has none. A new value for
// a known prefix stays in its slot: rte_lpm does not change. rte_lpm
// answers keys of a whole address (every packet lookup); a key of another
// prefix length is answered from the rules, as the kernel's trie answers
// it (PrefixRules::longestWithin).
class RteLpmTable : public Table {
public:
  RteLpmTable(core::TableInfo info, rte_lpm *lpm)
      : Table(std::move(info), MU_LPM_RTE),
        rules(4, tableInfo.valueSize, tableInfo.maxEntries), lpm(lpm) {}
  ~RteLpmTable() override { rte_lpm_free(lpm); }

  void prefetch(const void *key) const override {
    rte_prefetch0(&lpm->tbl24[addressOf(key) >> 8]);
  }
  void *lookup(const void *key) override {
    uint32_t length;
    std::memcpy(&length, key, sizeof length);
    if (length != 32)
      return rules.longestWithin(static_cast<const uint8_t *>(key) + sizeof length, length);
    uint32_t slot;
    return rte_lpm_lookup(lpm, addressOf(key), &slot) == 0 ? rules.values().at(slot)
                                                            : everyAddress;
  }
  bool update(const void *key, const void *value) override {
    auto prefix = rules.prefixOf(key);
    if (!prefix)
      return false;
    bool fresh = !rules.all().count(*prefix);
    if (!rules.update(*prefix, value))
      return false;
    if (!fresh)
      return true;
    uint32_t slot = rules.all().at(*prefix);
    if (prefix->length == 0) {
      everyAddress = rules.values().at(slot);
    } else if (rte_lpm_add(lpm, addressOf(*prefix), uint8_t(prefix->length), slot) < 0) {
      rules.remove(*prefix);
      return false;
    }
    return true;
  }
  bool remove(const void *key) override {
    auto prefix = rules.prefixOf(key);
    if (!prefix || !rules.remove(*prefix))
      return false;
    if (prefix->length == 0)
      everyAddress = nullptr;
    else
      rte_lpm_delete(lpm, addressOf(*prefix), uint8_t(prefix->length));
    return true;
  }
  void forEach(const std::function<bool(const Bytes &, const void *)> &visit) const override {
    rules.forEach(visit);
  }
  size_t size() const override { return rules.all().size(); }

private:
  // rte_lpm's addresses are host-order integers; keys hold network order.
  static uint32_t addressOf(const uint8_t *a) {
    return (uint32_t(a[0]) << 24) | (uint32_t(a[1]) << 16) | (uint32_t(a[2]) << 8) | a[3];
  }
  static uint32_t addressOf(const void *key) {
    return addressOf(static_cast<const uint8_t *>(key) + sizeof(uint32_t));
  }
  static uint32_t addressOf(const PrefixRules::Prefix &prefix) {
    return addressOf(prefix.address.data());
  }

  PrefixRules rules;
  rte_lpm *lpm;
  void *everyAddress = nullptr; // the /0 rule's value
};

} // namespace

Expected<std::unique_ptr<Table>> makeDpdkTable(core::TableInfo info, mu_table_kind kind) {
  if (Error err = initialiseEal())
    return withContext(std::move(err), "table '" + info.name + "'");
  std::string name = dpdkName(kind == MU_HASH_RTE ? "hash" : "lpm");
  if (kind == MU_HASH_RTE) {
    rte_hash_parameters parameters{};
    parameters.name = name.c_str();
    // rte_hash takes at least a bucket's worth (8); the slot pool holds
    // max_entries.
    parameters.entries = std::max<uint32_t>(info.maxEntries, 8);
    parameters.key_len = info.keySize;
    parameters.socket_id = SOCKET_ID_ANY;
    parameters.extra_flag = RTE_HASH_EXTRA_FLAGS_EXT_TABLE;
    rte_hash *hash = rte_hash_create(&parameters);
    if (!hash)
      return makeError("table '{0}': rte_hash_create: {1}", info.name, rte_strerror(rte_errno));
    return std::make_unique<RteHashTable>(std::move(info), hash);
  }
  rte_lpm_config config{};
  config.max_rules = info.maxEntries;
  // A group of 256 second-level entries per /24 that a longer rule splits:
  // at most one per rule.
  config.number_tbl8s = info.maxEntries;
  rte_lpm *lpm = rte_lpm_create(name.c_str(), SOCKET_ID_ANY, &config);
  if (!lpm)
    return makeError("table '{0}': rte_lpm_create: {1}", info.name, rte_strerror(rte_errno));
  return std::make_unique<RteLpmTable>(std::move(info), lpm);
}

} // namespace morpheus::user
