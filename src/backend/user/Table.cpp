#include "backend/user/Table.h"

#include "backend/user/TableStorage.h"
#ifdef MORPHEUS_WITH_DPDK
#include "backend/user/DpdkTables.h"
#endif

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>

namespace morpheus::user {

namespace {

// Exact match: open addressing with linear probing over a power-of-two
// array at least twice max_entries (never resized, so it never rehashes
// under a handler), tombstones on delete.
class HashTable : public Table {
public:
  HashTable(core::TableInfo info)
      : Table(std::move(info), MU_HASH), pool(tableInfo.valueSize, tableInfo.maxEntries) {
    size_t capacity = 16;
    while (capacity < size_t(tableInfo.maxEntries) * 2)
      capacity *= 2;
    mask = capacity - 1;
    buckets.resize(capacity);
    keys.resize(capacity * tableInfo.keySize);
  }

  void prefetch(const void *key) const override {
    __builtin_prefetch(&buckets[hash(key) & mask]);
  }

  void *lookup(const void *key) override {
    for (size_t i = hash(key) & mask;; i = (i + 1) & mask) {
      Bucket &bucket = buckets[i];
      if (bucket.state == Empty)
        return nullptr;
      if (bucket.state == Used && std::memcmp(keyAt(i), key, tableInfo.keySize) == 0)
        return pool.at(bucket.slot);
    }
  }

  bool update(const void *key, const void *value) override {
    if (void *existing = lookup(key)) {
      std::memcpy(existing, value, tableInfo.valueSize);
      return true;
    }
    if (pool.full())
      return false;
    size_t i = hash(key) & mask;
    while (buckets[i].state == Used)
      i = (i + 1) & mask;
    buckets[i] = {Used, pool.take(value)};
    std::memcpy(keyAt(i), key, tableInfo.keySize);
    ++count;
    return true;
  }

  bool remove(const void *key) override {
    for (size_t i = hash(key) & mask;; i = (i + 1) & mask) {
      Bucket &bucket = buckets[i];
      if (bucket.state == Empty)
        return false;
      if (bucket.state == Used && std::memcmp(keyAt(i), key, tableInfo.keySize) == 0) {
        pool.give(bucket.slot);
        bucket.state = Deleted;
        --count;
        return true;
      }
    }
  }

  void forEach(const std::function<bool(const Bytes &, const void *)> &visit) const override {
    for (size_t i = 0; i < buckets.size(); ++i)
      if (buckets[i].state == Used) {
        const uint8_t *key = keys.data() + i * tableInfo.keySize;
        if (!visit(Bytes(key, key + tableInfo.keySize), pool.at(buckets[i].slot)))
          return;
      }
  }

  size_t size() const override { return count; }

private:
  enum State : uint8_t { Empty, Used, Deleted };
  struct Bucket {
    State state = Empty;
    uint32_t slot = 0;
  };

  // FNV-1a over the key bytes.
  uint64_t hash(const void *key) const {
    auto *bytes = static_cast<const uint8_t *>(key);
    uint64_t h = 1469598103934665603ull;
    for (uint32_t i = 0; i < tableInfo.keySize; ++i)
      h = (h ^ bytes[i]) * 1099511628211ull;
    return h ^ (h >> 29);
  }
  uint8_t *keyAt(size_t bucket) { return keys.data() + bucket * tableInfo.keySize; }

  ValuePool pool;
  size_t mask = 0;
  std::vector<Bucket> buckets;
  std::vector<uint8_t> keys;
  size_t count = 0;
};

// Index -> value, every slot present (zeroed at creation), as BPF arrays.
class ArrayTable : public Table {
public:
  ArrayTable(core::TableInfo info)
      : Table(std::move(info), MU_ARRAY),
        values(size_t(tableInfo.valueSize) * tableInfo.maxEntries) {}

