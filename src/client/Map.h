// The client library for control planes (C++): what a program that
// configures an XDP program running under Morpheus needs, and nothing of
// the compiler. A control plane opens the maps `morpheus run` pinned,
// changes them so the very next packet sees the change (each change
// bracketed by the Morpheus guard pinned beside the map, which sends
// packets to the generic program until Morpheus has re-specialized), batches
// changes all-or-nothing (Transaction.h), and reads the maps with typed
// keys and values: a key or value is a plain struct (or raw Bytes), never
// bytes spelled by the caller. Every failure is an Error naming the map.
//
// The network functions' control planes (nf/*) use only this library;
// the C API (morpheus_client.h) sits on top of it.
#pragma once

#include "support/Bytes.h"
#include "support/Error.h"

#include <llvm/ADT/STLFunctionalExtras.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace morpheus::bpf {
class MapUpdater;
} // namespace morpheus::bpf

namespace morpheus::client {

class Map {
public:
  // Opens the map pinned at `pinPath` and the guard `morpheus run` pins
  // beside it; with that pin gone, the guard a running Morpheus (or its
  // specialized code) holds with the map (bpf::MapUpdater::open). Without
  // either, nothing specialized depends on the map: changes are plain
  // writes.
  static Expected<Map> open(const std::string &pinPath);

  Map(Map &&other) noexcept;
  Map &operator=(Map &&other) noexcept;
  ~Map();

  const std::string &name() const; // the pin path, as errors show it
  int fd() const; // for kernel operations this library does not wrap
  uint32_t keySize() const;
  uint32_t valueSize() const;
  uint32_t maxEntries() const { return entryLimit; }
  bool perCpu() const;
  // Whether changes bump a Morpheus guard.
  bool guarded() const;
  // Who held that guard when its pin beside the map was gone ("process
  // 812 (morpheus)"); "" when it was pinned there, or there is none.
  const std::string &guardHolder() const;

  // ---- Changes: each one bracketed by the guard. `flags` as for
  // bpf_map_update_elem (0 = BPF_ANY). A per-CPU map gets the value on
  // every CPU. Keys and values are structs or Bytes; sizes must match.
  template <typename K, typename V>
  Error update(const K &key, const V &value, uint64_t flags = 0) {
    return updateBytes(bytesOf(key), bytesOf(value), flags);
  }
  template <typename K> Error remove(const K &key) { return removeBytes(bytesOf(key)); }

  // ---- Reads: plain lookups (reading changes nothing, so no guard).
  // The value under `key`, std::nullopt when there is none. Not for
  // per-CPU maps (see eachCpu).
  template <typename V, typename K> Expected<std::optional<V>> lookup(const K &key) const {
    if (Error err = checkValue(sizeof(V), /*perCpuWanted=*/false))
      return err;
    auto raw = lookupBytes(bytesOf(key));
    if (!raw)
      return raw.takeError();
    if (!*raw)
      return std::nullopt;
    return fromBytes<V>(**raw);
  }
  // The value under `key`; a missing one is an error naming map and key.
  template <typename V, typename K> Expected<V> at(const K &key) const {
    auto value = lookup<V>(key);
    if (!value)
      return value.takeError();
    if (!*value)
      return missing(bytesOf(key));
    return **value;
  }
  // Per-CPU maps: every possible CPU's value under `key`, CPU 0 first; a
  // missing key is an error.
  template <typename V, typename K> Expected<std::vector<V>> eachCpu(const K &key) const {
    if (Error err = checkValue(sizeof(V), /*perCpuWanted=*/true))
      return err;
    auto raw = lookupBytes(bytesOf(key));
    if (!raw)
      return raw.takeError();
    if (!*raw)
      return missing(bytesOf(key));
    std::vector<V> values;
    size_t stride = perCpuStride();
    for (size_t offset = 0; offset + sizeof(V) <= (*raw)->size(); offset += stride)
      values.push_back(fromBytes<V>(Bytes((*raw)->begin() + offset,
                                          (*raw)->begin() + offset + sizeof(V))));
    return values;
  }
  // A per-CPU array of u64 counters: slot `index` summed over the CPUs.
  Expected<uint64_t> sumOverCpus(uint32_t index) const;

  // Array maps: slots [first, first + count), read in batches.
  template <typename V>
  Expected<std::vector<V>> slots(uint32_t first, uint32_t count) const {
    if (Error err = checkValue(sizeof(V), /*perCpuWanted=*/false))
      return err;
    auto raw = slotBytes(first, count);
    if (!raw)
      return raw.takeError();
    std::vector<V> values(count);
    if (count)
      std::memcpy(values.data(), raw->data(), raw->size());
    return values;
  }

  // ---- Key walks (the one walk, bpf::forEachKey): `visit` sees each key
  // until it returns false. A walk the kernel breaks off is an error.
  Error forEachKey(llvm::function_ref<bool(const Bytes &)> visit) const;
  // Every entry, each key once, in the kernel's order; values as the
  // syscalls read them (per-CPU maps: every CPU's copy back to back).
  // Entries deleted during the walk are left out.
  Expected<std::vector<std::pair<Bytes, Bytes>>> entries() const;
  // The same as structs, for maps whose entries are one K and one V.
  template <typename K, typename V>
  Expected<std::vector<std::pair<K, V>>> entriesAs() const {
    if (Error err = checkKey(sizeof(K)))
      return err;
    if (Error err = checkValue(sizeof(V), /*perCpuWanted=*/false))
      return err;
    auto raw = entries();
    if (!raw)
      return raw.takeError();
    std::vector<std::pair<K, V>> typed;
    typed.reserve(raw->size());
    for (const auto &[key, value] : *raw)
      typed.emplace_back(fromBytes<K>(key), fromBytes<V>(value));
    return typed;
  }
  // Every key, in the kernel's order.
  template <typename K> Expected<std::vector<K>> keysAs() const {
    if (Error err = checkKey(sizeof(K)))
      return err;
    std::vector<K> keys;
    if (Error err = forEachKey([&](const Bytes &key) {
          keys.push_back(fromBytes<K>(key));
          return true;
        }))
      return err;
    return keys;
  }

private:
  friend class PinnedMaps;
  friend class Transaction;
  Map() = default;

  Error updateBytes(const Bytes &key, const Bytes &value, uint64_t flags);
  Error removeBytes(const Bytes &key);
  Expected<std::optional<Bytes>> lookupBytes(const Bytes &key) const;
  Expected<Bytes> slotBytes(uint32_t first, uint32_t count) const;
  Error checkKey(size_t size) const;
  Error checkValue(size_t size, bool perCpuWanted) const;
  Error missing(const Bytes &key) const;
  size_t perCpuStride() const;

  std::unique_ptr<bpf::MapUpdater> updater;
  uint32_t entryLimit = 0;
};

} // namespace morpheus::client
