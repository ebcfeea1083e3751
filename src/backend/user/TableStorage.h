// The storage the user-space tables share (backend/user/Table.cpp and
// DpdkTables.cpp): value slots that never move, and the rules of a
// longest-prefix table, so every LPM kind keeps, and the snapshot reads,
// the rules as they were given (address bits beyond the length cleared).
#pragma once

#include "core/Tables.h"

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <vector>

namespace morpheus::user {

using core::Bytes;

// Fixed-size value slots with a free list: an entry's value never moves.
class ValuePool {
public:
  ValuePool(uint32_t valueSize, uint32_t slots)
      : valueSize(valueSize), storage(size_t(valueSize) * slots) {
    for (uint32_t slot = slots; slot-- > 0;)
      free.push_back(slot);
  }
  bool full() const { return free.empty(); }
  uint32_t take(const void *value) {
    uint32_t slot = free.back();
    free.pop_back();
    std::memcpy(at(slot), value, valueSize);
    return slot;
  }
  void give(uint32_t slot) { free.push_back(slot); }
  // The slot whose value `at` returned.
  uint32_t slotOf(const void *value) const {
    return uint32_t((static_cast<const uint8_t *>(value) - storage.data()) / valueSize);
  }
  uint8_t *at(uint32_t slot) { return storage.data() + size_t(slot) * valueSize; }
  const uint8_t *at(uint32_t slot) const { return storage.data() + size_t(slot) * valueSize; }

private:
  uint32_t valueSize;
  std::vector<uint8_t> storage;
  std::vector<uint32_t> free;
};

// The rules of a longest-prefix table, kept by every LPM implementation
// (forEach gives them back with the bits beyond their length cleared,
// whatever structure answers lookups; the kernel's trie ignores those bits
// in every lookup too):
// (prefix length, address bits beyond it cleared) -> value slot.
class PrefixRules {
public:
  PrefixRules(uint32_t addressBytes, uint32_t valueSize, uint32_t maxEntries)
      : addressBytes(addressBytes), valueBytes(valueSize), pool(valueSize, maxEntries) {}

  struct Prefix {
    uint32_t length;
    Bytes address; // bits beyond length cleared
    bool operator<(const Prefix &other) const {
      return length != other.length ? length > other.length : address < other.address;
    }
  };

  // The key { u32 prefixlen; address } as a prefix; nullopt for a length
  // beyond the address.
  std::optional<Prefix> prefixOf(const void *key) const {
    uint32_t length;
    std::memcpy(&length, key, sizeof length);
    if (length > addressBytes * 8)
      return std::nullopt;
    auto *bytes = static_cast<const uint8_t *>(key) + sizeof length;
    Prefix prefix{length, Bytes(bytes, bytes + addressBytes)};
    for (uint32_t bit = length; bit < addressBytes * 8; ++bit)
      prefix.address[bit / 8] &= uint8_t(~(0x80u >> (bit % 8)));
    return prefix;
  }

  bool update(const Prefix &prefix, const void *value) {
    if (auto rule = rules.find(prefix); rule != rules.end()) {
      std::memcpy(pool.at(rule->second), value, valueSize());
      return true;
    }
    if (pool.full())
      return false;
    rules.emplace(prefix, pool.take(value));
    return true;
  }
  bool remove(const Prefix &prefix) {
    auto rule = rules.find(prefix);
    if (rule == rules.end())
      return false;
    pool.give(rule->second);
    rules.erase(rule);
    return true;
  }
  void forEach(const std::function<bool(const Bytes &, const void *)> &visit) const {
    for (const auto &[prefix, slot] : rules) {
      Bytes key(sizeof(uint32_t));
      std::memcpy(key.data(), &prefix.length, sizeof prefix.length);
      key.insert(key.end(), prefix.address.begin(), prefix.address.end());
      if (!visit(key, pool.at(slot)))
        return;
    }
  }

  // What the kernel's LPM trie answers a lookup of `address` with prefix
  // length `keyLength`: the value of the longest rule no longer than
  // `keyLength` whose bits are the address's, or null; null too for a
  // length beyond the address (the trie matches nothing then). The tables
  // answer a whole address (the length of every packet lookup) from their
  // own structure and ask this for every other length.
  void *longestWithin(const uint8_t *address, uint32_t keyLength) {
    if (keyLength > addressBytes * 8)
      return nullptr;
    Prefix probe{keyLength, Bytes(address, address + addressBytes)};
    for (uint32_t bit = keyLength; bit < addressBytes * 8; ++bit)
      probe.address[bit / 8] &= uint8_t(~(0x80u >> (bit % 8)));
    for (;;) {
      if (auto rule = rules.find(probe); rule != rules.end())
        return pool.at(rule->second);
      if (probe.length == 0)
        return nullptr;
      --probe.length;
      probe.address[probe.length / 8] &= uint8_t(~(0x80u >> (probe.length % 8)));
    }
  }

  // Longest first, then by address: the order a linear scan wants.
  const std::map<Prefix, uint32_t> &all() const { return rules; }
  ValuePool &values() { return pool; }
  uint32_t valueSize() const { return valueBytes; }

private:
  uint32_t addressBytes;
  uint32_t valueBytes;
  ValuePool pool;
  std::map<Prefix, uint32_t> rules;
};

} // namespace morpheus::user