  void *lookup(const void *key) override {
    uint32_t index;
    std::memcpy(&index, key, sizeof index);
    return index < tableInfo.maxEntries ? values.data() + size_t(index) * tableInfo.valueSize
                                        : nullptr;
  }
  bool update(const void *key, const void *value) override {
    void *slot = lookup(key);
    if (slot)
      std::memcpy(slot, value, tableInfo.valueSize);
    return slot != nullptr;
  }
  bool remove(const void *) override { return false; } // slots always exist
  void forEach(const std::function<bool(const Bytes &, const void *)> &visit) const override {
    for (uint32_t index = 0; index < tableInfo.maxEntries; ++index) {
      auto *key = reinterpret_cast<const uint8_t *>(&index);
      if (!visit(Bytes(key, key + sizeof index), values.data() + size_t(index) * tableInfo.valueSize))
        return;
    }
  }
  size_t size() const override { return tableInfo.maxEntries; }

private:
  std::vector<uint8_t> values;
};


bool matches(const uint8_t *address, const PrefixRules::Prefix &prefix) {
  uint32_t full = prefix.length / 8, rest = prefix.length % 8;
  if (std::memcmp(address, prefix.address.data(), full) != 0)
    return false;
  return rest == 0 || ((address[full] ^ prefix.address[full]) & uint8_t(0xff00u >> rest)) == 0;
}

// The key's prefix length (its first four bytes, in the host's order).
uint32_t keyLength(const void *key) {
  uint32_t length;
  std::memcpy(&length, key, sizeof length);
  return length;
}

// FastClick's LinearIPLookup: the rules scanned longest prefix first, the
// first that matches wins. Cost grows with the number of routes. A key of
// prefix length L starts the scan at the first rule no longer than L, as
// the kernel's trie matches only those.
class LinearLpmTable : public Table {
public:
  LinearLpmTable(core::TableInfo info)
      : Table(std::move(info), MU_LPM_LINEAR),
        rules(tableInfo.keySize - 4, tableInfo.valueSize, tableInfo.maxEntries),
        firstWithin((tableInfo.keySize - 4) * 8 + 1, 0) {}

  void *lookup(const void *key) override {
    uint32_t length = keyLength(key);
    if (length >= firstWithin.size())
      return nullptr; // beyond the address: the trie matches nothing
    auto *address = static_cast<const uint8_t *>(key) + sizeof(uint32_t);
    for (size_t i = firstWithin[length]; i < scan.size(); ++i)
      if (matches(address, *scan[i].prefix))
        return scan[i].value;
    return nullptr;
  }
  bool update(const void *key, const void *value) override {
    auto prefix = rules.prefixOf(key);
    if (!prefix || !rules.update(*prefix, value))
      return false;
    rebuild();
    return true;
  }
  bool remove(const void *key) override {
    auto prefix = rules.prefixOf(key);
    if (!prefix || !rules.remove(*prefix))
      return false;
    rebuild();
    return true;
  }
  void forEach(const std::function<bool(const Bytes &, const void *)> &visit) const override {
    rules.forEach(visit);
  }
  size_t size() const override { return rules.all().size(); }

private:
  struct Rule {
    const PrefixRules::Prefix *prefix;
    void *value;
  };
  void rebuild() {
    scan.clear();
    for (const auto &[prefix, slot] : rules.all())
      scan.push_back({&prefix, rules.values().at(slot)});
    size_t next = 0;
    for (uint32_t length = uint32_t(firstWithin.size()); length-- > 0;) {
      while (next < scan.size() && scan[next].prefix->length > length)
        ++next;
      firstWithin[length] = next;
    }
  }

  PrefixRules rules;
  std::vector<Rule> scan; // longest first
  // Per key prefix length L, where in `scan` the rules no longer than L start.
  std::vector<size_t> firstWithin;
};

// DIR-24-8 (Gupta, Lin, McKeown): one entry per /24 (2^24 of them, zeroed
// memory the kernel maps on first write), holding a value or a group of 256
// entries for the last byte. An entry is 0 (no route), a value slot + 1, or
// Group | group index; beside each entry, the length of the prefix that
// wrote it. Changes are incremental, as in DPDK's rte_lpm: a prefix
// overwrites the entries of its range that shorter (or equal) prefixes
// wrote; a deleted prefix's entries go to the longest shorter prefix that
// covers it. A change costs the range it covers, a lookup of a whole
// address one or two loads; a key of another prefix length is answered
// from the rules, as the kernel's trie answers it (longestWithin).
class Dir24Table : public Table {
public:
  Dir24Table(core::TableInfo info)
      : Table(std::move(info), MU_LPM_DIR24),
        rules(4, tableInfo.valueSize, tableInfo.maxEntries),
        tbl24(static_cast<uint32_t *>(std::calloc(Entries24, sizeof(uint32_t)))),
        depth24(static_cast<uint8_t *>(std::calloc(Entries24, sizeof(uint8_t)))) {}

  void prefetch(const void *key) const override {
    auto *a = static_cast<const uint8_t *>(key) + sizeof(uint32_t);
    __builtin_prefetch(&tbl24[(uint32_t(a[0]) << 16) | (uint32_t(a[1]) << 8) | a[2]]);
  }

  void *lookup(const void *key) override {
    auto *a = static_cast<const uint8_t *>(key) + sizeof(uint32_t);
    if (uint32_t length = keyLength(key); length != 32)
      return rules.longestWithin(a, length);
    uint32_t entry = tbl24[(uint32_t(a[0]) << 16) | (uint32_t(a[1]) << 8) | a[2]];
    if (entry & Group)
      entry = tbl8[size_t(entry & ~Group) * 256 + a[3]];
    return entry ? rules.values().at(entry - 1) : nullptr;
  }
  bool update(const void *key, const void *value) override {
    auto prefix = rules.prefixOf(key);
    if (!prefix)
      return false;
    bool fresh = !rules.all().count(*prefix);
    if (!rules.update(*prefix, value))
      return false;
    if (fresh) // a new value for a known prefix stays in its slot
      write(*prefix, rules.all().at(*prefix) + 1, uint8_t(prefix->length),
            [&](uint8_t depth) { return depth <= prefix->length; });
    return true;
  }
  bool remove(const void *key) override {
    auto prefix = rules.prefixOf(key);
    if (!prefix || !rules.remove(*prefix))
      return false;
    auto [entry, depth] = covering(*prefix);
    write(*prefix, entry, depth, [&](uint8_t written) { return written == prefix->length; });
    return true;
  }
  void forEach(const std::function<bool(const Bytes &, const void *)> &visit) const override {
    rules.forEach(visit);
  }
  size_t size() const override { return rules.all().size(); }

private:
  static constexpr uint32_t Group = 0x80000000u;
  static constexpr size_t Entries24 = size_t(1) << 24;

  // The entry and length of the longest remaining prefix shorter than
  // `prefix` that covers it: what its entries fall back to.
  std::pair<uint32_t, uint8_t> covering(const PrefixRules::Prefix &prefix) const {
    for (uint32_t length = prefix.length; length-- > 0;) {
      PrefixRules::Prefix shorter{length, prefix.address};
      for (uint32_t bit = length; bit < 32; ++bit)
        shorter.address[bit / 8] &= uint8_t(~(0x80u >> (bit % 8)));
      if (auto rule = rules.all().find(shorter); rule != rules.all().end())
        return {rule->second + 1, uint8_t(length)};
    }
    return {0, 0};
  }

  // Sets every entry of `prefix`'s range whose writer's length passes
  // `replaces` to (entry, depth).
  template <typename Replaces>
  void write(const PrefixRules::Prefix &prefix, uint32_t entry, uint8_t depth,
             Replaces replaces) {
    const Bytes &a = prefix.address;
    uint32_t first = (uint32_t(a[0]) << 16) | (uint32_t(a[1]) << 8) | a[2];
    auto writeGroup = [&](uint32_t group, uint32_t low, uint32_t count) {
      for (size_t i = size_t(group) * 256 + low; i < size_t(group) * 256 + low + count; ++i)
        if (replaces(depth8[i])) {
          tbl8[i] = entry;
          depth8[i] = depth;
        }
    };
    if (prefix.length <= 24) {
      for (uint32_t index = first; index < first + (1u << (24 - prefix.length)); ++index) {
        if (tbl24[index] & Group)
          writeGroup(tbl24[index] & ~Group, 0, 256);
        else if (replaces(depth24[index])) {
          tbl24[index] = entry;
          depth24[index] = depth;
        }
      }
      return;
    }
    if (!(tbl24[first] & Group)) { // the group inherits the /<=24 entry it splits
      uint32_t group = uint32_t(tbl8.size() / 256);
      tbl8.resize(tbl8.size() + 256, tbl24[first]);
      depth8.resize(depth8.size() + 256, depth24[first]);
      tbl24[first] = Group | group;
    }
    writeGroup(tbl24[first] & ~Group, a[3], 1u << (32 - prefix.length));
  }

  struct Free {
    void operator()(void *memory) const { std::free(memory); }
  };
  PrefixRules rules;
  // calloc: zero pages, mapped only where prefixes write.
  std::unique_ptr<uint32_t[], Free> tbl24;
  std::unique_ptr<uint8_t[], Free> depth24;
  std::vector<uint32_t> tbl8;
  std::vector<uint8_t> depth8;
};

} // namespace

Expected<core::TableInfo> tableInfoFor(const std::string &name, const mu_table_def &def) {
  core::TableInfo info;
  info.name = name;
  info.keySize = def.key_size;
  info.valueSize = def.value_size;
  info.maxEntries = def.max_entries;
  if (!def.key_size || !def.value_size || !def.max_entries)
    return makeError("table '{0}': key size, value size and max entries must not be 0", name);
  switch (def.kind) {
  case MU_HASH:
    info.typeName = "hash";
    info.match = core::TableMatch::Exact;
    break;
  case MU_ARRAY:
    info.typeName = "array";
    info.match = core::TableMatch::Index;
    if (def.key_size != 4)
      return makeError("table '{0}': an array's key is a 4-byte index, not {1} bytes", name,
                       def.key_size);
    break;
  case MU_LPM_LINEAR:
  case MU_LPM_DIR24:
    info.typeName = def.kind == MU_LPM_LINEAR ? "lpm_linear" : "lpm_dir24";
    info.match = core::TableMatch::LongestPrefix;
    if (def.key_size <= 4 || (def.kind == MU_LPM_DIR24 && def.key_size != 8))
      return makeError("table '{0}': an LPM key is a 4-byte prefix length and the address "
                       "(DIR-24-8: 4 bytes, IPv4); got {1} bytes",
                       name, def.key_size);
    break;
  case MU_HASH_RTE:
    info.typeName = "rte_hash";
    info.match = core::TableMatch::Exact;
    break;
  case MU_LPM_RTE:
    info.typeName = "lpm_rte";
    info.match = core::TableMatch::LongestPrefix;
    if (def.key_size != 8)
      return makeError("table '{0}': an rte_lpm key is a 4-byte prefix length and an IPv4 "
                       "address; got {1} bytes",
                       name, def.key_size);
    // rte_lpm's next hop (a value slot here) has 24 bits.
    if (def.max_entries >= (1u << 24))
      return makeError("table '{0}': rte_lpm holds fewer than 2^24 rules, not {1}", name,
                       def.max_entries);
    break;
  default:
    return makeError("table '{0}': unknown kind {1}", name, def.kind);
  }
  return info;
}

Expected<std::unique_ptr<Table>> makeTable(const std::string &name, const mu_table_def &def) {
  auto info = tableInfoFor(name, def);
  if (!info)
    return info.takeError();
  switch (def.kind) {
  case MU_HASH:
    return std::make_unique<HashTable>(std::move(*info));
  case MU_ARRAY:
    return std::make_unique<ArrayTable>(std::move(*info));
  case MU_LPM_LINEAR:
    return std::make_unique<LinearLpmTable>(std::move(*info));
  case MU_LPM_DIR24:
    return std::make_unique<Dir24Table>(std::move(*info));
  default: // MU_HASH_RTE, MU_LPM_RTE
#ifdef MORPHEUS_WITH_DPDK
    return makeDpdkTable(std::move(*info), mu_table_kind(def.kind));
#else
    return makeError("table '{0}': {1} is DPDK's, and this build has no DPDK (install "
                     "dpdk-dev, re-run cmake)",
                     name, info->typeName);
#endif
  }
}

} // namespace morpheus::user
